"""Adds written the way POST /v1/stores/{store}/memories writes them, and adds that did not arrive one per
request: the items of POST .../memories:batch and the messages of the ingestion queue (AWS).

`write` is the single route's body (it calls it). `add_one` takes an add as raw JSON — validated against
the same model, checked against the caller's grant, bound to its tenant, written by `write` — and answers
with its own result: one bad add never fails another, and nothing raises out of it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..domain.deadline import Deadline
from ..domain.errors import DeadlineExceeded, InvalidInput, MemlaneError
from ..domain.scope import DEFAULT
from ..domain.validation import parse_body
from ..services import access, explicit, ingest
from ..services.deps import Deps
from . import errors
from .audit import record_add
from .models import AddAccepted, AddIn, AddResult, ErrorBody, ExplicitWriteOut, MemoryOut, TaskOut

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Written:
    """An add as POST .../memories answers it, and whether it was a replay (nothing written)."""

    payload: dict[str, Any]
    status: int
    replayed: bool
    request_id: str | None
    task_status: str | None


def write(d: Deps, store: str, body: AddIn, deadline: Deadline | None) -> Written:
    """One add, with `d` already bound to its tenant. `deadline` bounds a sync add's inline extraction."""
    if not body.infer or body.memories is not None:
        written = explicit.write(
            d, store, scope=body.scope.model_dump(exclude_none=True), infer=body.infer,
            memories=None if body.memories is None else [m.model_dump(exclude_none=True) for m in body.memories],
            request_id=body.request_id)
        out = ExplicitWriteOut(memories=[MemoryOut.of(m) for m in written.memories], created=written.created)
        return Written(out.model_dump(mode="json"), 201 if written.created else 200, written.created == 0,
                       body.request_id, None)
    added = ingest.accept(
        d, store, scope=body.scope.model_dump(exclude_none=True),
        messages=[m.model_dump() for m in body.messages] if body.messages is not None else None,
        text=body.text, metadata=body.metadata, sync=body.sync, request_id=body.request_id,
        access_policy=body.access_policy, deadline=deadline if body.sync else None)
    task = added.task
    if body.sync and task.status.finished:
        memories = d.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, task.memory_ids)
        payload, status = TaskOut.of(task, memories).model_dump(mode="json"), 200
    else:
        payload, status = AddAccepted(request_id=task.request_id, status=task.status).model_dump(mode="json"), 202
    return Written(payload, status, added.replayed, task.request_id, str(task.status))


@dataclass(frozen=True)
class Done:
    """An add's result, with the scope it named (for its audit record)."""

    result: AddResult
    scope: dict[str, str]


def add_one(deps: Deps, caller: access.Caller, store: str, raw: Any, *, index: int,
            deadline: Deadline | None = None) -> Done:
    """One add given as raw JSON, for `caller`: its result, never an exception. Adds of a batch or a queue are
    asynchronous (a `sync` add is refused: inline extraction belongs to one request's deadline). Past
    `deadline`, the add is not started and fails as transient (send it again)."""
    scope: dict[str, str] = {}
    request_id = raw.get("request_id") if isinstance(raw, dict) and isinstance(raw.get("request_id"), str) else None
    try:
        if deadline is not None and deadline.expired():
            raise DeadlineExceeded("the request's deadline passed before this add started; send it again")
        body = AddIn.model_validate(raw)
        scope = {k: v for k, v in body.scope.model_dump().items() if isinstance(v, str)}
        if body.sync:
            raise InvalidInput("a batch or queued add is asynchronous: leave sync out and poll its task",
                               code="sync_not_supported", field="sync")
        app_id, tenant_id = body.scope.app_id, body.scope.tenant_id or DEFAULT
        access.require(caller, app_id, tenant_id)
        bound = deps if app_id is None else deps.for_tenant(store, app_id, tenant_id)
        done = write(bound, store, body, None)
        return Done(AddResult(index=index, outcome="replayed" if done.replayed else "accepted", status=done.status,
                              request_id=done.request_id, task_status=done.task_status), scope)
    except ValidationError as invalid:
        status, code, message, field = errors.validation_failure(invalid.errors())
        error = ErrorBody(code=code, message=message, field=field)
    except MemlaneError as refused:
        status = errors.status_of(refused)
        error = ErrorBody(code=refused.code, message=refused.message, field=refused.field)
    except Exception:  # noqa: BLE001 — one add's crash is its own result; the others stand
        log.exception("add %d of store %s failed", index, store)
        status, error = 500, ErrorBody(code="internal_error", message="the add failed; send it again")
    transient = status >= 500 or status == 429
    return Done(AddResult(index=index, outcome="failed" if transient else "refused", status=status,
                          request_id=request_id, error=error), scope)


QUEUE_OPERATION = "SQS /v1/stores/{store}/memories"  # the audit log's name of an add from the ingestion queue


def add_message(deps: Deps, body: str, *, sender_id: str | None, message_id: str, retention_days: int) -> AddResult:
    """One message of the ingestion queue: `{store, request_id, ...an add body}` sent by the IAM principal
    whose unique id SQS reports as `sender_id` (SQS sets it from the sender's signature: it cannot be forged).
    Its grant is looked up by that id, then by its role id (services/access.identify). `request_id` is
    required: a redelivered message is then a replay, never a second add. Audited like an HTTP add."""
    started = time.perf_counter()
    store: str | None = None
    message: Any = None
    try:
        message = parse_body(body)
        if not isinstance(message, dict):
            raise InvalidInput("a message is a JSON object: an add body with its store")
        named = message.pop("store", None)
        if not isinstance(named, str) or not named:
            raise InvalidInput("the message names no store", field="store")
        store = named
        if not isinstance(message.get("request_id"), str) or not message["request_id"]:
            raise InvalidInput("a queued add needs a request_id: a redelivered message is then a replay",
                               code="request_id_required", field="request_id")
        caller = access.identify(deps, "iam", iam_principal=sender_id)
        done = add_one(deps, caller, store, message, index=0)
    except MemlaneError as refused:
        request_id = message.get("request_id") if isinstance(message, dict) else None
        done = Done(AddResult(index=0, outcome="refused", status=errors.status_of(refused),
                              request_id=request_id if isinstance(request_id, str) else None,
                              error=ErrorBody(code=refused.code, message=refused.message, field=refused.field)), {})
    if sender_id:
        record_add(deps, operation=QUEUE_OPERATION, request_id=message_id, principal=sender_id, store=store,
                   result=done.result, scope=done.scope, latency_ms=(time.perf_counter() - started) * 1000,
                   retention_days=retention_days)
    else:  # not sent through SQS (no sender): no store's log is written for an anonymous message
        log.warning("refused message %s without a sender", message_id)
    return done.result
