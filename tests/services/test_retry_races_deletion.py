"""A trial (session 37): a memory delete (its redaction of the recorded answer, Task.answer) racing a retry that reads
that answer. The retry is held between its read of the task (`locate_task`) and its RUNNING write (`change_task`),
in its own thread, while the delete runs whole in the test's thread."""

from __future__ import annotations

import threading

import pytest

from memlane.domain.models import TaskStatus
from memlane.services import extract, memories, stores, tasks
from tests.services.test_extract_retries import APP, TENANT, Crash, Scripted, arm, index_docs, say, table_mems
from tests.services.test_extract_concurrent_deliveries import Delivery

TEA = "User likes green tea with honey."
CELLO = "User plays the cello every Sunday."
CLARA = "User's sister Clara lives in Lisbon."


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


class HeldAfterRead:
    """Holds the thread named `name` inside extract.run after it read the task, before it writes it RUNNING."""

    def __init__(self, monkeypatch, name):
        self.name, self.reached, self.go = name, threading.Event(), threading.Event()
        original = extract.embedder_guard.ensure  # called between locate_task and the RUNNING write

        def ensure(deps, store):
            if threading.current_thread().name == self.name and not self.reached.is_set():
                self.reached.set()
                assert self.go.wait(60)
            return original(deps, store)

        monkeypatch.setattr(extract.embedder_guard, "ensure", ensure)


def crashed(deps, answer, *, point="extract.after_table_write@1", text="Green tea with honey; cello on Sundays."):
    deps.extractor = Scripted(answer)
    task = say(deps, text, day=1, request_id="req-1", sync=False)
    arm(deps, point)
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    arm(deps, "")
    assert deps.repo.locate_task("demo", "req-1").answer is not None
    return task


def delete_during_retry_read(deps, monkeypatch, text, *, crash_after_running=False):
    """A retry (thread R) reads the task; the memory of `text` is deleted whole; R goes on. Returns R."""
    held = HeldAfterRead(monkeypatch, "R")
    if crash_after_running:
        arm(deps, "extract.after_running@1")
    r = Delivery(deps, "req-1", "R")
    r.start()
    assert held.reached.wait(60)
    gone = next(m for m in table_mems(deps).values() if m.text == text)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=gone.memory_id)
    item = deps.repo.task_item("demo", APP, TENANT, "req-1")
    assert text.split()[-3].lower() not in repr(item).lower(), "the delete did not redact (precondition)"
    held.go.set()
    r.join(120)
    arm(deps, "")
    return r, gone


def test_a_retry_holding_the_unredacted_task_does_not_write_back_a_restated_memory_deleted_meanwhile(demo, monkeypatch):
    """Before: req-0 wrote TEA; req-1's answer restated it (NOOP: nothing written for it) and
    cello, and died after its table write. Its retry reads the task; the user deletes TEA — the redaction empties the
    restating entry of req-1's recorded answer (a new version of the task). The retry's RUNNING write
    (then conditioned on the status only) puts the old answer back, then decides on it: TEA no longer has a
    neighbour, so it is written as new — the deleted fact is active and searchable again."""
    deps = demo
    deps.extractor = Scripted([TEA])
    say(deps, "I like green tea with honey.", day=0, request_id="req-0")
    crashed(deps, [TEA, CELLO])
    r, tea = delete_during_retry_read(deps, monkeypatch, TEA)
    assert r.error is None and r.result.status == TaskStatus.SUCCEEDED, (r.error, r.result)
    texts = sorted(m.text for m in table_mems(deps).values())
    assert TEA not in texts, f"the deleted fact is back: {texts}"


def test_a_retry_does_not_write_the_deleted_statement_back_into_the_task_record(demo, monkeypatch):
    """Before: The retry's RUNNING write puts the answer it read back, the deleted
    memory's statement included; the retry dies right after (or the job is then given up: FAILED keeps the answer),
    and the deleted text stays in the task's item for good."""
    deps = demo
    crashed(deps, [CLARA, CELLO])
    r, _ = delete_during_retry_read(deps, monkeypatch, CELLO, crash_after_running=True)
    assert isinstance(r.error, Crash), r.error
    extract.fail(deps, "demo", "req-1", "gave up")  # the queue's last delivery, or the sweeper, gives up
    item = deps.repo.task_item("demo", APP, TENANT, "req-1")
    assert item["status"] == "FAILED"
    assert "cello" not in repr(item).lower(), f"the deleted statement is back in the task record: {item.get('answer')}"


def test_a_manual_retry_after_the_deletion_marker_expired_does_not_write_the_deleted_memory_back(demo, monkeypatch):
    """Before: Same as above; weeks later (the GONE marker's TTL, memories.GONE_DAYS = 14, passed:
    DynamoDB's TTL deleted it) the user retries the FAILED task: it decides on the answer the lost update put back,
    and the deleted memory is written again."""
    deps = demo
    crashed(deps, [CLARA, CELLO])
    r, cello = delete_during_retry_read(deps, monkeypatch, CELLO, crash_after_running=True)
    extract.fail(deps, "demo", "req-1", "gave up")
    deps.table.delete(f"demo#{APP}#{TENANT}", f"GONE#{cello.memory_id}")  # what DynamoDB's TTL does after 14 days
    tasks.retry(deps, "demo", "req-1", app_id=APP, tenant_id=TENANT)
    done = extract.run(deps, "demo", "req-1")
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert sorted(m.text for m in table_mems(deps).values()) == [CLARA]


def test_control_the_same_without_the_race_the_marker_expired(demo):
    """Control for the test above (holds): deleted outside the retry's window, the redacted answer alone keeps the
    memory out after the marker expired."""
    deps = demo
    crashed(deps, [CLARA, CELLO])
    cello = next(m for m in table_mems(deps).values() if m.text == CELLO)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=cello.memory_id)
    arm(deps, "extract.after_running@1")
    with pytest.raises(Crash):
        extract.run(deps, "demo", "req-1")
    arm(deps, "")
    extract.fail(deps, "demo", "req-1", "gave up")
    assert "cello" not in repr(deps.repo.task_item("demo", APP, TENANT, "req-1")).lower()
    deps.table.delete(f"demo#{APP}#{TENANT}", f"GONE#{cello.memory_id}")
    tasks.retry(deps, "demo", "req-1", app_id=APP, tenant_id=TENANT)
    done = extract.run(deps, "demo", "req-1")
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert sorted(m.text for m in table_mems(deps).values()) == [CLARA]
    assert set(index_docs(deps)) == set(table_mems(deps))


def test_a_delete_racing_a_retry_that_already_moved_the_task_is_not_written_back(demo, monkeypatch):
    """Holds: the delete lands after the retry's RUNNING write (held at the 'extract.after_running' point): the GONE
    marker of the unfinished job keeps the memory out, the recorded answer stays redacted, the task SUCCEEDED with the
    outcome redacted."""
    deps = demo
    crashed(deps, [CLARA, CELLO])
    reached, go = threading.Event(), threading.Event()

    def hold(name):
        reached.set()
        assert go.wait(60)

    from memlane.faults import Faults
    deps.faults = Faults("extract.after_running@1", crash=hold)
    r = Delivery(deps, "req-1", "R")
    r.start()
    assert reached.wait(60)
    cello = next(m for m in table_mems(deps).values() if m.text == CELLO)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=cello.memory_id)
    assert "cello" not in repr(deps.repo.task_item("demo", APP, TENANT, "req-1")).lower()
    go.set()
    r.join(120)
    arm(deps, "")
    assert r.error is None and r.result.status == TaskStatus.SUCCEEDED, (r.error, r.result)
    assert sorted(m.text for m in table_mems(deps).values()) == [CLARA]
    done = deps.repo.find_task("demo", APP, TENANT, "req-1")
    assert "cello" not in repr(done.model_dump()).lower() and done.answer is None
