"""Write-time consolidation: each candidate of an extraction job against the nearest active
memories of its subject (every run and agent of the tenant), decided by policies/consolidation.py,
written idempotently.

Memory ids are derived from the request id and the candidate's text (`task_ids.statement_key`), so a
redelivered or retried job writes the same ids again, and a memory found with the id a candidate would
get is this job's own earlier write — even when the model answers the retry otherwise (another order,
a statement more or less: its output is not byte-for-byte repeatable, and the store's instructions may
have changed between deliveries). What an earlier attempt wrote that this answer does not say again is
a neighbour like any memory, so a rephrasing of it is not written twice. An UPDATE or DELETE is applied
as an action of the dream action log (derived id, claimed once), so it is undone like any dream action
and a retry finishes what a crash left pending.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Iterator

from ..domain import limits
from ..domain.errors import ConditionFailed, Conflict, DeadlineExceeded, NotFound, Retryable
from ..domain.models import (REDACTED, Candidate, DreamAction, DreamActionKind, DreamActionStatus, ExtractAction,
                             Memory, MemoryStatus, Message, ScopeInfo, Task, TaskOutcome)
from ..domain.ids import derived_id
from ..domain.scope import Scope, ScopeFilter
from ..policies import conflicts, consolidation
from ..policies.consolidation import Decision, Neighbour
from ..ports import IndexQuery
from . import consolidate_llm as judge
from . import dream_actions, redaction
from .deps import Deps
from .index_writes import index_memories
from .task_ids import memory_id_of, statement_key, task_id

log = logging.getLogger(__name__)


# A tenant's write-time consolidation runs one job at a time: two jobs reading their neighbours at once each miss
# the other's memories, and both write (an AWS-path trial: Lambda ran a tenant's jobs side by side, and the same
# fact was stored twice, Boston and Denver both current). Where one process owns the table, a lock of its own (the
# local queue runs a tenant's jobs one at a time already; a sync add beside them does not); where processes share
# it, a lease in the tenant's partition, renewed while the job holds it, so that one that died lets go within
# LEASE_HOLD (a worker killed mid-job held its tenant's other jobs for the whole of a longer lease: the scale-out
# test). A job that waits LEASE_WAIT_SECONDS is tried again later (Retryable: the queue delivers it again).
LEASE_HOLD = timedelta(seconds=15)
LEASE_RENEW_SECONDS = 5.0
LEASE_WAIT_SECONDS = 60.0
LEASE_PAUSE_SECONDS = 0.05
_LOCKS = tuple(threading.Lock() for _ in range(64))  # by tenant, striped: a few locks for any number of tenants


@contextmanager
def one_at_a_time(deps: Deps, store: str, scope: Scope) -> Iterator[None]:
    # A sync add whose deadline comes first goes on as its job (202), as past any other step; a job tries again later.
    late = deps.deadline.remaining() < LEASE_WAIT_SECONDS
    wait = deps.deadline.remaining() if late else LEASE_WAIT_SECONDS
    busy = (DeadlineExceeded("the deadline passed while another job of this tenant consolidated its memories") if late
            else Retryable("another job of this tenant is consolidating its memories; this one runs after it",
                           code="busy"))
    if not deps.settings.shared_table:
        lock = _LOCKS[hash((store, scope.app_id, scope.tenant_id)) % len(_LOCKS)]
        if not lock.acquire(timeout=max(wait, 0.0)):
            raise busy
        try:
            yield
        finally:
            lock.release()
        return
    repo = deps.repo
    pk, sk = repo.consolidation_lease(store, scope.app_id, scope.tenant_id)
    holder, waited = uuid.uuid4().hex, 0.0
    while not repo.take_lease(pk, sk, holder, deps.clock.now(), LEASE_HOLD):
        if waited >= wait:
            raise busy
        time.sleep(LEASE_PAUSE_SECONDS)
        waited += LEASE_PAUSE_SECONDS
    done = threading.Event()

    def renew() -> None:
        while not done.wait(LEASE_RENEW_SECONDS):
            try:
                repo.take_lease(pk, sk, holder, deps.clock.now(), LEASE_HOLD)
            except Exception:  # noqa: BLE001 — a renewal that fails leaves the lease to expire, the job goes on
                log.warning("could not renew the consolidation lease of %s", pk, exc_info=True)

    renewing = threading.Thread(target=renew, name="consolidation-lease", daemon=True)
    renewing.start()
    try:
        yield
    finally:
        done.set()
        renewing.join()
        repo.release_lease(pk, sk, holder)


def run(deps: Deps, store: str, task: Task, candidates: list[Candidate],
        messages: list[Message], threshold: float, thread: ScopeInfo) -> list[TaskOutcome]:
    """Compare each candidate with the nearest active memories of its subject (every run and agent
    of the tenant) and with what this job already produced, and decide (policies/consolidation).
    UPDATE and DELETE at or above `threshold` (the store's dream_threshold) supersede through an applied
    action of the dream action log, so each is undone like any dream action; NOOP writes nothing.
    `thread`: the task's run as the job read it; a memory is written only while it stands."""
    once: dict[str, Candidate] = {}
    for c in candidates:
        once.setdefault(statement_key(c.text), c)  # one statement said twice in an answer is one memory
    candidates = list(once.values())
    if not candidates and not task.written_ids:
        return []
    now = deps.clock.now()
    said = {m.message_id: m.created_at for m in messages}
    vectors = deps.embedder.embed([c.text for c in candidates])
    across = deps.settings.consolidate_on_write
    subject = ScopeFilter(app_id=task.scope.app_id, tenant_id=task.scope.tenant_id,
                          **({} if across else {"agent_ids": (task.scope.agent_id,), "run_ids": (task.scope.run_id,)}))
    outcomes: list[TaskOutcome] = []
    written: list[tuple[Memory, list[float]]] = []
    changes: list[tuple[int, int, Memory, Decision]] = []  # (candidate, outcome index, memory, decision)
    prior: list[tuple[int, DreamAction | None]] = []  # (outcome index, the change recorded before this attempt)
    times = [max((said[e] for e in c.evidence if e in said), default=now) for c in candidates]
    keys = [statement_key(c.text) for c in candidates]
    ids = [task_id(task, key) for key in keys]
    if others := [w for w in task.written_ids if w not in ids]:  # an older version's attempt named them otherwise
        taken = {statement_key(m.text): m.memory_id
                 for m in deps.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, others)}
        ids = [taken.get(key, i) for key, i in zip(keys, ids)]
    earlier = {m.memory_id: m for m in deps.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, ids)}
    # What an earlier attempt wrote that this answer does not say again (the model's output is not repeatable):
    # indexed (that attempt may have died first), a neighbour of every statement (a rephrasing of it is not
    # written twice), and named by the task.
    left = _left_by_earlier_attempts(deps, store, task, ids)
    # Written by an earlier attempt, then deleted by the user before this one: never written again — nor, when this
    # answer does not say it again as it was, a statement new in it that rests on a message it rested on (the model
    # may word it otherwise: a regression trial; said as it was, a new statement beside it is another fact).
    found = {*earlier, *(m.memory_id for m, _ in left)}
    deleted = deps.repo.deleted_since_written(store, task.scope.app_id, task.scope.tenant_id,
                                              [i for i in dict.fromkeys([*task.written_ids, *ids]) if i not in found])
    # (A retry deciding on the answer its first attempt recorded cannot reword: it is that answer, the deleted
    # statements taken out of it by their deletion — services/redaction.py.)
    unsaid = {gone: said for gone, said in deleted.items() if gone not in ids and task.answer is None}
    rewords: dict[int, str] = {}  # candidate -> the deleted memory it may say again
    for i, c in enumerate(candidates):
        if ids[i] not in task.written_ids:
            if gone := next((g for g, said in unsaid.items() if said.intersection(c.evidence)), None):
                rewords[i] = gone
    # A change an earlier or concurrent attempt recorded for a statement it had not written yet: that record is
    # the decision (this answer's reading may differ — a case, a model's judgement — and it is what the log says).
    recorded_for = _recorded_changes(deps, store, task, keys, ids, earlier) if task.attempts > 1 else {}
    # What an earlier attempt left is indexed now, so the search finds it too: it is a neighbour once (twice, a change
    # of it named it twice in one transaction, and the job failed: a regression trial).
    mine = {*ids, *(m.memory_id for m, _ in left)}
    nearest = {i: [n for n in _neighbours(deps, store, subject, c.text, v) if n.memory.memory_id not in mine]
               + [Neighbour(m, _dot(v, mv)) for m, mv in left if m.status == MemoryStatus.ACTIVE]
               for i, (c, v) in enumerate(zip(candidates, vectors)) if ids[i] not in earlier and i not in rewords}
    # With an LLM, one call decides the whole batch; without one (or for what it leaves undecided
    # after its repair turn: ADD), the rules do.
    judged = (judge.decide(deps.llm, candidates, nearest, times) if deps.llm is not None and across and candidates
              else None)
    for i, (candidate, vector) in enumerate(zip(candidates, vectors)):
        memory_id, observed_at = rewords.get(i, ids[i]), times[i]
        if memory_id in deleted:  # its outcome as the delete's redaction left it
            if (change := recorded_for.get(i)) is not None and change.status == DreamActionStatus.APPLIED:
                # What it closed stays closed (a delete reinstates nothing): the index follows, if a crash cut it
                # off after the apply (it stayed `active` there for good: a trial's fsck).
                dream_actions.reindex(deps, change)
            if all(o.memory_id != memory_id for o in outcomes):
                outcomes.append(TaskOutcome(action=ExtractAction.ADD, memory_id=memory_id, text="", reason=REDACTED))
            continue
        if memory_id in earlier:  # written by an earlier attempt of this same job
            mine = earlier[memory_id]
            if mine.text != candidate.text:  # edited since: index what the table holds
                vector = deps.embedder.embed([mine.text])[0]
            index_memories(deps, store, [(mine, vector)])  # that attempt may have died before the index
            outcomes.append(_resumed(deps, store, task, keys[i], mine))
            continue
        prior_change = recorded_for.get(i)
        made = next((m for m in prior_change.before if m.memory_id == memory_id), None) if prior_change else None
        if made is not None:
            written.append((made, vector))
            prior.append((len(outcomes), prior_change))
            outcomes.append(_outcome_of(prior_change, made))
            continue
        if judged is not None:
            decision = judged[i]
        else:
            # Also compare with what this job has already produced, so one conversation cannot add a fact twice.
            neighbours = nearest[i] + [Neighbour(m, _dot(vector, v)) for m, v in written]
            decision = consolidation.decide(candidate.text, neighbours, observed_at=observed_at,
                                            event_time=candidate.event_time,
                                            duplicate_similarity=deps.settings.duplicate_similarity)
        if not across and decision.action != ExtractAction.NOOP:
            decision = Decision(ExtractAction.ADD)
        decision = _sure_enough(_visible_here(decision, task), threshold)
        if decision.action == ExtractAction.NOOP and decision.target is not None:
            outcomes.append(TaskOutcome(action=ExtractAction.NOOP, memory_id=decision.target.memory_id,
                                        text=candidate.text, target_id=decision.target.memory_id,
                                        reason=decision.reason, confidence=decision.confidence))
            continue
        memory = Memory(memory_id=memory_id, scope=task.scope, memory_type=candidate.memory_type,
                        text=candidate.text, evidence=candidate.evidence, created_at=now, updated_at=now,
                        event_time=candidate.event_time, observed_at=observed_at, valid_from=observed_at,
                        metadata=task.metadata, importance=candidate.importance, keywords=candidate.keywords,
                        reading=conflicts.reading(candidate.text), request_id=task.request_id)
        written.append((memory, vector))
        targets = [t.memory_id for t in decision.targets]
        if decision.targets:
            changes.append((i, len(outcomes), memory, decision))
        outcomes.append(TaskOutcome(action=decision.action, memory_id=memory_id, text=candidate.text,
                                    target_id=targets[0] if targets else None, target_ids=targets,
                                    reason=decision.reason, confidence=decision.confidence if targets else None,
                                    superseded=decision.older))
    outcomes += [_resumed(deps, store, task, statement_key(m.text), m) for m, _ in left]
    # Deleted since an earlier attempt wrote it, its statement taken out of the recorded answer: a change it made
    # stays (its index too, as above), and the outcome says it as the rest.
    taken_out = [key for key, c in (task.answer or {}).items() if c is None]
    for change in _recorded_changes(deps, store, task, taken_out, [task_id(task, k) for k in taken_out], {}).values():
        if change.status == DreamActionStatus.APPLIED:
            dream_actions.reindex(deps, change)
    outcomes += [TaskOutcome(action=ExtractAction.ADD, memory_id=gone, text="", reason=REDACTED)
                 for gone in deleted if all(o.memory_id != gone for o in outcomes)]
    if written:  # noted, with the answer, before they are written: a retry decides on that answer again
        _note_written(deps, task, [m.memory_id for m, _ in written], answer=dict(zip(keys, candidates)))
    # A change is recorded (pending) before the memory that makes it: a crash between the two left a memory that
    # said nothing of the fact it updates, and the retry found no action to finish (`_resumed`).
    recorded: list[tuple[int, DreamAction | None]] = []
    for i, k, memory, decision in changes:
        stored = _record(deps, _supersede(store, task, keys[i], memory, decision, now), i)
        recorded.append((k, stored))
        # Recorded by an attempt that died before writing the memory: the memory is written as that attempt
        # made it (the action's undo record names that version).
        made = next((m for m in stored.before if m.memory_id == memory.memory_id), memory) if stored else memory
        if made != memory:
            written = [(made if m.memory_id == made.memory_id else m, v) for m, v in written]
            outcomes[k] = outcomes[k].model_copy(update={"text": made.text})
    # Table first (the truth), then the index (derived); a crash in between is repaired by the retry.
    for n, (memory, _) in enumerate(written):
        try:
            deps.repo.put_memory(store, memory, new=True, thread=thread)
        except ConditionFailed:
            # Another delivery of this job wrote it, and may have applied its change: that version stands. Or the
            # run's deletion has begun, or a new add made the thread again since: nothing more is written into it
            # (it showed for a moment after the deletion answered, until the job took it back: trials), and the
            # job takes back what it wrote (extract.py).
            pass
        if n == 0 and len(written) > 1:
            deps.faults.point("extract.mid_memories")
    deps.faults.point("extract.after_table_write")
    index_memories(deps, store, written)  # the index as the table holds them, whoever wrote them
    deps.faults.point("extract.after_index_write")
    if written:
        deps.repo.touch_activity(store, task.scope, now)  # new memories: the scope is due for a dream
    closed: set[str] = set()
    for k, stored in [*prior, *recorded]:
        action_id = _apply(deps, stored) if stored is not None else None
        if action_id:
            closed.update(stored.target_ids)
        outcome = outcomes[k]
        outcomes[k] = (outcome.model_copy(update={"action_id": action_id}) if action_id else
                       outcome.model_copy(update={"action": ExtractAction.ADD, "target_id": None, "target_ids": [],
                                                  "superseded": False, "reason": "its target changed meanwhile"}))
    if closed:  # a profile a dream distilled from what this closed says what holds now, not at its next dream
        redaction.rebuild_profiles(deps, store, task.scope.app_id, task.scope.tenant_id, closed)
    return outcomes


def _visible_here(decision: Decision, task: Task) -> Decision:
    """A NOOP only against a memory of the candidate's own agent. Agents are separate actors (their own
    access policy and profile): a duplicate held by another agent is out of sight of this agent's search,
    so dropping the statement would lose what its user just told it. Another run of the same agent is the
    same actor's memory of the same subject: the fact is kept once, under the run that first said it (the
    run's own words stay findable as its messages)."""
    target = decision.target
    if decision.action != ExtractAction.NOOP or target is None or target.scope.agent_id == task.scope.agent_id:
        return decision
    return Decision(ExtractAction.ADD, reason=f"restates {target.memory_id} of agent '{target.scope.agent_id}'; "
                                              "kept so this agent's reads find it")


def _sure_enough(decision: Decision, threshold: float) -> Decision:
    """A change is applied at write time only when it is as sure as a safe_auto dream needs (the store's
    dream_threshold). A weaker one is written as an ADD beside the memory it may change: hiding a fact that
    still holds loses it, while two current memories only rank the newer first — and a dream, which reads
    the pair with the same rules, proposes the change for review. (On six LoCoMo conversations every
    `cue_close` change write time applied hid a fact that still held: docs/benchmarks.md §5.)"""
    if decision.action not in (ExtractAction.UPDATE, ExtractAction.DELETE) or decision.confidence >= threshold:
        return decision
    named = ", ".join(t.memory_id for t in decision.targets)
    return Decision(ExtractAction.ADD, reason=f"may {decision.action.value.lower()} {named} ({decision.reason}), "
                                              f"but its confidence {decision.confidence:.2f} is under the store's "
                                              f"threshold {threshold:.2f}: both kept, for a dream to propose")


def _left_by_earlier_attempts(deps: Deps, store: str, task: Task, ids: list[str]) -> list[tuple[Memory, list[float]]]:
    """The memories earlier attempts of the job wrote and this answer does not repeat, with their vectors, indexed."""
    others = [mid for mid in task.written_ids if mid not in ids]
    left = deps.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, others) if others else []
    if not left:
        return []
    written = list(zip(left, deps.embedder.embed([m.text for m in left])))
    index_memories(deps, store, written)
    return written


# The places in an answer an older version named a job's memories by: an add's messages, two statements each.
_LEGACY_PLACES = 2 * limits.MAX_MESSAGES_PER_ADD


def with_legacy_writes(deps: Deps, store: str, task: Task) -> Task:
    """`task`, naming what an attempt of a version before `written_ids` (2026-12-05) wrote: such a version named a
    job's memories by their place in its answer — with the tenant, or before 2026-12-04 without — so a job it began
    and a crash cut short is finished by this one as an earlier attempt's (an upgrade trial: each memory written
    twice, the first copies never indexed). Only for a job run before that wrote nothing it noted."""
    if task.attempts < 2 or task.written_ids:
        return task
    places = [str(i) for i in range(_LEGACY_PLACES)]
    ids = [*(task_id(task, p) for p in places), *(derived_id(task.store, task.request_id, p) for p in places)]
    found = [m.memory_id for m in deps.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, ids)
             if m.request_id == task.request_id]
    if not found:
        return task
    _note_written(deps, task, found)
    return task.model_copy(update={"written_ids": found})


def memory_ids(task: Task, candidates: list[Candidate]) -> list[str]:
    """The ids the job's memories of `candidates` take (or took): one per statement, the same on every attempt."""
    return list(dict.fromkeys(memory_id_of(task, c.text) for c in candidates))


def _note_written(deps: Deps, task: Task, memory_ids: list[str],
                  answer: dict[str, Candidate | None] | None = None) -> None:
    # A task gone meanwhile (its tenant erased, its run deleted) is not written back; the job goes on to its end,
    # which finds the deletion and takes back what it wrote, the messages' index documents too (extract.py).
    record = answer if task.answer is None and answer is not None and _recordable(answer) else None
    if record is not None or any(mid not in task.written_ids for mid in memory_ids):
        deps.repo.note_task_writes(task, memory_ids, answer=record)


def _recordable(answer: dict[str, Candidate | None]) -> bool:
    """Whether the answer fits beside the rest of the task in one table item (models.Task.answer)."""
    return sum(len(k) + len(c.model_dump_json().encode()) for k, c in answer.items() if c) \
        <= limits.MAX_RECORDED_ANSWER_BYTES


def left_unnamed(deps: Deps, store: str, task: Task, outcomes: list[TaskOutcome]) -> list[TaskOutcome]:
    """`outcomes` and, indexed and named, what another delivery of the job noted and wrote meanwhile that they do
    not name (two deliveries at once, answered otherwise): read again just before the job ends."""
    found = deps.repo.find_task(task.store, task.scope.app_id, task.scope.tenant_id, task.request_id)
    if found is None:
        return outcomes
    left = _left_by_earlier_attempts(deps, store, found, [o.memory_id for o in outcomes])
    return outcomes + [_resumed(deps, store, task, statement_key(m.text), m) for m, _ in left]


def _supersede(store: str, task: Task, key: str, memory: Memory, decision: Decision, now: datetime) -> DreamAction:
    """The decision as a dream action (UPDATE: the survivor supersedes the others), with its undo record."""
    if decision.older:  # the memory said later stays current; the new statement is history
        keep, targets = decision.targets[0], [memory]
    else:
        keep, targets = memory, list(decision.targets)
    return DreamAction(
        action_id=task_id(task, key, "consolidate"), task_id=task.request_id, store=store,
        kind=DreamActionKind.UPDATE, status=DreamActionStatus.PENDING, confidence=decision.confidence,
        rationale=f"{_WRITE_TIME} {decision.action}: {decision.reason}"[:1000], scope=keep.scope,
        target_ids=[t.memory_id for t in targets], keep_id=keep.memory_id, before=[*targets, keep],
        created_at=now, updated_at=now)


_WRITE_TIME = "write-time"


def _record(deps: Deps, action: DreamAction, ordinal: int) -> DreamAction | None:
    """The action in the log, as stored: this one, or what another attempt of the job stored under its id
    (and may have decided since). None when another dream holds the id."""
    repo = deps.repo
    sk = repo.claim_action(action, ordinal)
    if sk is None:
        return None
    try:
        return repo.get_action(action.store, action.action_id)
    except NotFound:
        try:
            repo.put_action(action, sk)
            return action
        except ConditionFailed:  # another attempt of the job stored it meanwhile: what it holds stands
            return repo.get_action(action.store, action.action_id)


def _apply(deps: Deps, stored: DreamAction) -> str | None:
    """Apply a recorded change; its id, or None when it could not be applied (its memories changed meanwhile)."""
    if stored.status == DreamActionStatus.APPLIED:  # an earlier attempt applied it: its index writes again
        dream_actions.reindex(deps, stored)
        return stored.action_id
    if stored.status != DreamActionStatus.PENDING:
        return None
    try:
        return dream_actions.apply(deps, stored).action_id
    except Conflict:
        now = deps.repo.get_action(stored.store, stored.action_id)
        if now.status == DreamActionStatus.APPLIED:  # another delivery of the job applied it meanwhile
            return _apply(deps, now)
        # Stale: a memory it would close was deleted meanwhile — its words must not stay in this action.
        s = stored.scope
        redaction.after_compare(deps, stored.store, s.app_id, s.tenant_id, {*stored.target_ids, stored.keep_id or ""})
        return None


def _resumed(deps: Deps, store: str, task: Task, key: str, memory: Memory) -> TaskOutcome:
    """The outcome of a candidate an earlier attempt wrote (as it wrote it): its supersede action finished if
    it was left pending (the attempt died between writing the memory and applying it)."""
    action_id = task_id(task, key, "consolidate")
    try:
        action = deps.repo.get_action(store, action_id)
    except NotFound:
        action = None  # the attempt died before it recorded a change
    if action is not None and _apply(deps, action):
        return _outcome_of(action, memory)
    return TaskOutcome(action=ExtractAction.ADD, memory_id=memory.memory_id, text=memory.text)


def _outcome_of(action: DreamAction, memory: Memory) -> TaskOutcome:
    """What a recorded write-time change says of `memory`, as a task outcome."""
    kind = action.rationale.removeprefix(_WRITE_TIME).strip().split(":", 1)[0]
    older = action.keep_id != memory.memory_id
    targets = [action.keep_id or ""] if older else list(action.target_ids)
    return TaskOutcome(action=ExtractAction(kind) if kind in ExtractAction.__members__ else ExtractAction.UPDATE,
                       memory_id=memory.memory_id, text=memory.text, target_id=targets[0], target_ids=targets,
                       action_id=action.action_id, superseded=older, confidence=action.confidence,
                       reason=action.rationale)


def _recorded_changes(deps: Deps, store: str, task: Task, keys: list[str], ids: list[str],
                      earlier: dict[str, Memory]) -> dict[int, DreamAction]:
    """The pending or applied write-time changes recorded for the statements not written yet, by candidate."""
    found: dict[int, DreamAction] = {}
    for i, key in enumerate(keys):
        if ids[i] in earlier:
            continue
        try:
            action = deps.repo.get_action(store, task_id(task, key, "consolidate"))
        except NotFound:
            continue
        if action.status in (DreamActionStatus.PENDING, DreamActionStatus.APPLIED):
            found[i] = action
    return found


def _neighbours(deps: Deps, store: str, scope: ScopeFilter, text: str, vector: list[float]) -> list[Neighbour]:
    """The nearest active memories by meaning, and those among the next nearest that share the
    statement's rarer words (a changed value can move a statement away in meaning while it names the
    same things). The index measures every cosine: nothing is embedded again."""
    k = deps.settings.neighbours
    hits = deps.index.search(store, IndexQuery(scope=scope, text=text, vector=vector, k=4 * k))
    cosine = {h.memory_id: h.score for h in hits.vector}
    chosen = [h.memory_id for h in hits.vector[:k]]
    chosen += [h.memory_id for h in hits.keyword[:k] if h.memory_id in cosine and h.memory_id not in chosen]
    if not chosen:
        return []
    memories = deps.repo.get_memories(store, scope.app_id, scope.tenant_id, chosen)
    return [Neighbour(m, cosine[m.memory_id]) for m in memories if m.status == MemoryStatus.ACTIVE]


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))
