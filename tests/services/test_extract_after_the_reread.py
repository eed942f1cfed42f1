"""A regression trial (session 37): the window AFTER the re-read under the tenant's consolidation lock.

The fix re-reads the task once a delivery holds the lock; but between that re-read and the delivery's note of what it
writes (`note_task_writes`), the task can be given up (FAILED) and retried by hand (PENDING). The note then refuses
(it only notes on a RUNNING task) and consolidation writes anyway."""

from __future__ import annotations

import threading

import pytest

from memlane.domain.models import TaskStatus
from memlane.faults import Faults
from memlane.repository.deletion import DeletionRecords
from memlane.services import extract, stores, tasks
from tests.services.test_extract_concurrent_deliveries import Delivery, X, Y, Z, check_clean, given_up_and_retried
from tests.services.test_extract_retries import APP, TENANT, Counted, Crash, say, table_mems


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


class HeldAfterReread:
    """Holds thread `name` inside consolidate.run, after extract.run's re-read under the lock and before the note of
    its writes (consolidate reads the GONE markers in between)."""

    def __init__(self, monkeypatch, name):
        self.reached, self.go = threading.Event(), threading.Event()
        original = DeletionRecords.deleted_since_written

        def held(repo, *a, **kw):
            if threading.current_thread().name == name and not self.reached.is_set():
                self.reached.set()
                assert self.go.wait(60)
            return original(repo, *a, **kw)

        monkeypatch.setattr(DeletionRecords, "deleted_since_written", held)


def test_a_retry_after_the_reread_leaves_no_memory_unnamed(demo, monkeypatch):
    """A holds the lock, re-read the task (RUNNING), is about to consolidate. The job is given up and retried by hand
    (PENDING). A's note finds the task PENDING and notes nothing (no written_ids, no answer), A writes [X, Y]; its end
    finds PENDING and leaves it. The retry's job has no answer: it asks the model again ([X, Z]) — Y is named by no
    task."""
    deps = demo
    deps.extractor = Counted([X, Y], [X, Z])
    task = say(deps, "Clara is in Lisbon; cello on Sundays; peanuts are out.", day=0, request_id="req-1", sync=False)
    held = HeldAfterReread(monkeypatch, "A")
    a = Delivery(deps, task.request_id, "A")
    a.start()
    assert held.reached.wait(60)
    problems = given_up_and_retried(deps, a, held.go.set)
    assert not problems, problems


def test_given_up_after_the_reread_then_killed_leaves_no_memory_unindexed_or_unnamed(demo, monkeypatch):
    """A holds the lock, re-read the task (RUNNING). The queue's last delivery gives the job up (FAILED). A's note finds
    the task FAILED and notes nothing; A writes [X, Y] to the table and is killed before the index. The user retries:
    no written_ids, no answer — the model is asked again ([X, Z]). Y stays in the table, in no task, never indexed."""
    deps = demo
    deps.extractor = Counted([X, Y], [X, Z])
    task = say(deps, "Clara is in Lisbon; cello on Sundays; peanuts are out.", day=0, request_id="req-1", sync=False)
    held = HeldAfterReread(monkeypatch, "A")

    def crash(name):
        raise Crash(name)

    deps.faults = Faults("extract.after_table_write@1", crash=crash)
    a = Delivery(deps, task.request_id, "A")
    a.start()
    assert held.reached.wait(60)
    extract.fail(deps, "demo", "req-1", "gave up")
    held.go.set()
    a.join(120)
    deps.faults = Faults()
    assert isinstance(a.error, Crash), a.error
    failed = deps.repo.find_task("demo", APP, TENANT, "req-1")
    assert failed.status == TaskStatus.FAILED
    tasks.retry(deps, "demo", "req-1", app_id=APP, tenant_id=TENANT)
    retried = Delivery(deps, task.request_id, "R")
    retried.run()
    problems = check_clean(deps, [retried], [X, Y])  # A's answer was acted on: the retry must decide on it
    assert not problems, problems
    assert deps.extractor.calls == 1, "the retry asked the model again: A's answer was never recorded"


def test_a_delivery_that_reread_before_the_other_finished_writes_nothing_after_its_success(demo, monkeypatch):
    """B consolidates under the lock (its answer [X] is a NOOP against an earlier memory: it writes nothing, so no
    answer is recorded). Before, B let the lock go before its `_finished` wrote SUCCEEDED: A took the lock, re-read the
    task RUNNING, and wrote its own answer's Z after the task SUCCEEDED, a memory the finished task never names. Now B
    ends the task before it lets the lock go (held here in `left_unnamed`, under the lock): A reads it SUCCEEDED."""
    from memlane.services import consolidate
    from tests.services.test_extract_concurrent_deliveries import Gates

    deps = demo
    deps.extractor = Counted([X])
    say(deps, "Clara is in Lisbon.", day=0, request_id="req-0", sync=True)  # X held already
    deps.extractor = Counted([X], [Z])
    task = say(deps, "Clara is in Lisbon; peanuts are out.", day=1, request_id="req-1", sync=False)
    gates = Gates(monkeypatch, "A", "B")
    b_out, b_go = threading.Event(), threading.Event()
    original = consolidate.left_unnamed

    def gated(d, store, t, outcomes):
        if threading.current_thread().name == "B":
            b_out.set()
            assert b_go.wait(60)
        return original(d, store, t, outcomes)

    monkeypatch.setattr(consolidate, "left_unnamed", gated)
    b, a = Delivery(deps, task.request_id, "B"), Delivery(deps, task.request_id, "A")
    b.start()
    gates.wait("B")
    a.start()
    gates.wait("A")
    gates.release("B")
    assert b_out.wait(60)  # B about to end its task, the lock still held
    gates.release("A")  # A waits for the lock
    b_go.set()
    b.join(120)
    assert b.error is None and b.result.status == TaskStatus.SUCCEEDED, (b.error, b.result)
    a.join(120)
    assert a.result is not None and a.result.status == TaskStatus.SUCCEEDED, (a.error, a.result)
    assert a.error is None, a.error
    done = deps.repo.find_task("demo", APP, TENANT, "req-1")
    named = {o.memory_id for o in done.outcomes}
    mine = {i: m.text for i, m in table_mems(deps).items() if m.request_id == "req-1"}
    assert not {i: t for i, t in mine.items() if i not in named}, \
        f"written after the task SUCCEEDED, named by no task: {[t for i, t in mine.items() if i not in named]}"
