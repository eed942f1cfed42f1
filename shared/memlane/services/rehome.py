"""A fact another thread said again stays when the thread that said it first is deleted.

Write-time consolidation does not store a statement that a memory of the same agent already holds (NOOP): the
tenant's memory holds the fact once, in the thread that said it first. Deleting that thread took the memory away —
and with it a fact another thread, still there, had said too. Had the deleted thread never been said, that
statement would have been written in its own thread: it is written there now, from the NOOP outcome its task
kept (the statement's text; its evidence, the add's turn that says most of it), under the id its extraction would
have given it, and the outcome says ADD.

Only a current memory is re-homed (one superseded since was closed by a later fact either way), once per memory:
into the earliest thread that said it again and still stores what it is told (never one switched since to a policy
that stores nothing), whose later repeats are pointed at it (they would have matched it there), and only from a
statement whose whole text the outcome kept. A thread deleted while its memory is written gets it taken back.
Called by erase.clear_run before the redaction that empties those outcomes' texts; a retry finds the memory
written and the outcomes changed. Left: a retry of a deletion that died after writing such a memory writes it
again if the user deleted it meanwhile.
"""

from __future__ import annotations

import re
from typing import Any

from ..domain import limits
from ..domain.errors import ConditionFailed, NotFound
from ..domain.models import ExtractAction, Memory, MemoryStatus, Message, Task, TaskOutcome, TaskStatus
from ..domain.scope import Scope
from ..extractors.rules import edited_keywords
from ..policies import conflicts, timeexpr
from .deps import Deps
from .index_writes import index_memories
from .task_ids import memory_id_of

_ATTEMPTS = 5
_WORD = re.compile(r"\w+")


def rehome(deps: Deps, store: str, run: Scope, memories: list[Memory]) -> int:
    """Write in their own threads the statements other threads said again of the run's current `memories`, before
    they go (`deps` bound to the tenant). Returns how many were written."""
    current = {m.memory_id: m for m in memories if m.status == MemoryStatus.ACTIVE}
    if not current:
        return 0
    try:
        from_assistant = deps.repo.get_store(store).keywords_from_assistant
    except NotFound:  # the store is deleted (its purge takes what is left): nowhere to re-home, and the run still goes
        return 0
    again: dict[str, list[tuple[dict[str, Any], Task, int]]] = {}  # each memory's NOOPs in other threads
    for item in deps.repo.tenant_keys(store, run.app_id, run.tenant_id, prefix="TASK#"):
        task = Task.model_validate(item)
        if task.scope == run or task.status != TaskStatus.SUCCEEDED:
            continue
        again.update({o.target_id: [*again.get(o.target_id, []), (item, task, k)] for k, o in enumerate(task.outcomes)
                      if o.action == ExtractAction.NOOP and o.target_id in current and _whole(o.text)})
    written = 0
    for target, saying in again.items():
        saying.sort(key=lambda s: (s[1].created_at, s[1].request_id))
        # The earliest thread that said it again and still stores what it is told (not one switched since to a
        # policy that stores nothing); the later ones matched it there, as they would have had this run not been.
        home = next((s for s in saying if _stores(deps, store, s[1].scope)), None)
        if home is None:
            continue
        item, task, k = home
        said = deps.repo.get_messages(store, task.scope, task.message_ids)
        if not said:
            continue
        memory = _statement(deps, current[target], task, task.outcomes[k].text, said, from_assistant)
        try:
            deps.repo.put_memory(store, memory, new=True)
        except ConditionFailed:
            pass  # an earlier attempt of this deletion wrote it
        if not _stores(deps, store, task.scope):  # its thread deleted (or switched) while this wrote: taken back
            deps.index.delete(store, [memory.memory_id], app_id=run.app_id, tenant_id=run.tenant_id)
            deps.repo.delete_memory(store, run.app_id, run.tenant_id, memory.memory_id)
            continue
        index_memories(deps, store, [(memory, deps.embedder.embed([memory.text])[0])])
        reason = "said again here; the memory it repeated went with its thread"
        for other, _, j in saying:
            _rewrite_outcome(deps, other, j, target, TaskOutcome(action=ExtractAction.ADD, memory_id=memory.memory_id,
                                                                 reason=reason) if other is item else
                             TaskOutcome(action=ExtractAction.NOOP, memory_id=memory.memory_id,
                                         target_id=memory.memory_id, reason=reason))
        written += 1
    return written


def _stores(deps: Deps, store: str, thread: Scope) -> bool:
    info = deps.repo.get_scope(store, thread)
    return info is not None and info.access_policy.extracts


def _whole(text: str) -> bool:
    """The outcome kept the statement whole (a longer one is cut to a preview), and unredacted."""
    return bool(text) and len(text) < limits.MAX_OUTCOME_TEXT_CHARS


def _statement(deps: Deps, held: Memory, task: Task, text: str, said: list[Message], from_assistant: bool) -> Memory:
    """The memory the task's extraction would have written for `text`, had `held` not been there."""
    words = _words(text)
    turn = max(said, key=lambda m: (len(words & _words(m.content)), m.message_id))
    now = deps.clock.now()
    # Its time as this turn says it (the extractor's reading), not the deleted memory's: "next Tuesday" said two
    # weeks later is another Tuesday, and the deleted thread's day must not stay (a trial, session 32).
    when = timeexpr.resolve(text, turn.created_at)
    return Memory(memory_id=memory_id_of(task, text), scope=task.scope, memory_type=held.memory_type, text=text,
                  evidence=[turn.message_id], created_at=now, updated_at=now, event_time=when.when if when else None,
                  observed_at=turn.created_at, valid_from=turn.created_at, metadata=task.metadata,
                  importance=held.importance, request_id=task.request_id, reading=conflicts.reading(text),
                  keywords=edited_keywords(text, [turn], keywords_from_assistant=from_assistant))


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def _rewrite_outcome(deps: Deps, item: dict[str, Any], k: int, target: str, outcome: TaskOutcome) -> None:
    """The task's outcome `k`, a NOOP on `target`, as `outcome` (its text kept), conditioned on its outcomes as read:
    a redaction written meanwhile (another deletion's) is read again, never overwritten."""
    for _ in range(_ATTEMPTS):
        task = Task.model_validate(item)
        if task.outcomes[k].action != ExtractAction.NOOP or task.outcomes[k].target_id != target:
            return  # changed by an earlier attempt
        outcomes = list(task.outcomes)
        outcomes[k] = outcome.model_copy(update={"text": outcomes[k].text})
        try:
            deps.repo.rewrite(item, task.model_copy(update={"outcomes": outcomes}),
                              expect={"outcomes": item["outcomes"]})
            return
        except ConditionFailed:
            found = deps.table.get(item["pk"], item["sk"])
            if found is None:
                return
            item = found
