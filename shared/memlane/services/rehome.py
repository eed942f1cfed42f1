"""A fact another thread said again stays when the thread that said it first is deleted.

Write-time consolidation does not store a statement that a memory of the same agent already holds (NOOP): the
tenant's memory holds the fact once, in the thread that said it first. Deleting that thread took the memory away —
and with it a fact another thread, still there, had said too. Had the deleted thread never been said, that
statement would have been written in its own thread: it is written there now, from the NOOP outcome its task
kept (the statement's text; its evidence, the add's turn that says most of it), under the id its extraction would
have given it, and the outcome says ADD.

Only a current memory is re-homed (one superseded since was closed by a later fact either way), once per memory
(by the earliest thread that said it again: later ones would have found it there), and only from a statement whose
whole text the outcome kept. Called by erase.clear_run before the redaction that empties those outcomes' texts; a
retry finds the memory written and the outcome changed.
"""

from __future__ import annotations

import re
from typing import Any

from ..domain import limits
from ..domain.errors import ConditionFailed
from ..domain.models import ExtractAction, Memory, MemoryStatus, Message, Task, TaskOutcome, TaskStatus
from ..domain.scope import Scope
from ..extractors.rules import edited_keywords
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
    earliest: dict[str, tuple[dict[str, Any], Task, int]] = {}
    for item in deps.repo.tenant_keys(store, run.app_id, run.tenant_id, prefix="TASK#"):
        task = Task.model_validate(item)
        if task.scope == run or task.status != TaskStatus.SUCCEEDED:
            continue
        for k, o in enumerate(task.outcomes):
            if o.action == ExtractAction.NOOP and o.target_id in current and _whole(o.text):
                first = earliest.get(o.target_id)
                if first is None or task.created_at < first[1].created_at:
                    earliest[o.target_id] = (item, task, k)
    written, from_assistant = 0, deps.repo.get_store(store).keywords_from_assistant
    for target, (item, task, k) in earliest.items():
        if deps.repo.get_scope(store, task.scope) is None:
            continue  # its thread is being deleted too
        said = deps.repo.get_messages(store, task.scope, task.message_ids)
        if not said:
            continue
        memory = _statement(deps, current[target], task, task.outcomes[k].text, said, from_assistant)
        try:
            deps.repo.put_memory(store, memory, new=True)
        except ConditionFailed:
            pass  # an earlier attempt of this deletion wrote it
        index_memories(deps, store, [(memory, deps.embedder.embed([memory.text])[0])])
        _outcome_added(deps, item, k, memory.memory_id)
        written += 1
    return written


def _whole(text: str) -> bool:
    """The outcome kept the statement whole (a longer one is cut to a preview), and unredacted."""
    return bool(text) and len(text) < limits.MAX_OUTCOME_TEXT_CHARS


def _statement(deps: Deps, held: Memory, task: Task, text: str, said: list[Message], from_assistant: bool) -> Memory:
    """The memory the task's extraction would have written for `text`, had `held` not been there."""
    words = _words(text)
    turn = max(said, key=lambda m: (len(words & _words(m.content)), m.message_id))
    now = deps.clock.now()
    return Memory(memory_id=memory_id_of(task, text), scope=task.scope, memory_type=held.memory_type, text=text,
                  evidence=[turn.message_id], created_at=now, updated_at=now, event_time=held.event_time,
                  observed_at=turn.created_at, valid_from=turn.created_at, metadata=task.metadata,
                  importance=held.importance, request_id=task.request_id,
                  keywords=edited_keywords(text, [turn], keywords_from_assistant=from_assistant))


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def _outcome_added(deps: Deps, item: dict[str, Any], k: int, memory_id: str) -> None:
    """The task's NOOP outcome `k` as the ADD of `memory_id`, conditioned on its outcomes as read: a redaction
    written meanwhile (another deletion's) is read again, never overwritten."""
    for _ in range(_ATTEMPTS):
        task = Task.model_validate(item)
        if task.outcomes[k].action != ExtractAction.NOOP:
            return  # changed by an earlier attempt
        outcomes = list(task.outcomes)
        outcomes[k] = TaskOutcome(action=ExtractAction.ADD, memory_id=memory_id, text=outcomes[k].text,
                                  reason="said again here; the memory it repeated went with its thread")
        try:
            deps.repo.rewrite(item, task.model_copy(update={"outcomes": outcomes}),
                              expect={"outcomes": item["outcomes"]})
            return
        except ConditionFailed:
            found = deps.table.get(item["pk"], item["sk"])
            if found is None:
                return
            item = found
