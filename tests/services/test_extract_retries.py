"""An extraction job retried, or delivered twice at once, whose model answers otherwise each time (its output is
not byte-for-byte repeatable): nothing it wrote is left unindexed or unnamed, no statement is written twice, and a
write-time update survives a crash at any point (second regression trial of 874f282; each fails before)."""

import contextlib
import threading
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.models import REDACTED, Candidate, MemoryStatus, TaskStatus
from memlane.faults import Faults
from memlane.services import extract, ingest, stores

APP, TENANT = "app", "u1"
SC = {"app_id": APP, "tenant_id": TENANT, "agent_id": "a", "run_id": "r1"}
T0 = datetime(2025, 1, 10, tzinfo=timezone.utc)


class Crash(Exception):
    pass


def crash(name):
    raise Crash(name)


class Scripted:
    """An extractor answering each delivery with the next list of statements (evidence: every message)."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def extract(self, messages, **kw):
        texts = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return [Candidate(text=t, evidence=[m.message_id for m in messages]) for t in texts]


def say(deps, text, *, day, request_id, scope=SC, sync=True):
    return ingest.add(deps, "demo", scope=scope, sync=sync, request_id=request_id,
                      messages=[{"role": "user", "content": text, "created_at": T0 + timedelta(days=day)}])


def arm(deps, schedule):
    deps.faults = Faults(schedule, crash=crash) if schedule else Faults()


def crashed_then_retried(deps, task, point):
    """The task's job dies at `point`; its retry runs whole. Returns the retry's task."""
    arm(deps, point)
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    arm(deps, "")
    return extract.run(deps, "demo", task.request_id)


def deleted_then_retried(deps, task, point, text):
    """The task's job dies at `point`, the user deletes the memory of `text` it wrote, its retry runs whole.
    Returns the deleted memory and the retry's task."""
    from memlane.services import memories

    arm(deps, point)
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    arm(deps, "")
    gone = next(m for m in table_mems(deps).values() if m.text == text)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=gone.memory_id)
    return gone, extract.run(deps, "demo", task.request_id)


def index_docs(deps, store="demo"):
    """memory id -> status, as the index holds them."""
    return {d.memory_id: d.status for d in deps.index.documents(store) if d.record_type == "memory"}


def table_mems(deps, store="demo", app=APP, tenant=TENANT):
    return {m.memory_id: m for m in deps.repo.iter_memories(store, app, tenant)}


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


A = "User's sister Clara lives in Lisbon."
B = "User plays the cello every Sunday."


@pytest.mark.parametrize("point", ["extract.after_table_write@1", "extract.mid_memories@1"])
def test_a_statement_the_retry_drops_after_a_crash_before_the_index_stays_unindexed(demo, point):
    """Attempt 1 writes A and B to the table and dies before the index write. The retry's answer says A
    only: B is not in `ids`, so it is neither resumed (indexed) nor found as a neighbour (it is not in the
    index): an ACTIVE memory the index never gets — unsearchable, table != index."""
    deps = demo
    deps.extractor = Scripted([B, A], [A])  # B first: mid_memories dies after writing B alone
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays.", day=0, request_id="req-1", sync=False)
    done = crashed_then_retried(deps, task, point)
    assert done.status == TaskStatus.SUCCEEDED
    table = {mid: m.status.value for mid, m in table_mems(deps).items()}
    index = index_docs(deps)
    assert table == index, f"table {table} != index {index}"


B2 = "User plays the cello every Sunday!"  # the retry's wording of B (not whitespace/case equal)


@pytest.mark.parametrize("point", ["extract.after_index_write@1", "extract.after_table_write@1"])
def test_a_rephrasing_on_retry_is_not_written_twice(demo, point):
    """The commit's promise: 'what an earlier attempt wrote that this answer does not say again is a
    neighbour like any memory, so a rephrasing of it is not written twice'. It holds only when the first
    attempt got as far as the index."""
    deps = demo
    deps.extractor = Scripted([A, B], [A, B2])
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays.", day=0, request_id="req-1", sync=False)
    crashed_then_retried(deps, task, point)
    active = sorted(m.text for m in table_mems(deps).values() if m.status == MemoryStatus.ACTIVE)
    assert len(active) == 2, active


OLD = "User lives in Boston."
NEW = "User moved to Denver last month."


@pytest.mark.parametrize("point", ["extract.after_table_write@1", "extract.after_index_write@1"])
def test_a_write_time_update_survives_a_crash_before_its_action(demo, point):
    """The second add's statement UPDATEs the first. Its job dies after writing the memory, before
    _supersede recorded the action; the retry answers the very same statement: `_resumed` finds no action
    and reports ADD. Boston and Denver both stay ACTIVE for good; the task names no UPDATE."""
    deps = demo
    deps.extractor = Scripted([OLD])
    say(deps, "I live in Boston.", day=0, request_id="req-0")
    deps.extractor = Scripted([NEW])
    task = say(deps, "I moved to Denver last month.", day=30, request_id="req-1", sync=False)
    done = crashed_then_retried(deps, task, point)
    held = {m.text: m.status for m in table_mems(deps).values()}
    assert held == {OLD: MemoryStatus.SUPERSEDED, NEW: MemoryStatus.ACTIVE}, held
    assert [o.action.value for o in done.outcomes] == ["UPDATE"] and done.outcomes[0].action_id


def test_a_write_time_update_recorded_before_its_memory_was_written_is_applied_by_the_retry(demo):
    """The job dies after it recorded the update (pending) and wrote its first memory, before the one that
    updates: the retry writes that memory as the recorded action names it, and applies the action once."""
    deps = demo
    deps.extractor = Scripted([OLD])
    say(deps, "I live in Boston.", day=0, request_id="req-0")
    deps.extractor = Scripted([B, NEW])
    task = say(deps, "I play cello on Sundays. I moved to Denver last month.", day=30, request_id="req-1", sync=False)
    done = crashed_then_retried(deps, task, "extract.mid_memories@1")
    held = {m.text: m.status for m in table_mems(deps).values()}
    assert held == {OLD: MemoryStatus.SUPERSEDED, NEW: MemoryStatus.ACTIVE, B: MemoryStatus.ACTIVE}, held
    update = next(o for o in done.outcomes if o.text == NEW)
    assert update.action.value == "UPDATE" and update.action_id
    assert index_docs(deps) == {mid: m.status.value for mid, m in table_mems(deps).items()}


def test_control_no_crash_updates(demo):
    deps = demo
    deps.extractor = Scripted([OLD])
    say(deps, "I live in Boston.", day=0, request_id="req-0")
    deps.extractor = Scripted([NEW])
    done = say(deps, "I moved to Denver last month.", day=30, request_id="req-1")
    held = {m.text: m.status for m in table_mems(deps).values()}
    assert held == {OLD: MemoryStatus.SUPERSEDED, NEW: MemoryStatus.ACTIVE}, held
    assert [o.action.value for o in done.outcomes] == ["UPDATE"] and done.outcomes[0].action_id


def test_concurrent_deliveries_leave_the_write_time_update_undoable(demo, monkeypatch):
    """Two deliveries of one job (SQS redelivers while the first still runs). Delivery B reads `earlier`
    (nothing yet) and its neighbours; delivery A then runs to the end: writes Denver, applies the UPDATE
    action (Denver.supersedes = Boston). B then `put_memory`s Denver unconditionally over A's version:
    the supersedes link is gone and the action's after-digest no longer matches, so the UPDATE the task
    names can never be undone."""
    from memlane.services import consolidate, dream
    deps = demo
    # At once only past a holder's lease (one stalled past consolidate.LEASE_HOLD): nested here, without it.
    monkeypatch.setattr(consolidate, "one_at_a_time", lambda *_: contextlib.nullcontext())
    deps.extractor = Scripted([OLD])
    say(deps, "I live in Boston.", day=0, request_id="req-0")
    deps.extractor = Scripted([NEW])
    task = say(deps, "I moved to Denver last month.", day=30, request_id="req-1", sync=False)
    original = consolidate._neighbours
    state = {"ran": False}

    def neighbours(*args, **kwargs):
        found = original(*args, **kwargs)
        if not state["ran"]:  # delivery B, between its reads and its writes: delivery A runs whole
            state["ran"] = True
            monkeypatch.setattr(consolidate, "_neighbours", original)
            first = extract.run(deps, "demo", task.request_id)
            assert first.status == TaskStatus.SUCCEEDED
            monkeypatch.setattr(consolidate, "_neighbours", neighbours)
        return found

    monkeypatch.setattr(consolidate, "_neighbours", neighbours)
    extract.run(deps, "demo", task.request_id)  # delivery B
    done = deps.repo.locate_task("demo", task.request_id)
    [outcome] = done.outcomes
    assert outcome.action.value == "UPDATE" and outcome.action_id
    denver = deps.repo.get_memory("demo", "app", "u1", outcome.memory_id)
    problems = []
    if denver.supersedes != outcome.target_id:
        problems.append("Denver lost its supersedes link")
    try:
        dream.undo_action(deps, "demo", outcome.action_id)
    except Exception as e:  # noqa: BLE001
        problems.append(f"undo refused: {e}")
    assert not problems, problems


def test_a_memory_deleted_after_a_crashed_attempt_wrote_it_is_not_written_again_by_the_retry(demo):
    """A shared-engines trial: a worker killed after writing a job's memories, the user deletes one (200, then 404),
    the job's redelivery found it missing and wrote it back under the same id — active, searchable, its task's
    outcome no longer redacted. Its delete leaves a marker while the job is unfinished: the retry writes the rest."""
    from memlane.services import search

    deps = demo
    deps.extractor = Scripted([A, B])
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays.", day=0, request_id="req-1", sync=False)
    _, done = deleted_then_retried(deps, task, "extract.after_index_write@1", B)
    assert done.status == TaskStatus.SUCCEEDED
    assert [m.text for m in table_mems(deps).values()] == [A]
    assert list(index_docs(deps)) == [mid for mid in table_mems(deps)]
    assert not any("cello" in h.memory.text for h in search.search(deps, "demo", query="cello",
                                                                   scope={**SC, "run_id": "*"}))
    assert not any("cello" in o.text.lower() for o in done.outcomes)  # redacted, as the delete left it


@pytest.mark.parametrize("naming", ["tenant", "store"])
def test_a_job_an_older_version_began_is_finished_without_writing_a_memory_twice(demo, naming):
    """An upgrade trial: a version before `written_ids` (2026-12-05) crashed after writing a job's memories to the
    table; the current one finished the job and wrote each again, the first copies current and never indexed. Those
    versions named a job's memories by their place in its answer, with the tenant — or, before 2026-12-04, without."""
    from memlane.domain.ids import derived_id
    from memlane.services.task_ids import task_id

    demo.extractor = Scripted([A, B])
    task = say(demo, "My sister Clara lives in Lisbon. I play the cello every Sunday.", day=0, request_id="req-1",
               sync=False)
    arm(demo, "extract.after_table_write@1")
    with pytest.raises(Crash):
        extract.run(demo, "demo", task.request_id)
    arm(demo, "")
    # What that version left: the memories under their places' ids, none indexed, the task naming none.
    running = demo.repo.locate_task("demo", task.request_id)
    for m in table_mems(demo).values():
        place = str([A, B].index(m.text))
        legacy = task_id(running, place) if naming == "tenant" else derived_id("demo", running.request_id, place)
        demo.table.delete(f"demo#{APP}#{TENANT}", f"MEM#{m.memory_id}")
        demo.repo.put_memory("demo", m.model_copy(update={"memory_id": legacy}), new=True)
    demo.repo.save_task(running.model_copy(update={"written_ids": []}))

    done = extract.run(demo, "demo", task.request_id)

    assert done.status == TaskStatus.SUCCEEDED
    held = table_mems(demo)
    assert sorted(m.text for m in held.values()) == sorted([A, B])
    assert len(held) == 2 and set(index_docs(demo)) == set(held)
    assert sorted(done.memory_ids) == sorted(held) and len(done.outcomes) == 2


@pytest.mark.parametrize("point", ["extract.mid_memories@1", "extract.after_table_write@1",
                                   "extract.after_index_write@1"])
def test_a_retry_that_rewords_what_a_crashed_attempt_wrote_changes_it_once(demo, point):
    """A regression trial: the retry's model reworded a statement the crashed attempt had written and indexed; the
    search found that memory and the left-over list named it again, so the change named it twice in one transaction,
    and every delivery failed ("appears twice in one transaction") with both statements current."""
    reworded = "User's sister, Clara, lives in Lisbon, Portugal."
    demo.extractor = Scripted([A, B], [reworded, B])
    task = say(demo, "My sister Clara lives in Lisbon. I play the cello every Sunday.", day=0, request_id="req-1",
               sync=False)

    done = crashed_then_retried(demo, task, point)

    assert done.status == TaskStatus.SUCCEEDED, done.error
    current = sorted(m.text for m in table_mems(demo).values() if m.status == MemoryStatus.ACTIVE)
    assert sum("Clara" in t for t in current) == 1 and B in current


@pytest.mark.parametrize("point", ["extract.after_index_write@1", "extract.after_table_write@1"])
def test_a_memory_deleted_after_a_crashed_attempt_is_not_written_again_in_other_words(demo, point):
    """A regression trial (3 of 40 fault x scenario runs): a worker killed after writing a job's memories, the user
    deletes one, the job's retry — its model wording that statement otherwise, so another id no marker named — wrote
    it back: the deleted fact active and searchable again. A statement new in the retry's answer that rests on a
    message the deleted memory rested on is not written; what the crashed attempt wrote and kept stays."""
    from memlane.services import search

    deps = demo
    deps.extractor = Scripted([A, B], [A, "User plays cello on Sundays."])
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays.", day=0, request_id="req-1", sync=False)
    cello, done = deleted_then_retried(deps, task, point, B)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert [m.text for m in table_mems(deps).values()] == [A]
    assert sorted(index_docs(deps)) == sorted(table_mems(deps))
    assert not any("cello" in h.memory.text for h in search.search(deps, "demo", query="cello",
                                                                   scope={**SC, "run_id": "*"}))
    assert not any("cello" in o.text.lower() for o in done.outcomes)
    assert [o.reason for o in done.outcomes if o.memory_id == cello.memory_id] == [REDACTED]


@pytest.fixture()
def unrecorded(demo, monkeypatch):
    """A first attempt that recorded no answer for its retry (a task begun before 2026-12-07, or an answer over
    limits.MAX_RECORDED_ANSWER_BYTES): the retry asks the model again, under the rules for a new answer."""
    from memlane.services import consolidate

    monkeypatch.setattr(consolidate, "_recordable", lambda answer: False)
    return demo


def test_a_retry_after_a_deletion_still_writes_what_rests_on_other_messages(unrecorded):
    """The control: a statement new in the retry that rests on none of the deleted memory's messages is written."""
    deps = unrecorded
    deps.extractor = Split([A, B], [A, B, "User has a dog named Rex."])
    task = ingest.add(deps, "demo", scope=SC, sync=False, request_id="req-1",
                      messages=[{"role": "user", "content": t, "created_at": T0}
                                for t in ("Clara moved to Lisbon; I play cello on Sundays.", "My dog Rex is two.")])
    _, done = deleted_then_retried(deps, task, "extract.after_index_write@1", B)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert sorted(m.text for m in table_mems(deps).values()) == sorted([A, "User has a dog named Rex."])


class Split(Scripted):
    """Evidence: the first message for every statement but one naming Rex, which rests on the second."""

    def extract(self, messages, **kw):
        return [c.model_copy(update={"evidence": [messages[1 if "Rex" in c.text else 0].message_id]})
                for c in super().extract(messages, **kw)]


def test_an_update_applied_before_a_crash_is_indexed_by_the_retry_after_its_memory_was_deleted(demo, monkeypatch):
    """A working-memory trial (fsck "1 stale" after a kill -9 run): the job applied its write-time update and died
    before the index followed, the user then deleted the new memory, and the retry — skipping the deleted statement —
    never wrote the index again: the memory it superseded stayed `active` in the index for good."""
    from memlane.services import dream_actions, memories

    deps = demo
    deps.extractor = Scripted([OLD])
    say(deps, "I live in Boston.", day=0, request_id="req-0")
    deps.extractor = Scripted([NEW])
    task = say(deps, "I moved to Denver last month.", day=30, request_id="req-1", sync=False)
    indexed = dream_actions._index

    def dies_once(*args, **kw):
        monkeypatch.setattr(dream_actions, "_index", indexed)
        raise Crash("between the apply and its index write")

    monkeypatch.setattr(dream_actions, "_index", dies_once)
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    new = next(m for m in table_mems(deps).values() if m.text == NEW)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=new.memory_id)
    done = extract.run(deps, "demo", task.request_id)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert index_docs(deps) == {m.memory_id: m.status for m in table_mems(deps).values()}
    assert [m.status for m in table_mems(deps).values()] == [MemoryStatus.SUPERSEDED]  # what an update closed stays


def test_a_retry_that_says_the_deleted_statement_again_as_it_was_still_writes_a_new_fact_of_its_message(unrecorded):
    """A regression trial of the rule above: one message holding three facts, the retry's answer repeating the deleted
    one word for word and adding a third — the third, another fact, was dropped as a rewording of the deleted one."""
    deps = unrecorded
    rex = "User has a dog named Rex who is two."
    deps.extractor = Scripted([A, B], [A, B, rex])
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays, and my dog Rex is two.", day=0,
               request_id="req-1", sync=False)
    cello, done = deleted_then_retried(deps, task, "extract.after_index_write@1", B)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert sorted(m.text for m in table_mems(deps).values()) == sorted([A, rex])
    assert [o.reason for o in done.outcomes if o.memory_id == cello.memory_id] == [REDACTED]


class Counted(Scripted):
    """Scripted, counting the model's calls (deliveries in threads at once too)."""

    calls = 0
    _lock = threading.Lock()

    def extract(self, messages, **kw):
        with self._lock:
            self.calls += 1
            return super().extract(messages, **kw)


def test_a_retry_decides_on_the_answer_its_first_attempt_recorded_not_on_a_new_one(demo):
    """The model's answer is not repeatable: a retry that asked it again wrote what the first attempt had not said and
    left out what it had. The first attempt records its answer before it writes; the retry decides on that one."""
    deps = demo
    deps.extractor = Counted([A, B], [A, B2, "User has a dog named Rex."])
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays.", day=0, request_id="req-1", sync=False)
    done = crashed_then_retried(deps, task, "extract.after_table_write@1")
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert sorted(m.text for m in table_mems(deps).values()) == sorted([A, B])
    assert deps.extractor.calls == 1
    assert deps.repo.find_task("demo", APP, TENANT, "req-1").answer is None  # dropped once the task succeeded


def test_a_deleted_memory_reworded_on_another_message_of_the_add_is_not_written_again(demo):
    """Session 35's leftover: a rewording of the deleted statement that cites another message of the add was new to
    the rule for a new answer, and the deleted fact came back. The retry decides on the recorded answer, from which
    the deletion took the statement out; nothing of it stays in the task's item either."""
    deps = demo
    deps.extractor = Split([A, B], [A, "User, who has a dog named Rex, plays cello on Sundays."])
    task = ingest.add(deps, "demo", scope=SC, sync=False, request_id="req-1",
                      messages=[{"role": "user", "content": t, "created_at": T0}
                                for t in ("Clara moved to Lisbon; I play cello on Sundays.", "My dog Rex is two.")])
    arm(deps, "extract.after_index_write@1")
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    arm(deps, "")
    from memlane.services import memories

    cello = next(m for m in table_mems(deps).values() if m.text == B)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=cello.memory_id)
    item = deps.repo.task_item("demo", APP, TENANT, "req-1")
    assert "cello" not in repr(item).lower() and len(item["answer"]) == 2  # A, and B's entry emptied
    done = extract.run(deps, "demo", task.request_id)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert [m.text for m in table_mems(deps).values()] == [A]
    assert [o.reason for o in done.outcomes if o.memory_id == cello.memory_id] == [REDACTED]


TEA = "User likes green tea with honey."


def test_a_statement_restating_a_memory_deleted_before_the_retry_is_not_written_as_new(demo):
    """A regression trial: the job's answer restated an older memory (written nothing for it), died, and the user
    deleted that memory; the retry found nothing like the statement any more and wrote it as new. The deletion takes
    a statement that says the deleted memory again out of a recorded answer too."""
    from memlane.services import memories

    deps = demo
    deps.extractor = Scripted([TEA])
    say(deps, "I like green tea with honey.", day=0, request_id="req-0")
    deps.extractor = Scripted([TEA, B])
    task = say(deps, "Green tea with honey, as always. And I play cello on Sundays.", day=1, request_id="req-1",
               sync=False)
    arm(deps, "extract.after_table_write@1")
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    arm(deps, "")
    tea = next(m for m in table_mems(deps).values() if m.text == TEA)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=tea.memory_id)
    assert "green tea" not in repr(deps.repo.task_item("demo", APP, TENANT, "req-1")).lower()
    done = extract.run(deps, "demo", task.request_id)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert [m.text for m in table_mems(deps).values()] == [B]


def failed_after_writing(deps, task):
    """The job dies after its table write on every delivery, and is given up: FAILED, its memories written."""
    arm(deps, "extract.after_table_write@1")
    with pytest.raises(Crash):
        extract.run(deps, "demo", task.request_id)
    arm(deps, "")
    return extract.fail(deps, "demo", task.request_id, "gave up")


@pytest.mark.parametrize("recorded", [True, False])
def test_a_memory_deleted_after_its_job_failed_is_not_written_again_by_a_manual_retry(demo, monkeypatch, recorded):
    """A regression trial: a FAILED task left no marker when one of its memories was deleted (it counted as finished),
    so a manual retry that asked the model again — no answer recorded — wrote the deleted memory back."""
    from memlane.services import consolidate, memories, tasks

    deps = demo
    if not recorded:
        monkeypatch.setattr(consolidate, "_recordable", lambda answer: False)
    deps.extractor = Scripted([A, B])
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays.", day=0, request_id="req-1", sync=False)
    assert failed_after_writing(deps, task).status == TaskStatus.FAILED
    clara = next(m for m in table_mems(deps).values() if m.text == A)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=clara.memory_id)
    tasks.retry(deps, "demo", task.request_id, app_id=APP, tenant_id=TENANT)
    done = extract.run(deps, "demo", task.request_id)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert [m.text for m in table_mems(deps).values()] == [B]


def test_a_manual_retry_racing_a_deletion_does_not_write_back_the_answer_it_read(demo, monkeypatch):
    """A regression trial: the retry read the FAILED task, a deletion took a statement out of its recorded answer,
    and the retry's write — conditioned on a version the redaction kept — put the old answer back: the memory
    returned. A redaction is a new version of the task."""
    from memlane.services import memories, tasks

    deps = demo
    deps.extractor = Scripted([A, B])
    task = say(deps, "Clara moved to Lisbon; I play cello on Sundays.", day=0, request_id="req-1", sync=False)
    failed_after_writing(deps, task)
    clara = next(m for m in table_mems(deps).values() if m.text == A)
    checks = tasks._refuse_when_backlogged
    deleted = []

    def deleted_meanwhile(*args, **kw):  # between the retry's read and its write, once
        if not deleted:
            deleted.append(memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=clara.memory_id))
        return checks(*args, **kw)

    monkeypatch.setattr(tasks, "_refuse_when_backlogged", deleted_meanwhile)
    tasks.retry(deps, "demo", task.request_id, app_id=APP, tenant_id=TENANT)
    assert "clara" not in repr(deps.repo.task_item("demo", APP, TENANT, "req-1")).lower()
    done = extract.run(deps, "demo", task.request_id)
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert [m.text for m in table_mems(deps).values()] == [B]
