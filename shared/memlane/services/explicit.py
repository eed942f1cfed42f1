"""Explicit writes (`infer: false`): memories written and indexed as given — no extraction, no
consolidation — marked `origin: explicit`.

All or nothing: every item is checked before anything is written, and the new memories go to the table
in one transaction. A client `memory_id` (or, without one, the add's `request_id` and the item's
position) makes the write idempotent: the same memory again is answered with what is stored; the same
id with other content is refused (409 `memory_id_reused`). Ids are the tenant's own: another tenant may hold
the same one, in its own document (docs/security.md). The index is written after the table, and a replay
writes it again, so a crash in between is repaired by retrying the request (or `memlane fsck`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

from ..domain import limits
from ..domain.errors import ConditionFailed, Conflict, InvalidInput, MemlaneError, NotFound, PayloadTooLarge
from ..domain.ids import derived_id, message_id_shaped, ordinal, sortable_id
from ..domain.models import (EXPLICIT_WRITE, ExtractAction, Memory, MemoryOrigin, MemoryType, Task, TaskOutcome,
                             TaskStatus)
from ..domain.scope import Scope, is_id, write_scope
from ..domain.validation import check_metadata, check_request_id
from ..policies import conflicts
from ..ports import Put
from ..repository import tenant_pk
from . import embedder_guard, redaction, stores, summaries
from .deps import Deps
from .index_writes import index_memories, take_back
from .memories import commit_indexed, index_job

_RACE_RETRIES = 5
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Written:
    memories: list[Memory]  # in the order given, as stored (a replay: those still there)
    created: int  # how many this call wrote (0: a replay)


def write(deps: Deps, store: str, *, scope: dict[str, Any] | None, memories: Sequence[dict[str, Any]] | None,
          request_id: str | None = None, infer: bool = False) -> Written:
    if infer:
        raise InvalidInput("memories are written as given only with infer: false", code="infer_required",
                           field="infer")
    store_obj = deps.repo.get_store(store)
    where = write_scope(scope)
    check_request_id(request_id)
    now = deps.clock.now()
    drafts = _drafts(where, memories, request_id, now)
    embedder_guard.ensure(deps, store_obj)  # vectors are made here: the store's model only
    repo = deps.repo
    task = _task(store, where, request_id, drafts, now) if request_id is not None else None
    vectors = dict(zip((d.memory_id for d in drafts), deps.embedder.embed([d.text for d in drafts])))
    repo.know_scope(store, where, now)  # before its items: the store's purge finds the tenant (`still_the_store`)
    for _ in range(_RACE_RETRIES):
        recorded = repo.find_task(store, where.app_id, where.tenant_id, request_id) if task is not None else None
        if recorded is not None:
            redaction.check_replay(recorded, request_id)
        if recorded is not None and (recorded.kind != task.kind or recorded.body_hash != task.body_hash):
            raise Conflict(f"request_id '{request_id}' was already used with another body; use a new request_id",
                           code="request_id_reused", field="request_id")
        stored = {m.memory_id: m for m in repo.get_memories(store, where.app_id, where.tenant_id,
                                                            [d.memory_id for d in drafts])}
        for i, draft in enumerate(drafts):
            if draft.memory_id in stored and not _same(stored[draft.memory_id], draft):
                raise Conflict(f"memory_id '{draft.memory_id}' holds another memory; use a new memory_id",
                               code="memory_id_reused", field=f"memories[{i}].memory_id")
        # A write its task records was done whole: a replay writes nothing again — what was deleted since (a memory,
        # its thread) stays deleted, as a replayed add's does.
        new = [d for d in drafts if d.memory_id not in stored] if recorded is None else []
        # The write's task with its memories: its request id is then taken, by an add or a write of another body.
        writes = [repo.task_put(task)] if task is not None and recorded is None else []
        try:
            # only if absent: a concurrent write of the same id makes this read again
            puts = [*(Put(repo.memory_put(store, m).item, if_absent=True) for m in new), *writes]
            if new:
                commit_indexed(deps, puts, index_job(store, where, [m.memory_id for m in new]),
                               made=lambda: len(repo.get_memories(store, where.app_id, where.tenant_id,
                                                                  [m.memory_id for m in new])) == len(new))
            elif writes:
                repo.transact(puts)
        except ConditionFailed:
            continue
        break
    else:
        raise Conflict("these memory ids are too busy; retry the write", code="busy")
    if task is not None:  # after its task (a pointer never names a task that is not there); a replay writes it again
        repo.claim_request(store, task.request_id, where)
        if repo.find_task(store, where.app_id, where.tenant_id, task.request_id) is None:
            # Erased with its tenant meanwhile, after the erasure took the pointers it knew of: this one goes too —
            # unless a retry wrote the task again meanwhile, whose pointer it is then.
            repo.delete_items([repo.request_pointer_key(store, where.app_id, where.tenant_id, task.request_id)])
            if repo.find_task(store, where.app_id, where.tenant_id, task.request_id) is not None:
                repo.claim_request(store, task.request_id, where)
    written = {d.memory_id for d in new}
    result = [stored.get(d.memory_id, d) for d in drafts if d.memory_id in stored or d.memory_id in written]
    deps.faults.point("explicit.after_commit")
    # Table first (the truth), then the index; a replay indexes the stored memories again (the same texts: `_same`).
    try:
        index_memories(deps, store, [(m, vectors[m.memory_id]) for m in result])
    except MemlaneError as failed:
        if not new:
            raise  # a replay wrote nothing: the caller retries
        # Written, with the job that indexes them: answered as written (a 5xx would say not, and a retry without a
        # request id would write them twice). A full disk, an engine down: searchable once the job gets through.
        log.warning("explicit write indexed by its job: %s", failed.message)
    if new:
        repo.touch_activity(store, where, now)  # new memories: the scope is due for a dream
    if not stores.still_the_store(deps, store_obj):
        # Deleted while this wrote (a trial: the write answered 201 after the delete's 204, and its memory showed in
        # the store made again under the name): what it wrote goes, as an add's does.
        _withdraw(deps, store, where, [d.memory_id for d in new], task if writes else None)
        raise NotFound(f"store '{store}' was deleted while the write was made; nothing of it was kept",
                       code="store_not_found")
    return Written(memories=result, created=len(new))


def _withdraw(deps: Deps, store: str, where: Scope, memory_ids: list[str], task: Task | None) -> None:
    """The memories a write made, and its task and request-id pointer if it wrote them: the index first."""
    repo = deps.repo
    take_back(deps, store, memory_ids, app_id=where.app_id, tenant_id=where.tenant_id)
    keys = [repo.memory_key(store, where, i) for i in memory_ids]
    if task is not None:
        keys += [(tenant_pk(store, where.app_id, where.tenant_id), f"TASK#{task.request_id}"),
                 repo.request_pointer_key(store, where.app_id, where.tenant_id, task.request_id)]
    repo.delete_items(keys)


def _drafts(scope: Scope, raw: Sequence[dict[str, Any]] | None, request_id: str | None,
            now: datetime) -> list[Memory]:
    if not raw:
        raise InvalidInput("give memories: a non-empty list of {text, memory_type?, memory_id?, event_time?, "
                           "metadata?}", field="memories")
    if len(raw) > limits.MAX_MEMORIES_PER_WRITE:
        raise PayloadTooLarge(f"a write may carry at most {limits.MAX_MEMORIES_PER_WRITE} memories", field="memories")
    fresh = sortable_id(now)[:16]
    out: list[Memory] = []
    for i, item in enumerate(raw):
        field = f"memories[{i}]"
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput(f"{field}.text must be a non-empty string", field=f"{field}.text")
        if len(text) > limits.MAX_CONTENT_CHARS:
            raise PayloadTooLarge(f"{field}.text exceeds {limits.MAX_CONTENT_CHARS} characters", field=f"{field}.text")
        memory_type = item.get("memory_type") or MemoryType.FACT
        if memory_type not in MemoryType.__members__.values():
            raise InvalidInput(f"{field}.memory_type must be one of {', '.join(MemoryType)}",
                               field=f"{field}.memory_type")
        memory_id = item.get("memory_id")
        if memory_id is None:
            # A retried request lands on the same ids when it names its request_id; else new ones.
            memory_id = (derived_id(scope.app_id, scope.tenant_id, request_id, str(i)) if request_id
                         else fresh + ordinal(i) + derived_id(fresh)[:8])
        elif not isinstance(memory_id, str) or not is_id(memory_id):
            raise InvalidInput(f"{field}.memory_id must be 1-128 characters of letters, digits and _ . : @ + -, "
                               "not dots alone",
                               field=f"{field}.memory_id")
        elif memory_id.startswith(summaries.DOC_PREFIX) or message_id_shaped(memory_id):
            # A message and a thread's summary are documents of the same index, under the tenant's same ids.
            raise InvalidInput(f"{field}.memory_id '{memory_id}' has the form of a message's or a summary's id",
                               code="reserved_memory_id", field=f"{field}.memory_id")
        if any(m.memory_id == memory_id for m in out):
            raise InvalidInput(f"{field}.memory_id '{memory_id}' is given twice", code="duplicate_memory_id",
                               field=f"{field}.memory_id")
        out.append(Memory(memory_id=memory_id, scope=scope, memory_type=MemoryType(memory_type), text=text,
                          created_at=now, updated_at=now, event_time=_utc(item.get("event_time"), f"{field}.event_time"),
                          observed_at=now, valid_from=now,
                          metadata=check_metadata(item.get("metadata"), field=f"{field}.metadata"),
                          reading=conflicts.reading(text), request_id=request_id, origin=MemoryOrigin.EXPLICIT))
    return out


def _utc(value: Any, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(f"{field} must be a date-time", field=field)
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def _task(store: str, scope: Scope, request_id: str, drafts: list[Memory], now: datetime) -> Task:
    """The record of a write named by its request id (GET /tasks/{request_id}): done as it is written, its
    memories' ids as its outcomes, the hash of what it asked for (a reuse with another body is refused)."""
    asked = [{f: _instant(getattr(d, f)) for f in _ASKED} for d in drafts]
    canonical = json.dumps({"scope": scope.as_dict(), "memories": asked}, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False, default=str)
    return Task(request_id=request_id, kind=KIND, store=store, scope=scope, status=TaskStatus.SUCCEEDED,
                created_at=now, updated_at=now, extract=False, body_hash=hashlib.sha256(canonical.encode()).hexdigest(),
                outcomes=[TaskOutcome(action=ExtractAction.ADD, memory_id=d.memory_id) for d in drafts])


KIND = EXPLICIT_WRITE  # a task's kind: written as given
_ASKED = ("memory_id", "text", "memory_type", "event_time", "metadata")  # what the caller gave of each memory


def _instant(value: Any) -> Any:
    """A time in UTC (one instant, whatever zone it was given in: the same write again is a replay). A draft's
    times are aware already (`_utc`)."""
    return value.astimezone(timezone.utc).isoformat() if isinstance(value, datetime) else value


def _same(stored: Memory, draft: Memory) -> bool:
    """The same memory asked for again: what the caller gave (times of writing aside)."""
    fields = ("scope", "text", "memory_type", "event_time", "metadata", "origin")
    return all(getattr(stored, f) == getattr(draft, f) for f in fields)
