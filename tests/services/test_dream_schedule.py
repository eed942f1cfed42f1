"""The activity registry and the scheduler: only due scopes, oldest first, within the bound, never twice."""

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.models import TaskStatus
from memlane.services import dream, extract, ingest, jobs, stores
from memlane.domain.scope import Scope

T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)


class Clock:
    def __init__(self, now: datetime):
        self.t = now

    def now(self) -> datetime:
        return self.t

    def advance(self, **kw) -> None:
        self.t += timedelta(**kw)


@pytest.fixture()
def clock(deps):
    deps.clock = Clock(T0)
    return deps.clock


@pytest.fixture()
def store(deps, clock):
    return stores.create(deps, name="demo").name


def add(deps, store, tenant, *, agent="bot", run="r1", text="I work as a nurse at the city hospital."):
    return ingest.add(deps, store, scope={"app_id": "app", "tenant_id": tenant, "agent_id": agent, "run_id": run},
                      messages=[{"role": "user", "content": text}])


def activity(deps, store, tenant, agent="bot", run="r1"):
    return deps.repo.get_activity(store, Scope(app_id="app", tenant_id=tenant, agent_id=agent, run_id=run))


def scheduled(tasks):
    return [(t.store, t.scope.tenant_id, t.scope.agent_id) for t in tasks]


def test_an_add_makes_its_scope_due(deps, store, clock):
    add(deps, store, "t1")
    info = activity(deps, store, "t1")
    assert info.pending_since == info.last_activity == T0 and info.last_dream is None
    clock.advance(minutes=5)
    add(deps, store, "t1")
    info = activity(deps, store, "t1")
    assert info.pending_since == T0 and info.last_activity == T0 + timedelta(minutes=5)  # waiting since the first


def test_only_due_scopes_oldest_first_within_the_bound(service, deps, store, clock):
    for i, tenant in enumerate(["t1", "t2", "t3", "t4", "t5"]):
        clock.t = T0 + timedelta(minutes=i)
        add(deps, store, tenant)
    service.drain()
    clock.t = T0 + timedelta(hours=1)
    dream.start(deps, store, scope={"app_id": "app", "tenant_id": "t2"}, sync=True)  # t2 dreamt: not due
    assert activity(deps, store, "t2").pending_since is None and activity(deps, store, "t2").last_dream

    first = dream.schedule(deps, max_scopes=2)
    assert scheduled(first) == [(store, "t1", "bot"), (store, "t3", "bot")]
    assert all(t.trigger == "schedule" and t.status == TaskStatus.PENDING for t in first)
    assert activity(deps, store, "t1").queued_task == first[0].task_id
    second = dream.schedule(deps, max_scopes=2)  # t1 and t3 are queued: not picked twice
    assert scheduled(second) == [(store, "t4", "bot"), (store, "t5", "bot")]
    assert dream.schedule(deps, max_scopes=2) == []

    service.drain()  # the queued dream jobs run
    for t in first + second:
        assert dream.get_task(deps, store, t.task_id).status == TaskStatus.SUCCEEDED
    assert all(activity(deps, store, t).pending_since is None for t in ("t1", "t3", "t4", "t5"))
    assert dream.schedule(deps) == []

    clock.advance(minutes=1)
    add(deps, store, "t4")  # new activity: due again
    assert scheduled(dream.schedule(deps)) == [(store, "t4", "bot")]


def test_one_dream_per_agent_covers_all_its_runs(deps, store, clock):
    add(deps, store, "t1", run="r1")
    add(deps, store, "t1", run="r2")
    add(deps, store, "t1", agent="other", run="r1")
    tasks = dream.schedule(deps, run_inline=True)
    assert sorted(scheduled(tasks)) == [(store, "t1", "bot"), (store, "t1", "other")]
    assert all(t.status == TaskStatus.SUCCEEDED and t.scope.run_id is None for t in tasks)
    for agent, run in (("bot", "r1"), ("bot", "r2"), ("other", "r1")):
        info = activity(deps, store, "t1", agent, run)
        assert info.pending_since is None and info.last_dream == T0


def test_a_queued_dream_that_never_started_is_queued_again_after_its_lease(deps, store, clock):
    add(deps, store, "t1")
    (lost,) = dream.schedule(deps)  # its job is lost
    clock.advance(seconds=deps.settings.dream_lease_seconds - 1)
    assert dream.schedule(deps) == []
    clock.advance(seconds=2)
    (again,) = dream.schedule(deps)
    assert again.task_id != lost.task_id


def test_a_failed_dream_leaves_its_scope_due(deps, store, clock):
    add(deps, store, "t1")
    (task,) = dream.schedule(deps)
    dream._claim(deps, deps.repo.get_dream_task(store, task.task_id))  # it started, then failed for good
    assert activity(deps, store, "t1").pending_since is None
    clock.advance(minutes=1)
    jobs.give_up(deps, jobs.Job(kind="dream", store=store, request_id=task.task_id), "boom")
    assert dream.get_task(deps, store, task.task_id).status == TaskStatus.FAILED
    assert activity(deps, store, "t1").pending_since == T0 + timedelta(minutes=1)
    assert scheduled(dream.schedule(deps)) == [(store, "t1", "bot")]


def test_extraction_that_writes_memories_makes_the_scope_due_again(service, deps, store, clock):
    task = add(deps, store, "t1")
    dream.schedule(deps, run_inline=True)  # dreams before the extraction ran
    assert activity(deps, store, "t1").pending_since is None
    clock.advance(minutes=1)
    extract.run(deps, store, task.request_id)
    assert activity(deps, store, "t1").pending_since == T0 + timedelta(minutes=1)


def test_reads_are_bounded_and_round_robin(deps, store, clock):
    deps.settings = dataclasses.replace(deps.settings, dream_scan_limit=2)
    for i in range(5):
        clock.t = T0 + timedelta(minutes=i)
        add(deps, store, f"t{i}")
    clock.t = T0 + timedelta(hours=1)
    picked = []
    for _ in range(3):
        picked += [t.scope.tenant_id for t in dream.schedule(deps, max_scopes=10, run_inline=True)]
    # each run read 2 registry entries from where the last stopped: all 5, each once, in 3 runs
    assert picked == ["t0", "t1", "t2", "t3", "t4"]
    assert dream.schedule(deps) == []


def test_stores_share_the_bound_oldest_first(deps, store, clock):
    stores.create(deps, name="other")
    add(deps, "other", "a")
    clock.advance(minutes=1)
    add(deps, store, "b")
    clock.advance(minutes=1)
    add(deps, "other", "c")
    assert scheduled(dream.schedule(deps, max_scopes=2)) == [("other", "a", "bot"), (store, "b", "bot")]
    assert scheduled(dream.schedule(deps, max_scopes=2)) == [("other", "c", "bot")]


def test_memlane_serve_runs_the_scheduler_on_its_interval(service, deps):
    import threading
    import time

    from memlane.server import LocalServer

    stores.create(deps, name="demo")
    add(deps, "demo", "t1")
    server = LocalServer(service, "127.0.0.1", 0, dream_interval=0.05)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tasks, _ = dream.list_tasks(deps, "demo", app_id="app", tenant_id="t1", limit=10, cursor=None)
            if tasks and tasks[0].status == TaskStatus.SUCCEEDED:
                break
            time.sleep(0.05)
        assert tasks and tasks[0].trigger == "schedule" and tasks[0].status == TaskStatus.SUCCEEDED
        assert len(tasks) == 1  # later runs found nothing due
    finally:
        server.shutdown()
        thread.join(10)


def test_a_scheduled_dream_is_in_the_audit_log_as_the_schedulers(service, deps, store, clock):
    """The audit log recorded requests only: a dream the schedule started — which may supersede, merge and retire a
    tenant's memories — left no row, so who changed what could not be told once an erasure took the dream's records
    (an AWS-path trial, session 31). Its start is a row of the scheduler's, as a POST .../dream is the caller's."""
    from memlane.services import audit

    add(deps, store, "t1", agent="a1")
    clock.advance(minutes=5)
    [task] = dream.schedule(deps)
    rows, _ = audit.list_(deps, store, limit=10, cursor=None, principal=dream.SCHEDULER)
    assert [(r.operation, r.target_id, r.status, r.app_id, r.tenant_id, r.agent_id) for r in rows] == \
        [("SCHEDULE /v1/stores/{store}/dream", task.task_id, 202, "app", "t1", "a1")]
    rows, _ = audit.list_(deps, store, limit=10, cursor=None, tenant_id="t1", operation="dream")
    assert [r.principal for r in rows] == [dream.SCHEDULER]
