"""A trial (session 37): two deliveries of one extraction job at once (threads), on SQLite and on DynamoDB (moto),
where the first attempt recorded the extractor's answer (Task.answer) — and deliveries that read the task before
that answer existed. Interleavings are forced with gates (events) right before a delivery takes the tenant's
consolidation lock, i.e. after it read the task, moved it RUNNING and got its candidates."""

from __future__ import annotations

import contextlib
import threading

import pytest

from memlane.domain.models import TaskStatus
from memlane.services import consolidate, extract, memories, stores, tasks
from tests.services.test_extract_retries import APP, TENANT, Counted, Crash, arm, index_docs, say, table_mems

X = "User's sister Clara lives in Lisbon."
Y = "User plays the cello every Sunday."
Z = "User is allergic to peanuts."


class Delivery(threading.Thread):
    """One delivery of the job (extract.run) in its own thread; keeps its result or the exception that escaped."""

    def __init__(self, deps, request_id, name):
        super().__init__(name=name, daemon=True)
        self.deps, self.request_id = deps, request_id
        self.result = self.error = None

    def run(self):
        try:
            self.result = extract.run(self.deps, "demo", self.request_id)
        except BaseException as e:  # noqa: BLE001 — what would dead-letter the job
            self.error = e


class Gates:
    """Holds the named threads right before they take the tenant's consolidation lock (after they read the task,
    moved it RUNNING and got their candidates) until released."""

    def __init__(self, monkeypatch, *names):
        self.reached = {n: threading.Event() for n in names}
        self.go = {n: threading.Event() for n in names}
        original = consolidate.one_at_a_time

        @contextlib.contextmanager
        def gated(deps, store, scope):
            name = threading.current_thread().name
            if name in self.go:
                self.reached[name].set()
                assert self.go[name].wait(60), f"{name} never released"
            with original(deps, store, scope):
                yield

        monkeypatch.setattr(consolidate, "one_at_a_time", gated)

    def wait(self, name):
        assert self.reached[name].wait(60), f"{name} never reached its gate"

    def release(self, name):
        self.go[name].set()


def crashed_mid_memories(deps, answers):
    """An add whose first attempt recorded its answer, wrote its first memory and died: the task RUNNING."""
    deps.extractor = Counted(*answers)
    task = say(deps, "Clara is in Lisbon; cello on Sundays.", day=0, request_id="req-1", sync=False)
    arm(deps, "extract.mid_memories@1")
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    arm(deps, "")
    running = deps.repo.locate_task("demo", "req-1")
    assert running.status == TaskStatus.RUNNING and running.answer is not None
    assert deps.extractor.calls == 1
    return task


def given_up_and_retried(deps, a, release):
    """The job given up (FAILED) and retried by hand (PENDING) while delivery `a` is held; then `a` released and the
    retry's job run. The problems `check_clean` finds — either answer may stand (the first delivery's, or the retry's
    if the first wrote nothing), not both halves."""
    extract.fail(deps, "demo", a.request_id, "gave up")
    tasks.retry(deps, "demo", a.request_id, app_id=APP, tenant_id=TENANT)
    release()
    a.join(120)
    assert a.error is None, a.error
    retried = Delivery(deps, a.request_id, "R")
    retried.run()
    said = [X, Z] if any(m.text == Z for m in table_mems(deps).values()) else [X, Y]
    return check_clean(deps, [retried], said)


def check_clean(deps, deliveries, expected_texts):
    """The properties of part 1: no exception escaped, every delivery reports the one SUCCEEDED task, each
    statement written once, table == index, every memory named by the task, the answer dropped."""
    problems = [f"{d.name} raised {d.error!r}" for d in deliveries if d.error is not None]
    problems += [f"{d.name} returned {d.result.status}" for d in deliveries
                 if d.result is not None and d.result.status != TaskStatus.SUCCEEDED]
    done = deps.repo.find_task("demo", APP, TENANT, "req-1")
    held = table_mems(deps)
    texts = sorted(m.text for m in held.values())
    if texts != sorted(expected_texts):
        problems.append(f"memories {texts} != {sorted(expected_texts)}")
    if set(index_docs(deps)) != set(held):
        problems.append(f"index {sorted(index_docs(deps))} != table {sorted(held)}")
    if done.status != TaskStatus.SUCCEEDED:
        problems.append(f"task {done.status}")
    if unnamed := [held[m].text for m in set(held) - {o.memory_id for o in done.outcomes}]:
        problems.append(f"not named by the task: {unnamed}")
    if done.answer is not None:
        problems.append("answer kept after success")
    return problems


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


# -- 1. two deliveries at once, both deciding on the recorded answer -------------------------------------------------


@pytest.mark.parametrize("order", ["both-released-at-once", "free-running"])
def test_two_deliveries_at_once_on_a_recorded_answer_write_each_statement_once(demo, monkeypatch, order):
    deps = demo
    task = crashed_mid_memories(deps, ([X, Y], [Z]))  # the model would answer otherwise if asked again
    if order == "both-released-at-once":
        gates = Gates(monkeypatch, "A", "B")
    a, b = Delivery(deps, task.request_id, "A"), Delivery(deps, task.request_id, "B")
    a.start()
    b.start()
    if order == "both-released-at-once":
        gates.wait("A")
        gates.wait("B")  # both read the task and its recorded answer
        gates.release("A")
        gates.release("B")
    a.join(120)
    b.join(120)
    problems = check_clean(deps, [a, b], [X, Y])
    assert deps.extractor.calls == 1, "a delivery asked the model again though an answer was recorded"
    assert not problems, problems


def test_two_deliveries_on_a_recorded_answer_one_after_the_other_on_dynamodb(dynamo, monkeypatch):
    """On moto, conditional writes are not atomic across threads: the two run one after the other past their gate,
    both having read the task and its recorded answer first."""
    deps = dynamo
    task = crashed_mid_memories(deps, ([X, Y], [Z]))
    gates = Gates(monkeypatch, "A", "B")
    a, b = Delivery(deps, task.request_id, "A"), Delivery(deps, task.request_id, "B")
    a.start()
    gates.wait("A")
    b.start()
    gates.wait("B")
    gates.release("A")
    a.join(120)
    gates.release("B")
    b.join(120)
    problems = check_clean(deps, [a, b], [X, Y])
    assert deps.extractor.calls == 1
    assert not problems, problems


# -- a delivery that read the task before the first one recorded anything --------------------------------------------


def late_delivery(deps, monkeypatch, answers, between=None):
    """Delivery A and B of a fresh job: both read the task (no answer recorded yet) and asked the model; A then runs
    to its end (SUCCEEDED); `between()` runs; then B goes on. Returns both deliveries."""
    deps.extractor = Counted(*answers)
    task = say(deps, "Clara is in Lisbon; cello on Sundays; peanuts are out.", day=0, request_id="req-1", sync=False)
    gates = Gates(monkeypatch, "A", "B")
    a, b = Delivery(deps, task.request_id, "A"), Delivery(deps, task.request_id, "B")
    a.start()
    gates.wait("A")
    b.start()
    gates.wait("B")
    gates.release("A")
    a.join(120)
    assert a.error is None and a.result.status == TaskStatus.SUCCEEDED, (a.error, a.result)
    if between is not None:
        between()
    gates.release("B")
    b.join(120)
    return a, b


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb"])
def test_a_memory_deleted_after_its_task_succeeded_is_not_written_back_by_a_late_delivery(request, monkeypatch,
                                                                                           backend):
    """Before: SQS redelivers a job while its first delivery still runs (visibility timeout), or the sweeper
    re-sends a RUNNING task past its deadline. The second delivery reads the task before the first noted anything and
    waits on the tenant's lock; the first finishes (SUCCEEDED); the user deletes one of its memories (no GONE marker:
    the task is finished). The second then consolidates on its stale copy — no written_ids, no answer — finds the id
    free and writes the deleted memory back."""
    deps = request.getfixturevalue("demo" if backend == "sqlite" else "dynamo")
    deleted = []

    def delete_clara():
        clara = next(m for m in table_mems(deps).values() if m.text == X)
        memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=clara.memory_id)
        deleted.append(clara.memory_id)

    a, b = late_delivery(deps, monkeypatch, ([X, Y],), between=delete_clara)
    assert b.error is None, b.error
    held = table_mems(deps)
    assert deleted[0] not in held, f"the deleted memory is back: {held[deleted[0]].text!r} {held[deleted[0]].status}"
    assert deleted[0] not in index_docs(deps), "the deleted memory is searchable again"


def test_a_late_delivery_answered_otherwise_leaves_no_memory_the_task_does_not_name(demo, monkeypatch):
    """Before: Same interleaving without a delete: the second delivery asked the model too (no answer was
    recorded when it read the task), got another answer, and writes its new statement after the task SUCCEEDED:
    a memory the finished task never names (its outcomes are the first delivery's)."""
    a, b = late_delivery(demo, monkeypatch, ([X, Y], [X, Y, Z]))
    problems = check_clean(demo, [a, b], [X, Y])
    assert not problems, problems
