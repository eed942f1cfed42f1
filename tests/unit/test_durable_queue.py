"""The local queue: durable across restarts, retries with backoff, dead-letters with a reason."""

import sqlite3
from contextlib import contextmanager

from memlane.adapters.local import database
from memlane.adapters.local.durable_queue import DurableQueue
from memlane.ports import Job


class FakeTime:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def job(n):
    return Job(kind="extract", store="s", request_id=f"r{n}")


def test_job_survives_restart(tmp_path):
    DurableQueue(tmp_path / "q.db").enqueue(job(1))
    seen = []
    q = DurableQueue(tmp_path / "q.db")
    q.drain(lambda j: seen.append(j.request_id), lambda j, why: None)
    assert seen == ["r1"] and q.pending() == 0


def test_job_leased_by_a_dead_process_comes_back(tmp_path):
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", lease_seconds=60, clock=clock)
    q.enqueue(job(1))
    assert q._claim() is not None  # claimed, then the process "dies"
    clock.t += 61
    q2 = DurableQueue(tmp_path / "q.db", lease_seconds=60, clock=clock)
    seen = []
    assert q2.process_one(lambda j: seen.append(j.request_id), lambda j, why: None)
    assert seen == ["r1"]


def test_retry_with_backoff_then_success(tmp_path):
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", base_delay=2.0, clock=clock)
    q.enqueue(job(1))
    calls = []

    def flaky(j):
        calls.append(clock.t)
        if len(calls) < 3:
            raise RuntimeError("boom")

    assert q.process_one(flaky, lambda j, why: None)
    assert not q.process_one(flaky, lambda j, why: None)  # not due yet: backoff
    clock.t += 2.0
    assert q.process_one(flaky, lambda j, why: None)
    clock.t += 3.9
    assert not q.process_one(flaky, lambda j, why: None)  # second delay is 4s
    clock.t += 0.1
    assert q.process_one(flaky, lambda j, why: None)
    assert len(calls) == 3 and q.pending() == 0


def test_poison_job_dead_lettered_with_reason(tmp_path):
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", max_attempts=3, base_delay=1.0, clock=clock)
    q.enqueue(job(1))
    dead = []

    def poison(j):
        raise ValueError("cannot parse")

    for _ in range(10):
        q.process_one(poison, lambda j, why: dead.append((j.request_id, why)))
        clock.t += 100
    assert dead == [("r1", "ValueError: cannot parse")]
    assert q.pending() == 0
    assert [j.request_id for j, _ in q.dead()] == ["r1"]


def _fill_to_the_last_page(q):
    """SQLite's own limit on a file's pages: the next write that needs a page is refused with SQLITE_FULL, as a full
    disk refuses it."""
    conn = q.db.conn
    conn.execute("CREATE TABLE IF NOT EXISTS scratch (body TEXT)")
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    return lambda: conn.execute("PRAGMA max_page_count = 1073741823")


def _writes_a_page(q):
    def handler(j):
        with q.db.transaction() as conn:
            conn.execute("INSERT INTO scratch VALUES (?)", ("x" * 20_000,))
    return handler


def test_a_job_refused_by_a_full_disk_is_handed_back_without_counting_the_attempt(tmp_path):
    """A faults trial: a full disk failed every attempt of an extraction, so after `max_attempts` quick retries the job
    was dead and its task FAILED although nothing was wrong with it. A full disk is not the job's failure: the job
    waits (FULL_DISK_RETRY) and runs once space is freed."""
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", max_attempts=3, base_delay=1.0, clock=clock)
    q.enqueue(job(1))
    dead = []
    free = _fill_to_the_last_page(q)
    handler = _writes_a_page(q)
    for _ in range(10):
        assert q.process_one(handler, lambda j, why: dead.append(why))
        assert not q.process_one(handler, lambda j, why: dead.append(why))  # not due before its delay
        clock.t += 5.0
    assert dead == [] and q.pending() == 1
    assert q.db.conn.execute("SELECT attempts, state FROM jobs").fetchall() == [(0, "ready")]
    free()
    assert q.process_one(handler, lambda j, why: dead.append(why))
    assert dead == [] and q.pending() == 0


def test_the_fate_of_a_job_a_full_disk_refused_to_record_is_written_once_it_can_be(tmp_path, monkeypatch):
    """The same trial: on a full disk the queue could not write a failed job's hand-back either, so the job stayed
    leased for its whole lease (300 s) after space was freed, its task RUNNING. What the queue could not write is owed
    and written before the next claim."""
    clock = FakeTime()
    q = DurableQueue(tmp_path / "q.db", lease_seconds=300, clock=clock)
    q.enqueue(job(1))
    real = q.db.transaction
    disk = {"full": False}

    @contextmanager
    def transaction():
        if disk["full"]:  # every write refused, as by a full disk (SQLITE_FULL, translated as the database does)
            raise database.full(_full_error())
        with real() as conn:
            yield conn

    monkeypatch.setattr(q.db, "transaction", transaction)

    def fills_the_disk(j):
        disk["full"] = True
        raise database.full(_full_error())

    assert q.process_one(fills_the_disk, lambda j, why: None)  # refused, and its hand-back refused too
    assert q.db.conn.execute("SELECT state FROM jobs").fetchall() == [("leased",)]
    disk["full"] = False
    clock.t += 5.0
    seen = []
    assert q.process_one(lambda j: seen.append(j.request_id), lambda j, why: None)  # owed, then claimed
    assert seen == ["r1"] and q.pending() == 0


def _full_error():
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = sqlite3.SQLITE_FULL
    return error
