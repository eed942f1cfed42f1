"""The local worker: supervised, fair across tenants, atomic with the task, one owner, graceful stop."""

from __future__ import annotations

import threading
import time

import pytest

from memlane.adapters.local.durable_queue import DurableQueue
from memlane.adapters.local.sqlite_table import SqliteTable
from memlane.domain.errors import ConditionFailed, NotFound
from memlane.ports import Job, Put


class FakeTime:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def job(n, group=""):
    return Job(kind="extract", store="s", request_id=f"r{n}", group=group)


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_failing_failure_handler_does_not_stop_the_worker(tmp_path):
    """Issue 15 #2: a dead job whose task is gone made on_dead raise NotFound, and the worker died."""
    q = DurableQueue(tmp_path / "q.db", max_attempts=1)
    done = []

    def handler(j):
        if j.request_id == "r1":
            raise RuntimeError("poison")
        done.append(j.request_id)

    def on_dead(j, why):
        raise NotFound("task 'r1' not found", code="task_not_found")

    q.enqueue(job(1))
    q.start(handler, on_dead, poll=0.01)
    try:
        assert wait_for(lambda: q.dead())
        q.enqueue(job(2))
        assert wait_for(lambda: done == ["r2"]), "the worker stopped after the failure handler raised"
        assert q.alive is True
    finally:
        q.stop()


def test_an_error_outside_any_job_does_not_stop_the_worker(tmp_path, monkeypatch):
    q = DurableQueue(tmp_path / "q.db")
    real, calls = q._claim, []

    def flaky_claim():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("database is locked")
        return real()

    monkeypatch.setattr(q, "_claim", flaky_claim)
    done = []
    q.enqueue(job(1))
    q.start(lambda j: done.append(j.request_id), lambda j, why: None, poll=0.01)
    try:
        assert wait_for(lambda: done == ["r1"])
    finally:
        q.stop()


def test_tenants_take_turns_and_one_tenant_runs_one_job_at_a_time(tmp_path):
    """Issue 15 #12: a tenant's backlog (or one huge add) must not hold every worker."""
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", clock=clock)
    for n in range(5):
        q.enqueue(job(f"a{n}", group="s/app/alice"))
        clock.t += 1
    q.enqueue(job("b0", group="s/app/bob"))
    q.enqueue(job("b1", group="s/app/bob"))
    clock.t += 1
    first = q._claim()
    second = q._claim()  # alice's first job is still running: bob goes next, not alice's second
    assert (first[1].request_id, second[1].request_id) == ("ra0", "rb0")
    assert q._claim() is None  # both tenants busy: nothing else may start
    order = [first[1].request_id, second[1].request_id]
    seen = []
    # finish both, then the rest alternates between the tenants
    for claimed in (first, second):
        q.db.conn.execute("DELETE FROM jobs WHERE id = ?", (claimed[0],))
    clock.t += 1
    while (c := q._claim()) is not None:
        seen.append(c[1].request_id)
        q.db.conn.execute("DELETE FROM jobs WHERE id = ?", (c[0],))
        clock.t += 1
    assert order + seen == ["ra0", "rb0", "ra1", "rb1", "ra2", "ra3", "ra4"]


def test_two_workers_never_run_the_same_job(tmp_path):
    """Issue 15 #8: the claim was a SELECT then an UPDATE outside one transaction."""
    path = tmp_path / "q.db"
    a, b = DurableQueue(path), DurableQueue(path)  # as two processes on one file would
    for n in range(60):
        a.enqueue(job(n, group=f"g{n}"))
    runs: list[str] = []
    lock = threading.Lock()

    def handler(j):
        time.sleep(0.001)
        with lock:
            runs.append(j.request_id)

    def work(q):
        while q.process_one(handler, lambda j, why: None):
            pass

    threads = [threading.Thread(target=work, args=(q,)) for q in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(runs) == sorted(f"r{n}" for n in range(60))


def test_commit_writes_the_job_in_the_tasks_transaction(tmp_path):
    """Issue 15 #4: a task committed and then enqueued could be stranded by a crash in between."""
    table = SqliteTable(tmp_path / "table.db")
    q = DurableQueue(table.database)
    q.commit(table, [Put({"pk": "p", "sk": "TASK#1"}, if_absent=True)], job(1))
    assert q.depth() == 1 and table.get("p", "TASK#1") is not None
    with pytest.raises(ConditionFailed):  # the task write fails: no job either
        q.commit(table, [Put({"pk": "p", "sk": "TASK#1"}, if_absent=True)], job(2))
    assert q.depth() == 1
    with pytest.raises(RuntimeError):  # the job write fails: no task either
        original = q._insert

        def broken(*args):
            raise RuntimeError("disk full")

        q._insert = broken
        try:
            q.commit(table, [Put({"pk": "p", "sk": "TASK#3"}, if_absent=True)], job(3))
        finally:
            q._insert = original
    assert table.get("p", "TASK#3") is None and q.depth() == 1


def test_a_new_owner_releases_the_dead_owners_leases_at_once(tmp_path):
    """Issue 15 #3: after a kill the job stayed leased for the whole 300 s lease."""
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", clock=clock)
    q.enqueue(job(1))
    assert q._claim() is not None  # the owner dies mid-job
    q2 = DurableQueue(tmp_path / "q.db", clock=clock)
    assert q2._claim() is None  # still leased
    assert q2.take_ownership() == 1
    seen = []
    assert q2.process_one(lambda j: seen.append(j.request_id), lambda j, why: None) and seen == ["r1"]


def test_graceful_stop_hands_back_an_unfinished_job_without_counting_the_attempt(tmp_path):
    q = DurableQueue(tmp_path / "q.db", workers=1)
    started, release = threading.Event(), threading.Event()

    def slow(j):
        started.set()
        release.wait(30)

    q.enqueue(job(1))
    q.start(slow, lambda j, why: None, poll=0.01)
    assert started.wait(20)
    assert q.stop(grace=0.1) == 1
    state, attempts, due = q.db.conn.execute("SELECT state, attempts, available_at FROM jobs").fetchone()
    assert (state, attempts) == ("ready", 0) and due <= time.time()
    release.set()


def test_a_job_that_kills_the_process_every_time_is_dead_lettered(tmp_path):
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", max_attempts=2, clock=clock)
    q.enqueue(job(1))
    for _ in range(2):  # leased, then the process dies (no handler outcome), then restarts
        assert q._claim() is not None
        q.take_ownership()
    dead = []
    assert q.process_one(lambda j: None, lambda j, why: dead.append(why))
    assert dead and "abandoned" in dead[0] and q.depth() == 0


def test_the_same_waiting_work_is_queued_once(tmp_path):
    q = DurableQueue(tmp_path / "q.db")
    q.enqueue(job(1))
    q.enqueue(job(1))  # e.g. a replay, or the sweeper, while the first is still waiting
    assert q.depth() == 1
