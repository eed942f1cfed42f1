from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...domain.scope import DEFAULT
from ...services.deps import Deps
from ..access import Gate
from ..adds import add_one, write
from ..audit import record_add
from .common import request_deadline
from ..models import AddAccepted, AddBatchIn, AddBatchOut, AddIn, ExplicitWriteOut, TaskOut


BATCH_OPERATION = "POST /v1/stores/{store}/memories:batch (an add)"  # the audit log's name of one add of a batch


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
        done = write(d, store, body, request_deadline(router.lambda_context, deps.settings) if body.sync else None)
        return done.payload, done.status

    @router.post("/v1/stores/<store>/memories:batch", status_code=200, tags=["ingest"],
                 summary="Up to 100 adds in one request, each written as POST .../memories writes it (asynchronous: "
                         "no sync), each answered in its own result; one refused add does not fail the others",
                 responses={200: {"description": "One result per add, in order: accepted, replayed (its request_id "
                                                 "was accepted before: nothing written), refused (4xx: fix it) or "
                                                 "failed (429/5xx: send it again with the same request_id)",
                                  "content": {"application/json": {"model": AddBatchOut}}}})
    def add_batch(store: str, body: AddBatchIn) -> dict[str, Any]:
        # Each add is checked against the caller's grant with its own scope, and audited with it — accepted or
        # refused, under the tenant it named — as the single route and the ingestion queue do; the batch's own
        # record names no scope (its adds may name several tenants).
        event = router.current_event
        caller = gate.caller(event)
        deps.repo.get_store(store)  # an unknown store refuses the whole batch (404), not each add of it alone
        deadline = request_deadline(router.lambda_context, deps.settings)
        request_id = (event.raw_event.get("requestContext") or {}).get("requestId") or "-"
        results = []
        for i, raw in enumerate(body.adds):
            started = time.perf_counter()
            done = add_one(deps, caller, store, raw, index=i, deadline=deadline)
            record_add(deps, operation=BATCH_OPERATION, request_id=f"{request_id}#{i}", principal=caller.principal,
                       store=store, result=done.result, scope=done.scope,
                       latency_ms=(time.perf_counter() - started) * 1000,
                       retention_days=gate.audit_retention_days)
            results.append(done.result)
        counts = {outcome: sum(r.outcome == outcome for r in results)
                  for outcome in ("accepted", "replayed", "refused", "failed")}
        return AddBatchOut(results=results, **counts).model_dump(mode="json")

    return router
