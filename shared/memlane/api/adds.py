"""Adds written the way POST /v1/stores/{store}/memories writes them, and adds that did not arrive one per
request: the items of POST .../memories:batch and the messages of the ingestion queue (AWS).

`write` is the single route's body (it calls it). `add_one` takes an add as raw JSON — validated against
the same model, checked against the caller's grant, bound to its tenant, written by `write` — and answers
with its own result: one bad add never fails another, and nothing raises out of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..domain.deadline import Deadline
from ..domain.errors import DeadlineExceeded, InvalidInput, MemlaneError
from ..domain.scope import DEFAULT
from ..services import access, explicit, ingest
from ..services.deps import Deps
from . import errors
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
