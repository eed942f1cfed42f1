"""A run deletion leaves no copy of its memories' text behind when another run's job writes one while the
deletion runs: the job's write-time update, applied between the deletion's redaction and its delete, quotes the
deleted memory in its undo record and its task's reason (regression trial of f9a54d2: fails before)."""

import json
import threading
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.models import Candidate
from memlane.services import consolidate, erase, ingest, redaction, stores

APP, TENANT = "app", "u1"
SC = {"app_id": APP, "tenant_id": TENANT, "agent_id": "a", "run_id": "r1"}
T0 = datetime(2025, 1, 10, tzinfo=timezone.utc)
OLD = "User lives in Boston."
NEW = "User moved to Denver last month."
RUN_A = dict(SC, run_id="a")
RUN_B = dict(SC, run_id="b")


class Scripted:
    """An extractor answering with the given statements (evidence: every message)."""

    def __init__(self, texts):
        self.texts = texts

    def extract(self, messages, **kw):
        return [Candidate(text=t, evidence=[m.message_id for m in messages]) for t in self.texts]


def say(deps, text, *, day, request_id, scope):
    return ingest.add(deps, "demo", scope=scope, sync=True, request_id=request_id,
                      messages=[{"role": "user", "content": text, "created_at": T0 + timedelta(days=day)}])


def table_mems(deps):
    return {m.memory_id: m for m in deps.repo.iter_memories("demo", APP, TENANT)}


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


def tenant_items(deps):
    return deps.table.query(f"demo#{APP}#{TENANT}", limit=10000).items


def test_a_supersede_written_after_the_runs_redaction_keeps_the_deleted_text(demo, monkeypatch):
    """Run b's add compares with a's Boston (its neighbour search ran before the deletion's index delete).
    delete_run(a) then deletes the index documents and redacts — once, before it deletes. b's job goes on:
    writes Denver, applies its write-time UPDATE action (before-image: Boston's text), its after_compare
    finds Boston still there. The deletion's conditional delete fails on the changed Boston, reads it again,
    reinstates past it and deletes it — and never redacts again: the deleted run's words stay in the
    action's before-image (and in b's task reason)."""
    deps = demo
    deps.extractor = Scripted([OLD])
    say(deps, "I live in Boston.", day=0, request_id="req-a", scope=RUN_A)
    redacted, resume = threading.Event(), threading.Event()
    original_redact, original_neighbours = redaction.redact, consolidate._neighbours
    errors = []

    def redact(*args, **kwargs):
        found = original_redact(*args, **kwargs)
        if not redacted.is_set():
            redacted.set()
            resume.wait(30)
        return found

    def deleting():
        try:
            erase.delete_run(deps, "demo", scope=RUN_A)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
            redacted.set()

    def neighbours(*args, **kwargs):
        found = original_neighbours(*args, **kwargs)
        if not redacted.is_set():
            threading.Thread(target=deleting, name="delete-run").start()
            redacted.wait(30)
        return found

    monkeypatch.setattr(redaction, "redact", redact)
    monkeypatch.setattr(consolidate, "_neighbours", neighbours)
    deps.extractor = Scripted([NEW])
    task = say(deps, "I moved to Denver last month.", day=30, request_id="req-b", scope=RUN_B)
    resume.set()
    for t in threading.enumerate():
        if t.name == "delete-run":
            t.join(30)
    assert not errors, errors
    assert task.outcomes[0].action.value == "UPDATE"
    assert [m.text for m in table_mems(deps).values()] == [NEW]
    leaks = [i["sk"] for i in tenant_items(deps) if "Boston" in json.dumps(i, default=str)]
    assert not leaks, f"the deleted run's text is still in {leaks}"
