"""A trial (session 37): sweeper passes at once (threads) over more open tasks than a pass's limit, a sweeper pass
racing a task that completes, and a manual retry (POST .../tasks/{id}/retry) racing an in-flight delivery."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from memlane.domain.models import TaskStatus
from memlane.repository.open_tasks import OpenTaskRecords
from memlane.services import extract, ingest, stores, sweep, tasks
from tests.services.test_extract_retries import APP, TENANT, say
from tests.services.test_extract_concurrent_deliveries import (Counted, Delivery, Gates, X, Y, Z, check_clean,
                                                              given_up_and_retried)

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
TEXT = "My sister Clara lives in Lisbon and teaches piano."


@pytest.fixture()
def svc(svc):
    stores.create(svc.deps, name="zeta")
    return svc


def lost_jobs(svc, monkeypatch):
    """Five open tasks (3 in demo, 2 in zeta) whose jobs were lost, past the sweeper's deadline. Returns the
    registry keys in the order a pass visits them, and a log of the jobs the sweeper sends."""
    for store, n in (("demo", 3), ("zeta", 2)):
        for i in range(n):
            ingest.add(svc.deps, store, scope=SCOPE, text=f"{TEXT} ({i})", request_id=f"r-{i}")
    svc.queue.db.conn.execute("DELETE FROM jobs")
    later = svc.deps.clock.now() + timedelta(seconds=svc.deps.settings.task_deadline_seconds + 1)
    monkeypatch.setattr(svc.deps.clock, "now", lambda: later)
    sent: list[tuple[str, str]] = []
    enqueue = svc.queue.enqueue
    lock = threading.Lock()

    def logged(job, **kw):
        with lock:
            sent.append((job.store, job.request_id))
        return enqueue(job, **kw)

    monkeypatch.setattr(svc.queue, "enqueue", logged)
    return sent


class HeldAtMark:
    """The pass in thread `name` is held right after it read the sweep mark."""

    def __init__(self, monkeypatch, name):
        self.reached, self.go = threading.Event(), threading.Event()
        original = OpenTaskRecords.sweep_mark

        def sweep_mark(repo):
            mark = original(repo)
            if threading.current_thread().name == name:
                self.reached.set()
                assert self.go.wait(60)
            return mark

        monkeypatch.setattr(OpenTaskRecords, "sweep_mark", sweep_mark)


class Pass(threading.Thread):
    def __init__(self, deps, name, limit):
        super().__init__(name=name, daemon=True)
        self.deps, self.limit, self.report, self.error = deps, limit, None, None

    def run(self):
        try:
            self.report = sweep.sweep(self.deps, limit=self.limit)
        except BaseException as e:  # noqa: BLE001
            self.error = e


def test_a_slow_sweep_pass_does_not_move_the_mark_back(svc, monkeypatch):
    """Before: Pass P1 reads the mark (none) and is slow; P2 and P3 run whole meanwhile (mark: 3rd entry,
    then past the 5th: gone); P1 then checks the first two again and writes the mark it computed from its stale read
    — back to the 3rd entry: the set_sweep_mark write is unconditional."""
    deps = svc.deps
    lost_jobs(svc, monkeypatch)
    held = HeldAtMark(monkeypatch, "P1")
    p1 = Pass(deps, "P1", 2)
    p1.start()
    assert held.reached.wait(60)
    sweep.sweep(deps, limit=2)
    after_p2 = deps.repo.sweep_mark()
    sweep.sweep(deps, limit=2)
    after_p3 = deps.repo.sweep_mark()
    held.go.set()
    p1.join(60)
    assert p1.error is None, p1.error
    assert after_p2 is not None and after_p2[0] == "demo"
    assert deps.repo.sweep_mark() == after_p3, f"mark went back from {after_p3} to {deps.repo.sweep_mark()}"


def test_overlapping_sweep_passes_send_every_lost_job_and_skip_none(svc, monkeypatch):
    """Holds: with passes overlapping (one held after reading the mark while two others run), every lost job is sent
    again within a few passes, none is skipped for good, and the jobs then finish each task once."""
    deps = svc.deps
    sent = lost_jobs(svc, monkeypatch)
    held = HeldAtMark(monkeypatch, "P1")
    p1 = Pass(deps, "P1", 2)
    p1.start()
    assert held.reached.wait(60)
    p2 = Pass(deps, "P2", 2)
    p2.start()
    p2.join(60)
    held.go.set()
    p1.join(60)
    for _ in range(3):
        assert sweep.sweep(deps, limit=2) is not None
    assert p1.error is None and p2.error is None
    assert {r for _, r in sent} >= {"r-0", "r-1", "r-2"} and {s for s, _ in sent} == {"demo", "zeta"}
    assert sorted(set(sent)) == sorted({("demo", "r-0"), ("demo", "r-1"), ("demo", "r-2"), ("zeta", "r-0"),
                                        ("zeta", "r-1")})
    svc.drain()
    for store, n in (("demo", 3), ("zeta", 2)):
        for i in range(n):
            t = deps.repo.locate_task(store, f"r-{i}")
            assert t.status == TaskStatus.SUCCEEDED and t.attempts >= 1
        texts = [m.text for m in deps.repo.iter_memories(store, "app", "u1")]
        assert len(texts) == len(set(texts)), texts
    assert list(deps.repo.open_tasks("demo")) == [] and list(deps.repo.open_tasks("zeta")) == []


def test_a_sweep_giving_up_on_a_task_that_completes_meanwhile_leaves_it_succeeded(svc, monkeypatch):
    """Holds: the sweeper reads a RUNNING task at its last attempt past the deadline; the delivery finishes before
    the sweeper's give-up writes: the task stays SUCCEEDED with its outcomes, its entry closed."""
    deps = svc.deps
    task = ingest.add(deps, "demo", scope=SCOPE, text=TEXT, request_id="r-9")
    svc.queue.db.conn.execute("DELETE FROM jobs")
    stuck = deps.repo.locate_task("demo", "r-9").model_copy(
        update={"status": TaskStatus.RUNNING, "attempts": deps.settings.max_extract_attempts - 1})
    deps.repo.save_task(stuck)
    later = deps.clock.now() + timedelta(seconds=deps.settings.task_deadline_seconds + 1)
    fail = extract.fail

    def finished_first(d, store, request_id, reason, **kw):
        monkeypatch.setattr(deps.clock, "now", lambda: later - timedelta(seconds=deps.settings.task_deadline_seconds))
        done = extract.run(deps, "demo", request_id)  # the slow last delivery completes now
        assert done.status == TaskStatus.SUCCEEDED
        monkeypatch.setattr(deps.clock, "now", lambda: later)
        return fail(d, store, request_id, reason, **kw)

    deps.repo.save_task(stuck.model_copy(update={"attempts": deps.settings.max_extract_attempts}))
    monkeypatch.setattr(deps.clock, "now", lambda: later)
    monkeypatch.setattr(extract, "fail", finished_first)
    sweep.sweep(deps)
    done = deps.repo.locate_task("demo", task.request_id)
    assert done.status == TaskStatus.SUCCEEDED and done.outcomes and done.error is None
    assert list(deps.repo.open_tasks("demo")) == []


# -- 4. a manual retry racing an in-flight delivery ----------------------------------------------------------------


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


def test_a_manual_retry_while_a_delivery_is_in_flight_leaves_nothing_unnamed(demo, monkeypatch):
    """Before: Delivery A reads the task and asks the model; meanwhile the job is given up (the queue's last
    delivery, or the sweeper: FAILED) and the user retries it (PENDING, its job queued). A goes on: its note of what it
    writes finds the task not RUNNING and silently does nothing, and A writes its memories unnoted; its end finds the
    task PENDING and leaves it. The retry's job has no recorded answer, asks the model again (another answer) and
    finishes: what A wrote and the retry's answer does not repeat is named by no task."""
    deps = demo
    deps.extractor = Counted([X, Y], [X, Z])
    task = say(deps, "Clara is in Lisbon; cello on Sundays; peanuts are out.", day=0, request_id="req-1", sync=False)
    gates = Gates(monkeypatch, "A")
    a = Delivery(deps, task.request_id, "A")
    a.start()
    gates.wait("A")
    problems = given_up_and_retried(deps, a, lambda: gates.release("A"))
    assert not problems, problems


def test_a_manual_retry_after_a_delivery_recorded_its_answer_decides_on_it(demo, monkeypatch):
    """Holds: the in-flight delivery recorded its answer and wrote before the give-up and the user's retry; the retry
    decides on that answer (the model is not asked again), names everything and writes nothing twice."""
    deps = demo
    deps.extractor = Counted([X, Y], [X, Z])
    task = say(deps, "Clara is in Lisbon; cello on Sundays; peanuts are out.", day=0, request_id="req-1", sync=False)
    from memlane.faults import Faults
    reached, go = threading.Event(), threading.Event()

    def hold(name):
        reached.set()
        assert go.wait(60)

    deps.faults = Faults("extract.after_index_write@1", crash=hold)
    a = Delivery(deps, task.request_id, "A")
    a.start()
    assert reached.wait(60)
    extract.fail(deps, "demo", "req-1", "gave up")
    tasks.retry(deps, "demo", "req-1", app_id=APP, tenant_id=TENANT)
    go.set()
    a.join(120)
    deps.faults = Faults()
    assert a.error is None, a.error
    retried = Delivery(deps, task.request_id, "R")
    retried.run()
    problems = check_clean(deps, [retried], [X, Y])
    assert deps.extractor.calls == 1
    assert not problems, problems


def test_a_slow_pass_does_not_put_back_the_mark_a_pass_completing_the_round_took_away(svc, monkeypatch):
    """Holds: P0 leaves the mark at the 3rd entry; P1 reads it and is slow; P2 (no limit) completes the round: mark
    gone.
    P1's write, conditioned on the mark it read, is refused: the mark is not put back over P2's round."""
    deps = svc.deps
    lost_jobs(svc, monkeypatch)
    sweep.sweep(deps, limit=2)
    first = deps.repo.sweep_mark()
    assert first is not None
    held = HeldAtMark(monkeypatch, "P1")
    p1 = Pass(deps, "P1", 1)
    p1.start()
    assert held.reached.wait(60)
    p2 = Pass(deps, "P2", 100)
    p2.run()
    assert p2.error is None and deps.repo.sweep_mark() is None
    held.go.set()
    p1.join(60)
    assert p1.error is None, p1.error
    assert deps.repo.sweep_mark() is None


def test_of_two_first_passes_with_no_mark_the_second_leaves_the_first_ones(svc, monkeypatch):
    """Holds: no mark yet; P1 and P2 both read none; P2 leaves it at the 3rd entry; P1's write (only if absent) is
    refused, and P1 raises nothing."""
    deps = svc.deps
    lost_jobs(svc, monkeypatch)
    held = HeldAtMark(monkeypatch, "P1")
    p1 = Pass(deps, "P1", 1)
    p1.start()
    assert held.reached.wait(60)
    Pass(deps, "P2", 2).run()
    after_p2 = deps.repo.sweep_mark()
    held.go.set()
    p1.join(60)
    assert p1.error is None, p1.error
    assert after_p2 is not None and deps.repo.sweep_mark() == after_p2
