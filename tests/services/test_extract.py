"""Extract: memories with evidence, idempotent under redelivery, failures recorded on the task."""

import pytest

from memlane.domain.models import ExtractAction, TaskStatus
from memlane.ports import Job
from memlane.repository import tenant_pk
from memlane.services import extract, ingest, jobs, search, stores, tasks

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
CONVO = [
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Max last Saturday.",
     "created_at": "2024-03-11T10:00:00Z"},
    {"role": "user", "name": "Ann", "content": "I work as a nurse at St. Mary's hospital in Denver."},
    {"role": "assistant", "content": "Thanks for sharing!"},
]


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def memory_items(deps, store):
    return [i for i in deps.table.query(tenant_pk(store, "app", "u1"), prefix="MEM#", limit=1000).items]


def add(deps, store, **kw):
    from datetime import datetime
    convo = [{**m, "created_at": datetime.fromisoformat(m["created_at"].replace("Z", "+00:00"))}
             if "created_at" in m else m for m in CONVO]
    return ingest.add(deps, store, scope=SCOPE, messages=convo, **kw)


def test_worker_extracts_memories_with_evidence(service, deps, store):
    task = add(deps, store)
    service.drain()
    done = tasks.get(deps, store, task.request_id)
    assert done.status == TaskStatus.SUCCEEDED
    texts = [o.text for o in done.outcomes]
    assert "Ann adopted a beagle named Max last Saturday." in texts
    assert any("nurse" in t for t in texts)
    assert not any("Thanks" in t for t in texts)
    mem = next(m for m in memory_items(deps, store) if "beagle" in m["text"])
    assert mem["evidence"] == [done.message_ids[0]]
    assert mem["event_time"].startswith("2024-03-09")  # last Saturday, from the message's own time


def test_redelivered_job_never_duplicates(service, deps, store):
    task = add(deps, store)
    service.drain()
    before = memory_items(deps, store)
    # Redelivery after success, and a re-run of a task forced back to RUNNING (crash mid-way).
    jobs.handle(deps, Job(kind="extract", store=store, request_id=task.request_id))
    t = tasks.get(deps, store, task.request_id)
    deps.repo.save_task(t.model_copy(update={"status": TaskStatus.RUNNING}))
    rerun = extract.run(deps, store, task.request_id)
    assert rerun.status == TaskStatus.SUCCEEDED
    assert sorted(i["memory_id"] for i in memory_items(deps, store)) == sorted(i["memory_id"] for i in before)
    assert {o.action for o in rerun.outcomes} == {ExtractAction.ADD}


def test_same_fact_twice_is_a_noop(service, deps, store):
    add(deps, store)
    service.drain()
    again = ingest.add(deps, store, scope=SCOPE, messages=[
        {"role": "user", "name": "Ann", "content": "I work as a nurse at St. Mary's hospital in Denver."}])
    service.drain()
    outcome = tasks.get(deps, store, again.request_id).outcomes
    assert [o.action for o in outcome] == [ExtractAction.NOOP]
    assert len([m for m in memory_items(deps, store) if "nurse" in m["text"]]) == 1


def test_failing_extraction_ends_failed_with_reason(service, deps, store):
    class Broken:
        def extract(self, messages, **_):
            raise RuntimeError("model exploded")

    deps.extractor = Broken()
    service.queue.base_delay = 0.01
    task = add(deps, store)
    service.drain(timeout=30)
    failed = tasks.get(deps, store, task.request_id)
    assert failed.status == TaskStatus.FAILED
    assert "model exploded" in failed.error
    assert failed.attempts == service.queue.max_attempts
    assert [j.request_id for j, _ in service.queue.dead()] == [task.request_id]


def test_sync_add_returns_memories(deps, store):
    task = add(deps, store, sync=True)
    assert task.status == TaskStatus.SUCCEEDED and len(task.memory_ids) == 2


def test_recall_only_policy_stores_messages_but_extracts_nothing(service, deps, store):
    task = add(deps, store, access_policy="recall_only")
    service.drain()
    assert task.status == TaskStatus.SUCCEEDED and task.extract is False
    assert memory_items(deps, store) == []
    assert search.search(deps, store, query="beagle", scope=SCOPE) == []
