"""Dream: consolidate the memories of a scope, on request or on a schedule.

A dream task is created (by `start`, or by `schedule` for each due scope) and run by the queue
worker (`run`; `sync` runs it inline). Running it claims the scope's activity, gathers the
tenant's active memories and the scope's recent messages, asks the engine (LLM when one is
configured, rules otherwise; see dream/) for proposals, and records each as an action. In
`proposal` mode every action waits for a caller to apply or reject it; in `safe_auto` the
actions at or above the threshold are applied at once. Any applied action can be undone.
"""

from __future__ import annotations

import heapq
import logging
from datetime import datetime
from typing import Any, Iterable

from ..domain.deadline import Deadline
from ..domain.errors import ConditionFailed, Conflict, DeadlineExceeded, InvalidInput, MemlaneError, NotFound
from ..domain.ids import sortable_id
from ..domain.models import (AuditRecord, DreamAction, DreamActionKind, DreamActionStatus, DreamMode, DreamScope,
                             DreamTask, MemoryStatus, Message, Profile, TaskStatus)
from ..domain.scope import DEFAULT, WILDCARD, Scope, validate_id, validate_record_id
from ..dream.engine import ALL_KINDS, DreamEngine, DreamInput, Proposal, action_id
from ..dream.llm import LLMEngine
from ..policies.dream_rules import recency
from ..ports import Job
from . import dream_actions as executor
from . import audit, embedder_guard, redaction
from . import dream_schedule as scheduler
from .access import Visible, everyone
from .deps import Deps

log = logging.getLogger(__name__)

# An action record must fit a DynamoDB item (400 KB) once apply adds its undo record, which is about
# as large as the proposal itself (the before-images of what it touches).
MAX_ACTION_BYTES = 190_000


def dream_scope(raw: dict[str, Any] | None) -> DreamScope:
    """app_id and tenant_id required; agent_id and run_id optional ('*' or absent = all)."""
    raw = raw or {}
    values: dict[str, Any] = {}
    for f in ("app_id", "tenant_id"):
        if not raw.get(f):
            raise InvalidInput(f"scope.{f} is required for a dream", code="invalid_scope", field=f"scope.{f}")
        values[f] = validate_id(f"scope.{f}", raw[f])
    for f in ("agent_id", "run_id"):
        v = raw.get(f)
        values[f] = None if v in (None, "", WILDCARD) else validate_id(f"scope.{f}", v)
    return DreamScope(**values)


def engine_for(deps: Deps) -> DreamEngine:
    s = deps.settings
    if deps.llm is not None:
        return LLMEngine(deps.llm, plan_grace_days=s.dream_plan_grace_days)
    from ..dream.rules import RulesEngine  # numpy: loaded where a dream runs, not at every function's cold start

    return RulesEngine(deps.embedder, merge_similarity=s.dream_merge_similarity,
                       plan_grace_days=s.dream_plan_grace_days, duplicate_similarity=s.duplicate_similarity)


# -- starting and running -------------------------------------------------------------------
def start(deps: Deps, store: str, *, scope: dict[str, Any] | None, mode: DreamMode | None = None,
          threshold: float | None = None, kinds: Iterable[DreamActionKind] | None = None, sync: bool = False,
          trigger: str = "api", deadline: Deadline | None = None) -> DreamTask:
    """Create a dream task with its job. With `sync` it also runs inline under `deadline`: past it the task
    is returned unfinished (RUNNING) and its job, due by then, finishes it."""
    deadline = deadline or Deadline.never()
    if sync:
        deps = deps.within(deadline)
    store_obj = embedder_guard.ensure(deps, deps.repo.get_store(store))  # a dream embeds and indexes
    where = dream_scope(scope)
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise InvalidInput("threshold must be between 0 and 1", field="threshold")
    now = deps.clock.now()
    task = DreamTask(task_id=sortable_id(now), store=store, scope=where, mode=mode or store_obj.dream_mode,
                     threshold=store_obj.dream_threshold if threshold is None else threshold,
                     kinds=sorted(set(kinds or ())), trigger=trigger, created_at=now, updated_at=now)
    # The store's purge finds the tenant by its registry entry: one that has nothing but this dream too (trial B).
    owner = Scope(app_id=where.app_id, tenant_id=where.tenant_id, agent_id=where.agent_id or DEFAULT)
    deps.repo.know_scope(store, owner, now)
    deps.repo.transact([deps.repo.dream_task_pointer(task)])  # global partition: its own write
    # The task and its job in one commit: a crash cannot leave a dream PENDING with no job behind it. A sync
    # dream's job is due when its deadline passes: the rest of the work if the inline run is cut short.
    job = _job(task)
    deps.queue.commit(deps.table, [deps.repo.dream_task_put(task)], job,
                      delay=min(deps.settings.sync_retry_delay, deadline.remaining()) if sync else 0)
    if not sync:
        return task
    try:
        done = run(deps, store, task.task_id)
    except DeadlineExceeded:
        return deps.repo.get_dream_task(store, task.task_id)  # RUNNING: the job goes on (202)
    except MemlaneError as error:
        if error.code == "dream_task_not_found":  # its own task, gone while it ran: nothing to fail
            deps.queue.discard(job)
            # The tenant erased or the store deleted meanwhile (a trial: answered 404 naming a task id the caller
            # never sent).
            raise Conflict(f"the dream was cut short: its task {task.task_id} was deleted while it ran (the tenant "
                           "erased, or the store deleted); nothing it made was kept", code="dream_task_deleted") \
                from None
        fail(deps, store, task.task_id, f"{error.code}: {error.message}")  # the caller gets the error
        deps.queue.discard(job)
        raise
    deps.queue.discard(job)  # finished inline: the job is not needed (on SQS it finds the task finished)
    return done


def _job(task: DreamTask) -> Job:
    return Job.of_tenant("dream", task.store, task.task_id, task.scope.app_id, task.scope.tenant_id)


def run(deps: Deps, store: str, task_id: str) -> DreamTask:
    """Run a dream task (the `dream` job). A finished task is left alone; a retried one keeps its actions."""
    repo = deps.repo
    task = repo.get_dream_task(store, task_id)
    if task.status.finished:
        return task
    # May take seconds (a cold model) while the tenant is erased: the write below is conditional.
    embedder_guard.ensure(deps, repo.get_store(store))
    now = deps.clock.now()
    task = _move(deps, task.model_copy(update={"status": TaskStatus.RUNNING, "attempts": task.attempts + 1,
                                               "updated_at": now}), expect=task.status)
    if task.status.finished:
        return task
    deps.faults.point("dream.after_running")
    claimed = _claim(deps, task)
    engine = engine_for(deps)
    data = _gather(deps, task, now)
    proposals = engine.propose(data)
    # A sync dream past its deadline stops between steps; its job runs it again (its actions are kept).
    deps.deadline.check("recording the dream's actions")
    actions, waiting, stats = _record(deps, task, proposals, data)
    deps.faults.point("dream.after_actions")
    deps.deadline.check("applying the dream's actions")
    if task.mode == DreamMode.SAFE_AUTO:
        actions = [_auto(deps, task, a) for a in actions]
        # proposals an earlier dream left pending, made again now: this run's threshold decides them too
        stats["applied_earlier"] = sum(_auto(deps, task, a).status == DreamActionStatus.APPLIED for a in waiting)
    for a in actions:
        stats[str(a.status)] = stats.get(str(a.status), 0) + 1
    done = task.model_copy(update={"status": TaskStatus.SUCCEEDED, "engine": engine.name, "error": None,
                                   "action_ids": [a.action_id for a in actions], "stats": stats,
                                   "updated_at": deps.clock.now()})
    # What it read may have been deleted while it ran; checked after its writes, so that a deletion that
    # began meanwhile redacts them itself and one that ended meanwhile is seen here.
    try:
        stored: DreamTask | None = _finish(deps, done)
    except NotFound:  # its task item went with its tenant: erased while the dream ran
        stored = None
    if stored is not None and stored is not done:
        return stored  # a redelivery of its job finished it first
    if stored is None or repo.erased_since(task.scope.app_id, task.scope.tenant_id, task.created_at):
        # Its tenant's erasure deleted its task, or listed the store before these writes (new keys: a profile, its
        # actions, its task), or will list them: either way they go, here (trial B: an erased tenant's profile was
        # served after it).
        _take_back(deps, task, [*actions, *waiting])
        repo.delete_items(repo.dream_task_keys(task))
        raise NotFound(f"dream task '{task_id}' was erased with its tenant while it ran", code="dream_task_not_found")
    s = task.scope
    now_held = {m.memory_id: m for m in repo.get_memories(store, s.app_id, s.tenant_id,
                                                          [m.memory_id for m in data.memories])}
    # Gone, or deleted and written again under its id (another memory now): what was read is gone either way.
    gone = {m.memory_id for m in data.memories
            if m.memory_id not in now_held or now_held[m.memory_id].created_at != m.created_at}
    if gone:  # a memory or a run deleted while the dream ran: no copy of it may stay in what it wrote
        redaction.redact(deps, store, s.app_id, s.tenant_id, memory_ids=gone)
    _without_deleted_messages(deps, task, data, actions)
    for sk in claimed:
        repo.transact([repo.activity_update(store, sk, {"last_dream": now})])
    return done


def _without_deleted_messages(deps: Deps, task: DreamTask, data: DreamInput, actions: list[DreamAction]) -> None:
    """Messages the dream read (for skills and added memories) whose run was deleted while it ran: the memories
    its actions made from them go, and none of its actions keeps a copy of them or of their run (the run's own
    records went with it; one made again by a new add meanwhile is that add's, and stands)."""
    repo, s = deps.repo, task.scope
    deleted: set[str] = set()
    runs = []
    for said in data.messages:
        if said:
            ids = [m.message_id for m in said]
            missing = set(ids) - {m.message_id for m in repo.get_messages(task.store, said[0].scope, ids)}
            if missing:
                deleted |= missing
                runs.append(said[0].scope)
    if not deleted:
        return
    made = [m for m in repo.get_memories(task.store, s.app_id, s.tenant_id, [i for a in actions for i in a.created_ids])
            if deleted & set(m.evidence) or any(run in m.drawn_from for run in runs)]
    if made:
        deps.index.delete(task.store, [m.memory_id for m in made], app_id=s.app_id, tenant_id=s.tenant_id)
        repo.delete_items([repo.memory_key(task.store, s, m.memory_id) for m in made])
        redaction.redact(deps, task.store, s.app_id, s.tenant_id, memory_ids={m.memory_id for m in made})
    for run in runs:
        redaction.redact_task_actions(deps, task.store, s.app_id, s.tenant_id, task.task_id, run)


def _move(deps: Deps, task: DreamTask, *, expect: TaskStatus) -> DreamTask:
    """Write `task` while its item is there and not finished; answer what the item now holds. Conditional, as
    every task write of a job: a task erased with its tenant meanwhile is not written back (NotFound), and one
    another delivery finished is left as it is (answered)."""
    for _ in range(_MOVE_ATTEMPTS):
        try:
            deps.repo.save_dream_task(task, expect_status=expect)
            return task
        except ConditionFailed:
            now = deps.repo.get_dream_task(task.store, task.task_id)  # NotFound: erased with its tenant
            if now.status.finished:
                return now
            expect = now.status  # another delivery moved it on (QUEUED → RUNNING): as before, both run
    raise Conflict(f"dream task '{task.task_id}' is too busy", code="busy")


_MOVE_ATTEMPTS = 3


def _finish(deps: Deps, done: DreamTask) -> DreamTask:
    """Write the dream SUCCEEDED over RUNNING, or over FAILED: given up on by the queue's last delivery while this
    one worked, its actions are recorded and applied, and the task names them (a regression trial); else the task
    as another delivery finished it (NotFound: erased with its tenant)."""
    for expect in (TaskStatus.RUNNING, TaskStatus.FAILED):
        try:
            deps.repo.save_dream_task(done, expect_status=expect)
            return done
        except ConditionFailed:
            continue
    return deps.repo.get_dream_task(done.store, done.task_id)


def _take_back(deps: Deps, task: DreamTask, actions: list[DreamAction]) -> None:
    """What a dream wrote after its tenant's erasure had gone by: its actions with their pointers (which name the
    tenant), the memories they created and the profiles it emitted (the erasure left none), from table and index."""
    s, repo = task.scope, deps.repo
    created = [i for a in actions for i in a.created_ids]
    if created:
        deps.index.delete(task.store, created, app_id=s.app_id, tenant_id=s.tenant_id)
    ours = [i for prefix in ("PROFILE#", f"DACT#{task.task_id}#")  # PROFILE#: distilled ones
            for i in repo.tenant_keys(task.store, s.app_id, s.tenant_id, prefix=prefix)]
    repo.delete_items(repo.dream_pointers(task.store, ours))  # pointers first, as an erasure's
    repo.delete_items([*[(i["pk"], i["sk"]) for i in ours], *[repo.memory_key(task.store, s, i) for i in created]])
    deps.compact()


def fail(deps: Deps, store: str, task_id: str, reason: str) -> DreamTask:
    """Mark a dream FAILED once its job is given up on; the scopes it claimed become due again."""
    task = deps.repo.get_dream_task(store, task_id)
    if task.status.finished:  # a failed one keeps its first reason
        return task
    now = deps.clock.now()
    failed = task.model_copy(update={"status": TaskStatus.FAILED, "error": reason[:1000], "updated_at": now})
    current = _move(deps, failed, expect=task.status)
    if current is not failed:
        return current  # another delivery finished it meanwhile
    s = task.scope
    for sk, info in deps.repo.list_activity(store, s.app_id, s.tenant_id, s.agent_id, s.run_id):
        if info.last_dream_task == task_id and info.pending_since is None:
            try:
                deps.repo.transact([deps.repo.activity_update(store, sk, {"pending_since": now},
                                                              expect={"pending_since": None})])
            except ConditionFailed:
                pass  # new activity made it due meanwhile
    return failed


def schedule(deps: Deps, *, max_scopes: int | None = None, run_inline: bool = False) -> list[DreamTask]:
    """One scheduled run: queue a dream for each picked due scope (or run it here with `run_inline`)."""
    s = deps.settings
    now = deps.clock.now()
    picks, cursors = scheduler.pick(deps, now=now, max_scopes=max_scopes or s.dream_max_scopes,
                                    scan_limit=s.dream_scan_limit, lease_seconds=s.dream_lease_seconds)
    created: list[DreamTask] = []
    for p in picks:
        task = DreamTask(task_id=sortable_id(now), store=p.store.name, scope=p.scope, mode=p.store.dream_mode,
                         threshold=p.store.dream_threshold, trigger="schedule", created_at=now, updated_at=now)
        marks = [deps.repo.activity_update(p.store.name, sk, {"queued_task": task.task_id, "queued_at": now},
                                           expect={"pending_since": info.pending_since,
                                                   "queued_task": info.queued_task})
                 for sk, info in p.entries[:scheduler.MAX_MARKED]]
        try:  # the pointer and the registry marks are global partitions: one transaction
            deps.repo.transact([deps.repo.dream_task_pointer(task), *marks])
        except ConditionFailed:
            continue  # an add or another scheduler moved one of its entries: it is picked next time
        # the task itself in the tenant's partition, with its job; if this fails the marks lapse with their lease
        tenant = _tenant(deps, task)
        if run_inline:
            tenant.repo.save_dream_task(task)
        else:
            deps.queue.commit(tenant.table, [tenant.repo.dream_task_put(task)], _job(task))
        _audit_start(deps, task)
        created.append(task)
    for store, cursor in cursors.items():
        if cursor != deps.repo.get_dream_cursor(store):
            deps.repo.set_dream_cursor(store, cursor)
    if run_inline:
        created = [run(_tenant(deps, t), t.store, t.task_id) for t in created]
    return created


# Who asked for a scheduled dream, in the audit log: the scheduler, as a POST .../dream is its caller's. A dream
# may supersede, merge and retire memories; its row outlives the task and its actions, which an erasure takes.
SCHEDULER = "memlane:scheduler"
SCHEDULED = "SCHEDULE /v1/stores/{store}/dream"


def _audit_start(deps: Deps, task: DreamTask) -> None:
    """The row of a dream the schedule queued (after its task: a row names no dream that was never queued). A row
    that cannot be written is logged, never raised: the dream is queued already."""
    row = AuditRecord(request_id=task.task_id, store=task.store, operation=SCHEDULED, target_id=task.task_id,
                      principal=SCHEDULER, status=202, latency_ms=0.0, at=task.created_at, **task.scope.model_dump())
    try:
        audit.record(deps, row, deps.settings.audit_retention_days)
    except MemlaneError as error:
        log.error("audit record of scheduled dream %s not written: %s", task.task_id, error.message)


def _tenant(deps: Deps, task: DreamTask) -> Deps:
    return deps.for_tenant(task.store, task.scope.app_id, task.scope.tenant_id)


def for_task(deps: Deps, store: str, task_id: str) -> Deps:
    """`deps` bound to the tenant a dream task belongs to (its pointer, a global read): how a job or a
    route addressed by task id reaches the tenant's partition."""
    return deps.for_tenant(store, *task_owner(deps, store, task_id))


def task_owner(deps: Deps, store: str, task_id: str, visible: Visible = everyone) -> tuple[str, str]:
    """The dream task's tenant; outside what the caller may see, the same 404 as an unknown id."""
    deps.repo.get_store(store)
    owner = deps.repo.dream_task_tenant(store, validate_record_id("task_id", task_id))
    if owner is None or not visible(*owner):
        raise NotFound(f"dream task '{task_id}' not found", code="dream_task_not_found")
    return owner


def action_owner(deps: Deps, store: str, action_id: str, visible: Visible = everyone) -> tuple[str, str]:
    deps.repo.get_store(store)
    owner = deps.repo.action_tenant(store, validate_record_id("action_id", action_id))
    if owner is None or not visible(*owner):
        raise NotFound(f"dream action '{action_id}' not found", code="dream_action_not_found")
    return owner


def _auto(deps: Deps, task: DreamTask, action: DreamAction) -> DreamAction:
    """safe_auto: apply an action at or above the threshold; one that went stale meanwhile is marked failed."""
    if action.status == DreamActionStatus.APPLIED:  # by an earlier attempt of this dream: its index writes again
        executor.reindex(deps, action)
    if action.status != DreamActionStatus.PENDING or action.confidence < task.threshold:
        return action
    try:
        return executor.apply(deps, action)
    except Conflict:
        return deps.repo.get_action(task.store, action.action_id)


def _claim(deps: Deps, task: DreamTask) -> list[str]:
    """Take the scope's pending activity: what arrives from now on makes it due again."""
    s, claimed = task.scope, []
    for sk, info in deps.repo.list_activity(task.store, s.app_id, s.tenant_id, s.agent_id, s.run_id):
        if info.pending_since is None and info.last_dream_task != task.task_id:
            continue
        if info.pending_since is not None:
            try:
                deps.repo.transact([deps.repo.activity_update(
                    task.store, sk, {"pending_since": None, "queued_task": None, "queued_at": None,
                                     "last_dream_task": task.task_id}, expect={"pending_since": info.pending_since})])
            except ConditionFailed:
                continue  # new activity raced in: it stays due and is dreamed next time
        claimed.append(sk)
    return claimed


def _gather(deps: Deps, task: DreamTask, now: datetime) -> DreamInput:
    repo, s = deps.repo, task.scope
    active = (m for m in repo.iter_memories(task.store, s.app_id, s.tenant_id) if m.status == MemoryStatus.ACTIVE)
    memories = heapq.nlargest(deps.settings.dream_max_memories, active, key=recency)
    kinds = frozenset(task.kinds) or ALL_KINDS
    messages = _messages(deps, task) if kinds & {DreamActionKind.EMIT_SKILL, DreamActionKind.ADD} else []
    agents = sorted({m.scope.agent_id for m in memories if s.covers(m.scope)} - {DEFAULT}) if s.agent_id is None \
        else ([s.agent_id] if s.agent_id != DEFAULT else [])
    profiles: dict[str | None, Profile | None] = {
        a: repo.get_profile(task.store, s.app_id, s.tenant_id, a) for a in [None, *agents]}
    return DreamInput(store=task.store, scope=s, now=now, memories=memories, messages=messages, profiles=profiles,
                      profile_agents=agents, kinds=kinds)


def _messages(deps: Deps, task: DreamTask) -> list[list[Message]]:
    """The newest messages of the scope's most recently active runs, each run in conversation order."""
    repo, s, runs, cursor = deps.repo, task.scope, [], None
    while True:
        page, cursor = repo.list_scopes(task.store, s.app_id, s.tenant_id, limit=200, cursor=cursor)
        # A thread that stores nothing in long-term memory (none, recall_only) gives the dream nothing either.
        runs += [info for info in page if s.covers(info.scope) and info.access_policy.extracts]
        if not cursor:
            break
    runs.sort(key=lambda info: info.last_activity, reverse=True)
    out = []
    for info in runs[:deps.settings.dream_max_runs]:
        newest, _ = repo.list_messages(task.store, info.scope, limit=deps.settings.dream_max_messages, cursor=None,
                                       forward=False)
        out.append(list(reversed(newest)))
    return out


def _record(deps: Deps, task: DreamTask, proposals: list[Proposal],
            data: DreamInput) -> tuple[list[DreamAction], list[DreamAction], dict[str, int]]:
    """Store each new proposal as a pending action. Idempotent: a retried task keeps what it stored,
    and a proposal already stored by another dream (pending, rejected or undone) is not repeated.
    Returns this task's actions, the still pending ones of earlier dreams it proposed again, and counts."""
    repo, s = deps.repo, task.scope
    mine, _ = repo.list_actions(task.store, s.app_id, s.tenant_id, task.task_id)
    by_id = {a.action_id: a for a in mine}
    memories = {m.memory_id: m for m in data.memories}
    stats = {"proposed": 0, "repeated": 0, "noop": 0}
    waiting: list[DreamAction] = []
    now = deps.clock.now()
    for p in proposals:
        if p.kind == DreamActionKind.NOOP:
            stats["noop"] += 1
            continue
        aid = action_id(task.store, s, p)
        if aid in by_id:
            continue
        involved = [*p.target_ids, *([p.keep_id] if p.keep_id else [])]
        action = DreamAction(action_id=aid, task_id=task.task_id, store=task.store, kind=p.kind,
                             confidence=round(p.confidence, 4), rationale=p.rationale[:1000], scope=p.scope,
                             target_ids=list(p.target_ids), keep_id=p.keep_id,
                             before=[memories[i] for i in involved if i in memories], after=p.after,
                             profile=p.profile, created_at=now, updated_at=now)
        if len(action.model_dump_json()) > MAX_ACTION_BYTES:
            stats["too_large"] = stats.get("too_large", 0) + 1
            continue
        sk = repo.claim_action(action, len(by_id))
        if sk is None:
            stats["repeated"] += 1  # proposed before by another dream: decided there
            earlier = repo.get_action(task.store, aid)
            if earlier.status == DreamActionStatus.PENDING:
                waiting.append(earlier)
            continue
        try:
            repo.put_action(action, sk)
            stats["proposed"] += 1
        except ConditionFailed:
            # Another delivery of this task stored it after the listing above, and may have applied it: the
            # stored one stands (written over, an APPLIED action went back to PENDING without its undo).
            action = repo.get_action(task.store, aid)
        by_id[aid] = action
    return list(by_id.values()), waiting, stats


# -- reading, deciding, undoing -------------------------------------------------------------
def get_task(deps: Deps, store: str, task_id: str) -> DreamTask:
    deps.repo.get_store(store)
    return deps.repo.get_dream_task(store, validate_record_id("task_id", task_id))


def list_tasks(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, limit: int,
               cursor: str | None) -> tuple[list[DreamTask], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_dream_tasks(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                      limit=limit, cursor=cursor)


def list_actions(deps: Deps, store: str, task_id: str, *, status: DreamActionStatus | None = None,
                 limit: int = 100, cursor: str | None = None) -> tuple[list[DreamAction], str | None]:
    task = get_task(deps, store, task_id)
    found, next_cursor = deps.repo.list_actions(store, task.scope.app_id, task.scope.tenant_id, task_id,
                                                limit=limit, cursor=cursor)
    return [a for a in found if status is None or a.status == status], next_cursor


def get_action(deps: Deps, store: str, action_id: str) -> DreamAction:
    deps.repo.get_store(store)
    return deps.repo.get_action(store, validate_record_id("action_id", action_id))


def apply_action(deps: Deps, store: str, action_id: str) -> DreamAction:
    embedder_guard.ensure(deps, deps.repo.get_store(store))  # applying indexes with this process's vectors
    began = deps.clock.now()
    done = executor.apply(deps, get_action(deps, store, action_id), repair=True)
    if deps.repo.erased_since(done.scope.app_id, done.scope.tenant_id, began):
        executor.take_back(deps, done)
        raise NotFound(f"action '{action_id}' was erased with its tenant while it was applied", code="action_not_found")
    return done


def reject_action(deps: Deps, store: str, action_id: str) -> DreamAction:
    return executor.reject(deps, get_action(deps, store, action_id))


def undo_action(deps: Deps, store: str, action_id: str) -> DreamAction:
    embedder_guard.ensure(deps, deps.repo.get_store(store))
    return executor.undo(deps, get_action(deps, store, action_id), repair=True)


def get_profile(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, agent_id: Any = None) -> Profile:
    deps.repo.get_store(store)
    agent = None if agent_id in (None, "", WILDCARD) else validate_id("agent_id", agent_id)
    profile = deps.repo.get_profile(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id), agent)
    if profile is None:
        who = f"agent '{agent}' of tenant '{tenant_id}'" if agent else f"tenant '{tenant_id}'"
        raise NotFound(f"no profile of {who} yet (a dream emits it)", code="profile_not_found")
    return profile
