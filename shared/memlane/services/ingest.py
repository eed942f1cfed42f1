"""Add: validate, write the raw messages and the task atomically, enqueue extraction, answer.

Messages are readable as short-term memory as soon as add returns. A client `request_id`
makes add idempotent: a replay returns the existing task and writes nothing new.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from ..domain import limits
from ..domain.errors import ConditionFailed, Conflict, InvalidInput, PayloadTooLarge
from ..domain.ids import derived_id, ordinal, sortable_id, time_prefix
from ..domain.models import AccessPolicy, Message, ScopeInfo, Task, TaskStatus
from ..domain.scope import Scope, write_scope
from ..domain.validation import check_metadata, check_request_id
from ..ports import Job
from . import extract
from .deps import Deps

_RACE_RETRIES = 5
ROLES = ("user", "assistant", "system", "tool", "document")


def _message_id(created_at: datetime, request_id: str, index: int) -> str:
    # Ordered by time, then by position in the request; derived from the request so a retry writes the same ids.
    return time_prefix(created_at) + ordinal(index) + derived_id(request_id, str(index))[:14]


def _messages(scope: Scope, request_id: str, raw: Sequence[dict[str, Any]], now: datetime) -> list[Message]:
    if len(raw) > limits.MAX_MESSAGES_PER_ADD:
        raise PayloadTooLarge(f"an add may carry at most {limits.MAX_MESSAGES_PER_ADD} messages", field="messages")
    out = []
    times = _times(raw, now)
    for i, m in enumerate(raw):
        field = f"messages[{i}]"
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise InvalidInput(f"{field}.role must be one of {', '.join(ROLES)}", field=f"{field}.role")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput(f"{field}.content must be a non-empty string", field=f"{field}.content")
        if len(content) > limits.MAX_CONTENT_CHARS:
            raise PayloadTooLarge(f"{field}.content exceeds {limits.MAX_CONTENT_CHARS} characters",
                                  field=f"{field}.content")
        created = times[i]
        out.append(Message(message_id=_message_id(created, request_id, i), scope=scope, role=role, content=content,
                           name=m.get("name"), created_at=created, request_id=request_id))
    return out


def _times(raw: Sequence[dict[str, Any]], now: datetime) -> list[datetime]:
    """Each message's time. One without created_at takes the time of the message before it (else
    the next timed one): a reply belongs to the conversation it is in, not to the server's clock.
    Only an add with no time at all is stamped now."""
    given = [_utc(m.get("created_at")) if isinstance(m, dict) else None for m in raw]
    out: list[datetime] = []
    for i, t in enumerate(given):
        if t is None:
            t = out[-1] if out else next((g for g in given[i + 1:] if g is not None), now)
        out.append(t)
    return out


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def add(deps: Deps, store: str, *, scope: dict[str, Any] | None, messages: Sequence[dict[str, Any]] | None = None,
        text: str | None = None, metadata: dict[str, Any] | None = None, sync: bool = False,
        request_id: str | None = None, access_policy: AccessPolicy | None = None) -> Task:
    repo = deps.repo
    store_obj = repo.get_store(store)
    write = write_scope(scope)
    check_request_id(request_id)
    metadata = check_metadata(metadata)
    if (messages is None) == (text is None):
        raise InvalidInput("give exactly one of messages or text", field="messages")
    now = deps.clock.now()
    request_id = request_id or sortable_id(now)

    replay = _replay(deps, store, request_id, write)
    if replay is not None:
        return replay

    if text is not None:
        messages = [{"role": "document", "content": text}]
    if not messages:
        raise InvalidInput("messages may not be empty", field="messages")
    msgs = _messages(write, request_id, messages, now)

    # The request id lives in a global partition, the task and messages in the tenant's: two writes,
    # never one transaction (on AWS no single credential may write both; see split_table.py).
    repo.claim_request(store, request_id, write)
    task = None
    for _ in range(_RACE_RETRIES):
        info = repo.get_scope(store, write)
        policy = info.access_policy if info else AccessPolicy(access_policy or AccessPolicy.RECALL_AND_STORE)
        task = Task(request_id=request_id, store=store, scope=write, created_at=now, updated_at=now,
                    message_ids=[m.message_id for m in msgs], metadata=metadata, extract=policy.extracts,
                    status=TaskStatus.PENDING if policy.extracts else TaskStatus.SUCCEEDED)
        new_info = ScopeInfo(scope=write, access_policy=policy, first_seen=info.first_seen if info else now,
                             last_activity=now, message_count=(info.message_count if info else 0) + len(msgs))
        writes = [repo.task_put(task), *(repo.message_put(store, m) for m in msgs),
                  repo.scope_write(store, new_info, previous=info)]
        try:
            repo.transact(writes)
            break
        except ConditionFailed:
            # Either the request id was taken meanwhile (a concurrent replay) or the scope registry moved.
            replay = _replay(deps, store, request_id, write)
            if replay is not None:
                return replay
    else:
        raise Conflict("the scope is too busy; retry the add with the same request_id", code="busy")
    repo.touch_activity(store, write, now)  # the dream scheduler's registry (global partition)

    assert task is not None
    if task.extract:
        if sync:
            return extract.run(deps, store, request_id, store_obj=store_obj)
        deps.queue.enqueue(Job(kind="extract", store=store, request_id=request_id))
    return task


def _replay(deps: Deps, store: str, request_id: str, scope: Scope) -> Task | None:
    existing = deps.repo.find_task(store, request_id)
    if existing is None:
        return None
    if existing.scope != scope:
        raise Conflict(f"request_id '{request_id}' was already used for another scope", code="request_id_in_use",
                       field="request_id")
    if existing.status == TaskStatus.PENDING:
        # The first attempt may have died between its write and its enqueue; extraction is idempotent.
        deps.queue.enqueue(Job(kind="extract", store=store, request_id=request_id))
    return existing
