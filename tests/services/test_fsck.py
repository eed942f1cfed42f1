"""`memlane fsck STORE`: table and index compared; drift found, counted and (with repair) fixed."""

import json
from datetime import datetime, timezone

import pytest

from memlane.cli import main
from memlane.domain.models import Memory, RecordType
from memlane.domain.records import message_document
from memlane.domain.scope import Scope
from memlane.services import explicit, ingest, memories, messages, search, stores
from memlane.services.fsck import fsck

U1 = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
U2 = {**U1, "tenant_id": "u2"}


@pytest.fixture()
def store(deps):
    stores.create(deps, name="demo")
    ingest.add(deps, "demo", scope=U1, sync=True, messages=[
        {"role": "user", "name": "Ann", "content": "I adopted a beagle named Max."},
        {"role": "user", "name": "Ann", "content": "I work as a nurse in Denver."}])
    ingest.add(deps, "demo", scope=U2, sync=True, messages=[
        {"role": "user", "name": "Bob", "content": "I play the cello in a quartet."}])
    return "demo"


def _memories(deps, tenant):
    return memories.list_(deps, "demo", scope={"app_id": "app", "tenant_id": tenant}, limit=50, cursor=None)[0]


def _drift(deps):
    """One doc lost, one ghost with no table row, one doc whose text is stale, and one under another tenant
    with the stale one's id (a document is its tenant's: that one is an orphan of u2)."""
    beagle, nurse = sorted(_memories(deps, "u1"), key=lambda m: "nurse" in m.text)
    deps.index.delete("demo", [beagle.memory_id], app_id="app", tenant_id="u1")
    now = datetime.now(timezone.utc)
    ghost = Memory(memory_id="ghost1", scope=Scope(**U1), text="Ann owns a yacht.", created_at=now, updated_at=now)
    stale = nurse.model_copy(update={"text": "Ann is a pilot."})
    moved = nurse.model_copy(update={"text": "Ann flies planes.", "scope": Scope(**U2)})
    deps.index.upsert("demo", [(d, deps.embedder.embed([d.text])[0]) for d in (ghost, stale, moved)])
    return beagle, nurse


def _hits(deps, tenant, query):
    return [h.memory.memory_id for h in search.search(deps, "demo", query=query, top_k=5, recipe="keyword",
                                                      scope={"app_id": "app", "tenant_id": tenant})]


def test_a_consistent_store_is_clean(deps, store):
    report = fsck(deps, store)
    assert (report.memories, report.messages, report.documents) == (3, 3, 6)  # messages are documents too
    assert (report.missing, report.orphans, report.stale) == (0, 0, 0)


def _message_drift(deps):
    """A message document lost, one whose text, one whose record type went stale, and a ghost message."""
    msgs = {m.content: m for m in messages.list_(deps, "demo", scope=U1, limit=10, cursor=None)[0]}
    beagle, nurse = msgs["I adopted a beagle named Max."], msgs["I work as a nurse in Denver."]
    [cello] = messages.list_(deps, "demo", scope=U2, limit=10, cursor=None)[0]
    deps.index.delete("demo", [beagle.message_id], app_id="app", tenant_id="u1")
    stale = message_document(nurse).model_copy(update={"text": "I work as a pilot."})
    retyped = message_document(cello).model_copy(update={"record_type": RecordType.MEMORY})
    ghost = message_document(nurse.model_copy(update={"message_id": "ghost-msg", "content": "I own a yacht."}))
    deps.index.upsert("demo", [(d, deps.embedder.embed([d.text])[0]) for d in (stale, retyped, ghost)])
    return beagle, nurse, cello


def _message_hits(deps, tenant, query):
    return [h.memory.memory_id for h in search.search(deps, "demo", query=query, top_k=5, recipe="keyword",
                                                      record_types=["message"],
                                                      scope={"app_id": "app", "tenant_id": tenant})]


def test_message_documents_drift_is_found_then_repaired(deps, store):
    beagle, nurse, cello = _message_drift(deps)
    found = fsck(deps, store)
    assert (found.missing, found.orphans, found.stale) == (1, 1, 2)
    fixed = fsck(deps, store, repair=True)
    assert fixed.repaired == 4
    again = fsck(deps, store)
    assert (again.missing, again.orphans, again.stale) == (0, 0, 0)
    assert _message_hits(deps, "u1", "beagle") == [beagle.message_id]
    assert _message_hits(deps, "u1", "nurse") == [nurse.message_id] and _message_hits(deps, "u1", "pilot") == []
    assert _message_hits(deps, "u1", "yacht") == []
    assert _message_hits(deps, "u2", "cello") == [cello.message_id]


def test_drift_is_found_then_repaired(deps, store):
    beagle, nurse = _drift(deps)
    found = fsck(deps, store)
    assert (found.missing, found.orphans, found.stale, found.repaired) == (1, 2, 1, 0)
    assert beagle.memory_id not in _hits(deps, "u1", "beagle")  # a check alone changes nothing

    fixed = fsck(deps, store, repair=True)
    assert (fixed.missing, fixed.orphans, fixed.stale, fixed.repaired) == (1, 2, 1, 4)
    again = fsck(deps, store)
    assert (again.missing, again.orphans, again.stale) == (0, 0, 0)
    assert beagle.memory_id in _hits(deps, "u1", "beagle")
    assert _hits(deps, "u1", "yacht") == [] and _hits(deps, "u1", "pilot") == [] and _hits(deps, "u2", "planes") == []
    assert nurse.memory_id in _hits(deps, "u1", "nurse")


def test_two_tenants_holding_one_memory_id_are_two_documents(deps, store):
    """A memory id is its tenant's: fsck expects, counts and repairs each tenant's document apart."""
    for scope, text in ((U1, "Ann's seat is 2C."), (U2, "Bob's seat is 14F.")):
        explicit.write(deps, "demo", scope=scope, memories=[{"text": text, "memory_id": "seat"}])
    clean = fsck(deps, store)
    assert (clean.memories, clean.missing, clean.orphans, clean.stale) == (5, 0, 0, 0)
    deps.index.delete("demo", ["seat"], app_id="app", tenant_id="u2")
    found = fsck(deps, store, repair=True)
    assert (found.missing, found.orphans, found.stale, found.repaired) == (1, 0, 0, 1)
    assert _hits(deps, "u1", "seat") == ["seat"] == _hits(deps, "u2", "seat")


def test_cli_reports_counts_and_exit_status(service, store, capsys):
    _drift(service.deps)
    data_dir = str(service.deps.table.path).rsplit("/", 1)[0]
    service.close()  # fsck works on a data dir no server holds (exit 4 otherwise)
    assert main(["--json", "fsck", store, "--data-dir", data_dir]) == 1  # drift found, not repaired
    report = json.loads(capsys.readouterr().out)
    assert (report["missing"], report["orphans"], report["stale"]) == (1, 2, 1)
    assert main(["fsck", store, "--data-dir", data_dir, "--repair"]) == 0
    assert "repaired 4" in capsys.readouterr().out
    assert main(["fsck", store, "--data-dir", data_dir]) == 0
