"""Memories: get, list, update, delete. Table first, then the index derived from it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from ..domain.errors import ConditionFailed, Conflict, InvalidInput, MemlaneError, NotFound
from ..domain.limits import MAX_CONTENT_CHARS
from ..domain.models import DreamActionKind, DreamActionStatus, Memory, MemoryStatus, MemoryType
from ..domain.scope import Scope, search_scope, validate_id, validate_record_id
from ..domain.validation import check_metadata
from ..extractors.rules import edited_keywords
from ..policies import conflicts
from . import embedder_guard, redaction
from ..ports import Job, Write
from .deps import Deps
from .index_writes import index_memories
from .redaction import Redacted
from .task_ids import statement_key

log = logging.getLogger(__name__)

RACE_RETRIES = 20  # each retry means another writer changed the memory first


def get(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, memory_id: str) -> Memory:
    deps.repo.get_store(store)
    return deps.repo.get_memory(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                validate_record_id("memory_id", memory_id))


def list_(deps: Deps, store: str, *, scope: dict[str, Any], limit: int,
          cursor: str | None) -> tuple[list[Memory], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_memories(store, search_scope(scope), limit=limit, cursor=cursor)


def update(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, memory_id: str, text: str | None = None,
           metadata: dict[str, Any] | None = None, memory_type: MemoryType | None = None,
           importance: float | None = None) -> Memory:
    """Change the memory's fields, over the version read: a delete, a dream or another edit that comes
    in between makes it read again (and a deleted memory is 404), never written back."""
    store_obj = deps.repo.get_store(store)
    embedder_guard.ensure(deps, store_obj)  # the index gets a vector of the store's model
    changes: dict[str, Any] = {}
    if text is not None:
        if not text.strip() or len(text) > MAX_CONTENT_CHARS:
            raise InvalidInput(f"text must be 1-{MAX_CONTENT_CHARS} characters", field="text")
        changes["text"], changes["reading"] = text, conflicts.reading(text)
    if metadata is not None:
        changes["metadata"] = check_metadata(metadata)
    if memory_type is not None:
        changes["memory_type"] = memory_type
    if importance is not None:
        changes["importance"] = importance
    # The new text's vector before anything is written: a model that fails (throttled) leaves the memory as it was,
    # not changed in the table and answered 500 with its old words still in the index (an AWS-path trial).
    vector = deps.embedder.embed([text])[0] if text is not None else None
    for _ in range(RACE_RETRIES):
        memory = get(deps, store, app_id=app_id, tenant_id=tenant_id, memory_id=memory_id)
        if memory.status == MemoryStatus.DELETED:
            raise InvalidInput("a deleted memory cannot be updated", code="memory_deleted", field="memory_id")
        edit = {**changes, "updated_at": deps.clock.now()}
        if text is not None:
            # The old hidden keywords described the old text's surroundings: keep only who said it and when.
            evidence = deps.repo.get_messages(store, memory.scope, memory.evidence)
            edit["keywords"] = edited_keywords(text, evidence, keywords_from_assistant=store_obj.keywords_from_assistant)
        updated = memory.model_copy(update=edit)
        try:
            # With a job that writes the index again from the table: a process that dies between the two (a Lambda's
            # timeout) leaves no old words findable for good.
            commit_indexed(deps, [deps.repo.memory_put(store, updated, previous=memory)],
                           index_job(store, memory.scope, [memory_id]),
                           made=lambda: _held_as(deps, store, updated))
        except ConditionFailed:
            continue  # changed or deleted meanwhile: read it again
        deps.faults.point("memory.after_edit")
        try:
            index_memories(deps, store, [(updated, vector or deps.embedder.embed([updated.text])[0])])
        except MemlaneError as failed:  # changed, with the job that indexes it: answered as changed
            log.warning("memory edit indexed by its job: %s", failed.message)
        if text is not None and text != memory.text:  # the same text sent back: nothing taken out (a trial)
            # No dream action keeps the old text (a pending one fails), then a profile distilled from it says the new
            # one: an apply that lands in between wrote a profile this rebuilds.
            redaction.after_edit(deps, store, memory.scope.app_id, memory.scope.tenant_id, memory_id)
            redaction.rebuild_profiles(deps, store, memory.scope.app_id, memory.scope.tenant_id, {memory_id})
            # The words the edit took out (a password) leave the local files' logs, as a deletion's (a trial).
            deps.compact()
        return updated
    raise Conflict("the memory is too busy; retry the update", code="busy")


REINDEX = "reindex_memory"


def index_job(store: str, scope: Scope, memory_ids: list[str]) -> Job:
    """The job committed with a write of these memories: it writes their documents again from the table, so a process
    that dies between the table and the index leaves nothing stale or unsearchable (named by the first: a job already
    waiting for the same work is enough)."""
    job = Job.of_tenant(REINDEX, store, memory_ids[0], scope.app_id, scope.tenant_id)
    return job.model_copy(update={"memory_ids": memory_ids}) if len(memory_ids) > 1 else job


def commit_indexed(deps: Deps, writes: list[Write], job: Job, *, made: Callable[[], bool]) -> None:
    """Commit a write of memories with its index job. SQS cannot join the table's transaction: the job is sent after
    the commit, and a send that fails then is no failure of the write — it is made (`made` reads it back), and its
    caller indexes it at once, as before the job existed (a 5xx would say not made, and a retry without a request id
    would write it twice)."""
    try:
        deps.queue.commit(deps.table, writes, job)
    except ConditionFailed:
        raise
    except MemlaneError as failed:
        if not made():
            raise
        log.warning("index job of a committed write not sent (%s): indexed by the write", failed.message)


def _held_as(deps: Deps, store: str, memory: Memory) -> bool:
    s = memory.scope
    return any(m.updated_at == memory.updated_at for m in deps.repo.get_memories(store, s.app_id, s.tenant_id,
                                                                                   [memory.memory_id]))


def reindex(deps: Deps, store: str, app_id: str, tenant_id: str, memory_ids: list[str]) -> None:
    """The index as the table holds these memories (idempotent — an upsert, or the delete of what the table no longer
    holds or holds deleted)."""
    held = [m for m in deps.repo.get_memories(store, app_id, tenant_id, memory_ids) if m.status != MemoryStatus.DELETED]
    if held:
        index_memories(deps, store, list(zip(held, deps.embedder.embed([m.text for m in held]))))
    gone = sorted(set(memory_ids) - {m.memory_id for m in held})
    if gone:
        deps.index.delete(store, gone, app_id=app_id, tenant_id=tenant_id)


# How long a deleted memory's marker outlives its delete: a job is redelivered within its queue's retention
# (SQS keeps a message 4 days by default, 14 at most); the sweeper retries a stuck task sooner.
GONE_DAYS = 14


def _gone_marker(deps: Deps, store: str, memory: Memory) -> dict[str, Any]:
    """The marker `repo.delete_memory` leaves for the job that wrote `memory`, finished or not: a worker killed after
    writing it, its job delivered again, found it missing and wrote it back (a shared-engines trial) — and so did a
    late delivery of a job that had SUCCEEDED meanwhile, from the copy of the task it read before (a trial)."""
    s = memory.scope
    task = deps.repo.find_task(store, s.app_id, s.tenant_id, memory.request_id) if memory.request_id else None
    if task is None:
        return {}
    return {"job": task.request_id, "evidence": memory.evidence,
            "until": int((deps.clock.now() + timedelta(days=GONE_DAYS)).timestamp())}


@dataclass(frozen=True)
class Deleted:
    """What a memory delete leaves: a receipt without the text."""

    memory_id: str
    scope: Scope
    deleted_at: datetime
    redacted: Redacted
    merged: list[str] = field(default_factory=list)  # the copies a dream had merged into it, deleted with it


def delete(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, memory_id: str) -> Deleted:
    """A hard delete: the memory's text and keywords leave the index and the table, then every copy
    of them in the tenant's tasks, dream actions and profiles is redacted, and local files compacted.
    The memories a dream merged into it go first, each deleted the same way: they said the same fact (a delete
    says the memory was wrong; what an update superseded stays superseded, services/reinstate.py)."""
    memory = get(deps, store, app_id=app_id, tenant_id=tenant_id, memory_id=memory_id)
    s = memory.scope
    merged: list[str] = []
    for copy in _merged_into(deps, store, memory):
        try:
            merged += [copy, *delete(deps, store, app_id=s.app_id, tenant_id=s.tenant_id, memory_id=copy).merged]
        except NotFound:
            pass  # deleted meanwhile
    # Index first: never findable once the table item is gone.
    deps.index.delete(store, [memory_id], app_id=s.app_id, tenant_id=s.tenant_id)
    # Copies before the memory itself: if this dies half-way, the memory is still there and a retry
    # of the delete redacts the rest (redaction is idempotent).
    said = frozenset({statement_key(memory.text)})
    report = redaction.redact(deps, store, s.app_id, s.tenant_id, memory_ids={memory_id}, statements=said)
    marker = _gone_marker(deps, store, memory)
    deps.repo.delete_memory(store, s.app_id, s.tenant_id, memory_id, **marker)
    if marker and deps.repo.get_scope(store, s) is None:
        # Its run's registry entry gone: an erasure (or the run's deletion) removes those first, then lists the
        # partition, perhaps before the marker was written (trial B). No job of that run is left to guard against.
        deps.repo.delete_items([deps.repo.gone_key(store, s.app_id, s.tenant_id, memory_id)])
    # Again: an edit that wrote before the table delete may have indexed its text after the first one, and a
    # job that compared with the memory may have written its words into a task or an action after the first
    # redaction (one writing after this pass finds the memory gone: redaction.after_compare).
    deps.index.delete(store, [memory_id], app_id=s.app_id, tenant_id=s.tenant_id)
    report = report + redaction.redact(deps, store, s.app_id, s.tenant_id, memory_ids={memory_id}, statements=said)
    # A memory written again under the id since the table delete (an explicit write) lost its document to the
    # pass above: the index follows the table.
    again = deps.repo.get_memories(store, s.app_id, s.tenant_id, [memory_id])
    index_memories(deps, store, [(m, deps.embedder.embed([m.text])[0]) for m in again])
    deps.compact()
    return Deleted(memory_id=memory_id, scope=s, deleted_at=deps.clock.now(), redacted=report, merged=merged)


def _merged_into(deps: Deps, store: str, memory: Memory) -> list[str]:
    """The memories an applied dream MERGE folded into `memory` and that nothing changed since: superseded by it still,
    by that merge (not reinstated since and superseded again by an update that reused the id: a regression trial)."""
    s = memory.scope
    merged_at: dict[str, datetime] = {}
    for item in deps.repo.tenant_keys(store, s.app_id, s.tenant_id, prefix="DACT#"):
        if item.get("kind") == DreamActionKind.MERGE and item.get("status") == DreamActionStatus.APPLIED \
                and item.get("decided_at") and memory.memory_id in (item.get("keep_id"), *item.get("created_ids", ())):
            for target in set(item.get("target_ids", ())) - {memory.memory_id}:
                merged_at[target] = max(merged_at.get(target, datetime.min.replace(tzinfo=timezone.utc)),
                                        datetime.fromisoformat(item["decided_at"]))
    return [m.memory_id for m in deps.repo.get_memories(store, s.app_id, s.tenant_id, sorted(merged_at))
            if m.status == MemoryStatus.SUPERSEDED and m.superseded_by == memory.memory_id
            and m.updated_at <= merged_at[m.memory_id]]
