"""The local queue: durable across restarts, retries with backoff, dead-letters with a reason."""

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
