"""An erasure that dies half way through a store and runs again leaves nothing that names the tenant: not in its
partition, nor in the store's global partitions (request-id pointers, open-task entries, dream task and action
pointers, the activity registry), nor in the index (its threads' summaries) — what is found only from the tenant's
items goes before them."""

import json
from dataclasses import replace

import pytest

from memlane.domain.models import TaskStatus
from memlane.domain.scope import Scope
from memlane.faults import Faults
from memlane.services import dream, erase, ingest, search, stores, summaries, tasks

ALICE = {"app_id": "app", "tenant_id": "alice", "agent_id": "bot"}
BOB = {"app_id": "app", "tenant_id": "bob", "agent_id": "bot", "run_id": "r1"}


class Crash(Exception):
    pass


def _crash(point: str) -> None:
    raise Crash(point)


def _documents(deps, tenant):
    return sorted((d.memory_id, d.text) for d in deps.index.documents("demo") if d.tenant_id == tenant)


def _naming(deps, tenant):
    """Every table item, in every partition, that names the tenant (the erasure records excepted: they are the
    erasure's own report)."""
    with deps.table.database.lock:
        rows = deps.table.database.conn.execute("SELECT pk, sk, body FROM items").fetchall()
    return sorted((pk, sk) for pk, sk, body in rows
                  if pk != "~erasures" and tenant in f"{pk} {sk} {body}")


@pytest.fixture()
def crowded(service, deps):
    """Two finished adds, a thread long enough to be summarised, a dream with its actions applied, then an add still
    pending (its job not run)."""
    stores.create(deps, name="demo", summary_trigger_tokens=120, summary_keep_recent=2)
    for i, text in enumerate(["I keep bees on my rooftop in Brooklyn.", "I am learning to play the cello."]):
        ingest.add(deps, "demo", scope={**ALICE, "run_id": f"r{i}"}, request_id=f"alice-visit-{i}",
                   messages=[{"role": "user", "name": "Ann", "content": text}])
    ingest.add(deps, "demo", scope={**ALICE, "run_id": "long"}, request_id="alice-long", messages=[
        {"role": "user" if i % 2 == 0 else "assistant",
         "content": f"On day {i} we talked about the Lisbon trip budget item {i} and the hotel near Alfama."}
        for i in range(12)])
    ingest.add(deps, "demo", scope=BOB, request_id="bob-visit",
               messages=[{"role": "user", "content": "I keep bees in the countryside too."}])
    service.drain()
    task = dream.start(deps, "demo", scope={"app_id": "app", "tenant_id": "alice"}, sync=True)
    assert task.status == TaskStatus.SUCCEEDED and task.action_ids, task
    for action_id in task.action_ids:
        dream.apply_action(deps, "demo", action_id)
    ingest.add(deps, "demo", scope={**ALICE, "run_id": "r9"}, request_id="alice-pending",
               messages=[{"role": "user", "content": "Pending one."}])
    assert tasks.get(deps, "demo", "alice-pending").status == TaskStatus.PENDING
    return deps


@pytest.mark.parametrize("point", ["erase.mid_store", "erase.after_store", "erase.before_done"])
def test_an_erasure_killed_and_resumed_leaves_nothing_naming_the_tenant(service, crowded, point):
    """A trial on the AWS path (3 of 3): killed at `erase.mid_store` and delivered again, the erasure reported
    SUCCEEDED while the tenant's request-id pointers, open-task entry and dream task and action pointers stayed for
    good — listed from its items, which the first attempt had deleted, so the resumed one never found them."""
    deps = crowded
    before = _naming(deps, "alice")
    assert {pk for pk, _ in before} >= {"demo#~requests", "demo#~open", "demo#~dream", "demo#~activity"}, before
    assert any(sk.startswith("SUM#") for _, sk in before), before
    documents = _documents(deps, "alice")
    assert summaries.doc_id(Scope(**ALICE, run_id="long")) in {doc for doc, _ in documents}, documents
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    with pytest.raises(Crash):
        erase.run_erasure(replace(deps, faults=Faults(f"{point}@1", crash=_crash)), erasure.erasure_id)
    done = erase.run_erasure(deps, erasure.erasure_id)
    assert done.status == TaskStatus.SUCCEEDED
    left = _naming(deps, "alice")
    assert left == [], left
    outside = [k for k in before if not k[0].startswith("demo#app#")]
    requests = {sk.split("#", 1)[0] for pk, sk in before if pk == "demo#~requests"}
    assert requests == {"alice-visit-0", "alice-visit-1", "alice-long", "alice-pending"}
    report = done.deleted["demo"]
    assert report["request_ids"] == len(requests), json.dumps(report)
    # Each global item but the request pointers and open-task entries is a registry entry of the report.
    assert report["registry_entries"] == len([k for k in outside if k[0] not in ("demo#~requests", "demo#~open")])
    assert _documents(deps, "alice") == []
    assert report["index_documents"] == len(documents), json.dumps(report)
    assert search.search(deps, "demo", query="bees cello", scope={"app_id": "app", "tenant_id": "alice"}) == []
    service.drain()  # the pending add's job, delivered after: it writes nothing back
    assert _naming(deps, "alice") == [] and _documents(deps, "alice") == []
    assert _naming(deps, "bob")  # another tenant's stay


def test_a_run_deletion_killed_between_its_summary_and_the_summary_document_leaves_no_document(service, deps,
                                                                                               monkeypatch):
    """The summary's item went before its document, and a job resumed in between found the run cleared (no message,
    no summary) and stopped: the thread's summarised text stayed searchable for good. Its document goes first now."""
    from memlane.adapters.local.embedded_index import TenantEmbeddedIndex

    stores.create(deps, name="demo", summary_trigger_tokens=120, summary_keep_recent=2)
    run = {**ALICE, "run_id": "long"}
    ingest.add(deps, "demo", scope=run, request_id="alice-long", messages=[
        {"role": "user" if i % 2 == 0 else "assistant",
         "content": f"On day {i} we talked about the Lisbon trip budget item {i} and the hotel near Alfama."}
        for i in range(12)])
    service.drain()
    summary = summaries.doc_id(Scope(**run))
    assert summary in {doc for doc, _ in _documents(deps, "alice")}
    delete = TenantEmbeddedIndex.delete

    def killed_before_the_summary_document(self, store, ids, **kwargs):
        if list(ids) == [summary]:  # summaries.delete: its item is gone, its document next
            raise Crash("killed")
        delete(self, store, ids, **kwargs)

    monkeypatch.setattr(TenantEmbeddedIndex, "delete", killed_before_the_summary_document)
    with pytest.raises(Crash):
        erase.delete_run(deps, "demo", scope=run)
    monkeypatch.undo()
    erase.finish_run_deletion(deps, erase.clear_run_job("demo", Scope(**run), "resumed"))  # the job, delivered
    assert _documents(deps, "alice") == []


@pytest.mark.parametrize("registered", [True, False], ids=["a-thread", "a-run-of-no-registry-entry"])
def test_a_run_deletion_killed_among_explicit_memories_is_finished_by_its_job(service, deps, monkeypatch, registered):
    """A trial (session 32): a thread of explicit memories only (no message, no summary), its deletion killed after
    the index and before the table: its job found no message and no summary and stopped, and a retry of DELETE
    .../threads/{id} answered 404 — the memories stayed readable for good. And a run with no registry entry queued
    no job at all (a run of explicit writes alone has none)."""
    from memlane.services import explicit, memories, redaction, threads

    stores.create(deps, name="demo")
    run = {**ALICE, "run_id": "th1"}
    if registered:
        threads.create(deps, "demo", thread_id="th1", scope=ALICE)
    explicit.write(deps, "demo", scope=run, memories=[{"text": f"Alice's locker {i} code is {4400 + i}."}
                                                     for i in range(5)])
    assert (deps.repo.get_scope("demo", Scope(**run)) is not None) == registered  # a write alone makes no entry

    def killed(*args, **kwargs):
        raise Crash("killed")

    monkeypatch.setattr(redaction, "redact", killed)
    with pytest.raises(Crash):
        erase.delete_run(deps, "demo", scope=run)
    monkeypatch.undo()
    service.queue.take_ownership()  # the server restarted: its jobs are due at once
    service.drain()  # the job the deletion committed first
    left, _ = memories.list_(deps, "demo", scope={**ALICE, "agent_id": "*", "run_id": "*"}, limit=50, cursor=None)
    assert left == [] and _documents(deps, "alice") == []


def test_a_resumed_erasure_takes_out_a_document_a_job_killed_with_it_indexed_after_the_listing(service, crowded):
    """A fault schedule (CI, `any@23`): an extraction indexed a memory after the erasure had listed the tenant's items
    and deleted them; the process died (at `erase.after_store`) before the job could take its document back, and its
    task was erased, so no delivery ran again: the memory stayed searchable in the index with no item behind it."""
    from memlane.domain.models import Memory

    deps = crowded
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    late = Memory(memory_id="late-one", scope=Scope(**ALICE, run_id="r9"), text="Ann keeps bees on a rooftop.",
                  created_at=erasure.created_at, updated_at=erasure.created_at)

    def killed(point: str) -> None:  # the job indexed between the listing and the crash
        deps.index.upsert("demo", [(late, deps.embedder.embed([late.text])[0])])
        raise Crash(point)

    with pytest.raises(Crash):
        erase.run_erasure(replace(deps, faults=Faults("erase.after_store@1", crash=killed)), erasure.erasure_id)
    assert ("late-one", late.text) in _documents(deps, "alice")
    done = erase.run_erasure(deps, erasure.erasure_id)
    assert done.status == TaskStatus.SUCCEEDED
    assert _documents(deps, "alice") == []
    assert search.search(deps, "demo", query="bees rooftop", scope={"app_id": "app", "tenant_id": "alice"}) == []
