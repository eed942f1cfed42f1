from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...services import explicit, ingest
from ...domain.scope import DEFAULT
from ...services.deps import Deps
from ..access import Gate
from .common import request_deadline
from ..models import AddAccepted, AddIn, ExplicitWriteOut, MemoryOut, TaskOut


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.post("/v1/stores/<store>/memories", status_code=202, tags=["ingest"],
                 summary="Add messages or text; extraction runs asynchronously (or inline with sync=true, "
                         "within the request's deadline). With infer: false, write `memories` as given",
                 responses={202: {"description": "Accepted; also a sync add whose extraction did not finish within "
                                                 "its deadline (its task goes on as a job: poll it)",
                                  "content": {"application/json": {"model": AddAccepted}}},
                            200: {"description": "Extracted (sync), or memories written before (infer: false)",
                                  "content": {"application/json": {"model": TaskOut | ExplicitWriteOut}}},
                            201: {"description": "Memories written as given (infer: false)",
                                  "content": {"application/json": {"model": ExplicitWriteOut}}}})
    def add_memories(store: str, body: AddIn) -> tuple[dict[str, Any], int]:
        d = gate.bind(router.current_event, store, body.scope.app_id, body.scope.tenant_id or DEFAULT,
                      agent_id=body.scope.agent_id or DEFAULT, run_id=body.scope.run_id or DEFAULT)
        if not body.infer or body.memories is not None:
            written = explicit.write(
                d, store, scope=body.scope.model_dump(exclude_none=True), infer=body.infer,
                memories=None if body.memories is None else [m.model_dump(exclude_none=True) for m in body.memories],
                request_id=body.request_id)
            out = ExplicitWriteOut(memories=[MemoryOut.of(m) for m in written.memories], created=written.created)
            return out.model_dump(mode="json"), 201 if written.created else 200
        task = ingest.add(
            d, store, scope=body.scope.model_dump(exclude_none=True),
            messages=[m.model_dump() for m in body.messages] if body.messages is not None else None,
            text=body.text, metadata=body.metadata, sync=body.sync, request_id=body.request_id,
            access_policy=body.access_policy,
            deadline=request_deadline(router.lambda_context, deps.settings) if body.sync else None)
        if body.sync and task.status.finished:
            memories = d.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, task.memory_ids)
            return TaskOut.of(task, memories).model_dump(mode="json"), 200
        return AddAccepted(request_id=task.request_id, status=task.status).model_dump(mode="json"), 202

    return router
