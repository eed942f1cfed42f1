"""Extract: turn a task's messages into memories, idempotently.

Memory ids are derived from the request id and each candidate's text (services/consolidate.py), so a
redelivered or retried job writes the same ids again instead of new ones, whatever order the model
answers in, and a memory found with the id a candidate would get is recognised as this job's own
earlier write. A retry of a job that wrote already decides on the answer its first attempt recorded
(Task.answer), not on a new one: the model's is not repeatable.
"""

from __future__ import annotations

from typing import Sequence

from ..domain.errors import MemlaneError, NotFound
from ..domain.models import Candidate, ExtractAction, Message, Store, Task, TaskOutcome, TaskStatus
from . import consolidate, embedder_guard, erase, message_index, redaction, stores
from .deps import Deps


def run(deps: Deps, store: str, request_id: str, *, app_id: str | None = None, tenant_id: str | None = None,
        store_obj: Store | None = None, messages_indexed: bool = False) -> Task:
    """`messages_indexed`: the caller has just indexed the task's messages (a sync add). Otherwise they
    are indexed here unless the task says its add did: that write may have failed after the commit."""
    repo = deps.repo
    task = repo.locate_task(store, request_id, app_id, tenant_id)
    if task.status.finished:
        # redelivery of a finished job: nothing to do
        repo.close_task(store, request_id, task.scope.app_id, task.scope.tenant_id)
        return task
    store_obj = embedder_guard.ensure(deps, store_obj or repo.get_store(store))  # vectors of the store's model only
    # Conditioned on the version read: an erased task is never written back, nor a redacted answer (a deletion
    # meanwhile) nor another delivery's notes written over (a trial).
    now = deps.clock.now()
    task, _ = repo.change_task(task, lambda t: None if t.status.finished else t.model_copy(
        update={"status": TaskStatus.RUNNING, "attempts": t.attempts + 1, "updated_at": now}))
    if task is None:
        raise NotFound(f"task '{request_id}' is gone: its tenant was erased or its store deleted", code="task_not_found")
    if task.status.finished:  # another delivery finished it meanwhile
        return task
    task = consolidate.with_legacy_writes(deps, store, task)
    deps.faults.point("extract.after_running")

    messages = repo.get_messages(store, task.scope, task.message_ids)
    if not (messages_indexed or task.messages_indexed):
        deps.deadline.check("indexing the messages")
        message_index.index(deps, store, messages)  # an upsert: harmless if the add indexed them after all
    info = repo.get_scope(store, task.scope)
    if info is None:  # its run deleted, or its tenant erased, before it ran: what earlier attempts wrote goes
        return _withdrawn(deps, store, task, task.written_ids)
    if not info.access_policy.extracts:
        # Its thread was switched since to a policy that stores nothing: an add still queued then, or a retry accepted
        # as the switch was made (a regression trial), extracts nothing.
        return _finished(deps, store_obj, task, [])
    # Between the model steps: a sync add past its deadline stops here, its task RUNNING, and its job
    # (queued with the task) does the work again from the start — every step is idempotent.
    deps.deadline.check("extracting")
    candidates = _extracted(deps, store, task, messages, store_obj) if task.answer is None else \
        [c for c in task.answer.values() if c is not None]
    deps.deadline.check("consolidating")
    try:
        with consolidate.one_at_a_time(deps, store, task.scope):
            # Read again once it is this job's turn: another delivery may have finished the task while this one
            # waited, a manual retry queued it again, or an attempt recorded its answer (the one to decide on).
            task = repo.get_task(store, task.scope.app_id, task.scope.tenant_id, request_id)
            if not task.status.worked_on:
                return task
            if task.answer is not None:
                candidates = [c for c in task.answer.values() if c is not None]
            outcomes = consolidate.run(deps, store, task, candidates, messages, store_obj.dream_threshold, info)
            # Ended before the next delivery's turn: it finds the task SUCCEEDED and writes nothing (a trial).
            return _finished(deps, store_obj, task, consolidate.left_unnamed(deps, store, task, outcomes))
    except NotFound:
        # Its run deleted or its tenant erased meanwhile, the change it recorded with it: what it wrote goes.
        if _deleted_meanwhile(deps, store_obj, task):
            return _withdrawn(deps, store, task, [*task.written_ids, *consolidate.memory_ids(task, candidates)])
        raise


def _extracted(deps: Deps, store: str, task: Task, messages: list[Message], store_obj: Store) -> list[Candidate]:
    """The extractor's answer. (A retry whose first attempt wrote already decides on that attempt's: Task.answer.)"""
    candidates = deps.extractor.extract(messages, context=context(deps, store, task, messages),
                                        instructions=store_obj.extract_instructions,
                                        keywords_from_assistant=store_obj.keywords_from_assistant,
                                        roles=store_obj.extract_roles)
    own = set(task.message_ids)
    # Whatever the extractor, a memory stands on this add's messages: the context's were extracted already.
    return [c for c in candidates if own.intersection(c.evidence)]


def _finished(deps: Deps, store_obj: Store, task: Task, outcomes: list[TaskOutcome]) -> Task:
    """The task SUCCEEDED with `outcomes`; unless its run or its store went meanwhile (what the job wrote goes too) or
    another delivery finished it first."""
    repo, store = deps.repo, store_obj.name
    written = [o.memory_id for o in outcomes if o.action != ExtractAction.NOOP]
    if _deleted_meanwhile(deps, store_obj, task):
        return _withdrawn(deps, store, task, written)

    now = deps.clock.now()
    # Also over FAILED: given up on by a later delivery (the queue's last) while this one worked, its memories are
    # written, and the task says so rather than FAILED with them in place (an AWS-path trial).
    done, succeeded = repo.change_task(task, lambda t: None if not t.status.worked_on else t.model_copy(
        update={"status": TaskStatus.SUCCEEDED, "outcomes": outcomes, "error": None, "answer": None,
                "updated_at": now}))
    if done is None:  # erased meanwhile, after the check above: what it wrote goes too
        return _withdrawn(deps, store, task, written)
    if not succeeded:
        return done  # another delivery finished it first
    redaction.after_compare(deps, store, task.scope.app_id, task.scope.tenant_id,
                            {t for o in outcomes for t in (o.target_id or "", *o.target_ids)})
    # Checked again after the write: a deletion that began after the check above redacts this task
    # itself, and one that finished in between is seen here.
    if _deleted_meanwhile(deps, store_obj, task):
        return _withdrawn(deps, store, task, written)
    repo.close_task(store, task.request_id, task.scope.app_id, task.scope.tenant_id)
    return done


def _deleted_meanwhile(deps: Deps, store_obj: Store, task: Task) -> bool:
    """Whether the run was deleted (or its tenant erased, or its store) while this job ran: its registry entry is
    gone, or — the thread's id taken again by a new add since — the messages this job extracted are. (A store's purge
    lists the tenant's items once, after retiring the store: a trial's memory written after that listing showed in
    the store made again under the name.)"""
    store = store_obj.name
    if not stores.still_the_store(deps, store_obj) or deps.repo.get_scope(store, task.scope) is None:
        return True
    return bool(task.message_ids) and not deps.repo.get_messages(store, task.scope, task.message_ids)


def _withdrawn(deps: Deps, store: str, task: Task, written: list[str]) -> Task:
    """The run was deleted (or its tenant erased) while this job ran: everything it wrote goes again, messages' index
    documents, write-time actions and activity included, and the task ends FAILED — if it still exists (an erasure
    took it). A run whose id a new add has taken since keeps what that add wrote: only this job's memories go."""
    if deps.repo.get_scope(store, task.scope) is None:
        erase.clear_run(deps, store, task.scope, documents=[*task.message_ids, *written])
    else:
        erase.clear_memories(deps, store, task.scope, written, evidence=task.message_ids)
    erase.forget_job(deps, store, task.request_id, task.scope)
    update = {"status": TaskStatus.FAILED, "outcomes": [], "updated_at": deps.clock.now(), "answer": None,
              "error": "its run was deleted while it was extracted"}
    # Not written back once erased with its tenant; over the version as it is now (a redaction's, not this job's copy).
    stored, _ = deps.repo.change_task(task, lambda t: t.model_copy(update=update) if t.status == TaskStatus.RUNNING
                                      else None)
    deps.repo.close_task(store, task.request_id, task.scope.app_id, task.scope.tenant_id)
    return stored if stored is not None and stored.status == TaskStatus.FAILED else task.model_copy(update=update)


def context(deps: Deps, store: str, task: Task, messages: Sequence[Message]) -> list[Message]:
    """The run's messages stored before this add's first one, oldest first: at most
    `extract_context_messages` of them, the newest whole ones within `extract_context_chars`. Read
    from the task's own run (store, app, tenant, agent, run) and nowhere else."""
    limit, budget = deps.settings.extract_context_messages, deps.settings.extract_context_chars
    if limit <= 0 or budget <= 0 or not messages:
        return []
    first = min(m.message_id for m in messages)  # ids sort by time, then arrival, then position in the add
    earlier = [m for m in deps.repo.messages_before(store, task.scope, first, limit=limit)
               if m.request_id != task.request_id]
    kept: list[Message] = []
    for m in earlier:  # newest first
        budget -= len(m.content)
        if budget < 0:
            break
        kept.append(m)
    return kept[::-1]


def fail(deps: Deps, store: str, request_id: str, reason: str, *, app_id: str | None = None,
         tenant_id: str | None = None) -> Task:
    """Mark a task FAILED after its job was given up on (dead-lettered). A finished task keeps its outcome,
    and a failed one its first reason (the last delivery gives up again on a task already failed)."""
    task = deps.repo.locate_task(store, request_id, app_id, tenant_id)
    if task.status.finished:
        deps.repo.close_task(store, request_id, task.scope.app_id, task.scope.tenant_id)
        return task
    now = deps.clock.now()
    # Conditioned on the version read, as every task write of a job: a task erased with its tenant meanwhile is not
    # written back, nor an answer a deletion redacted meanwhile.
    stored, _ = deps.repo.change_task(task, lambda t: None if t.status.finished else t.model_copy(
        update={"status": TaskStatus.FAILED, "error": reason[:1000], "updated_at": now}))
    deps.repo.close_task(store, request_id, task.scope.app_id, task.scope.tenant_id)
    if stored is None:
        raise NotFound(f"task '{request_id}' was erased with its tenant", code="task_not_found")
    return stored


def describe(error: BaseException) -> str:
    if isinstance(error, MemlaneError):
        return f"{error.code}: {error.message}"
    return f"{type(error).__name__}: {error}"
