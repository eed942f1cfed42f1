from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...domain import limits
from ...services import threads
from ...services.deps import Deps
from ..access import Gate
from ..models import RunDeleted, ThreadIn, ThreadList, ThreadOut
from .common import Cursor, IdParam, Limit


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    def views(d: Deps, store: str, infos: list[Any]) -> list[ThreadOut]:
        """Each thread with its summary's state (one batch read for the page)."""
        name = d.tokenizer.name if d.tokenizer is not None else None
        summaries = d.repo.get_summaries(store, [i.scope for i in infos])
        return [ThreadOut.of(i, name, summaries.get(i.scope)) for i in infos]

    @router.post("/v1/stores/<store>/threads", status_code=201, tags=["threads"],
                 summary="Create a thread (a run with a stable id); the same body again answers the thread",
                 responses={201: {"description": "Created", "content": {"application/json": {"model": ThreadOut}}},
                            200: {"description": "It exists, as asked",
                                  "content": {"application/json": {"model": ThreadOut}}}})
    def create_thread(store: str, body: ThreadIn) -> tuple[dict[str, Any], int]:
        d = gate.bind(router.current_event, store, body.scope.app_id, body.scope.tenant_id,
                      agent_id=body.scope.agent_id, run_id=body.thread_id)
        info, created = threads.create(d, store, scope=body.scope.model_dump(exclude_none=True),
                                       thread_id=body.thread_id, access_policy=body.access_policy,
                                       metadata=body.metadata)
        return views(d, store, [info])[0].model_dump(mode="json"), 201 if created else 200

    @router.get("/v1/stores/<store>/threads/<thread_id>", tags=["threads"],
                summary="A thread: message and token counts, last activity, access policy, metadata")
    def get_thread(store: str, thread_id: str, app_id: IdParam = None, tenant_id: IdParam = None,
                   agent_id: IdParam = None) -> ThreadOut:
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id, run_id=thread_id)
        info = threads.get(d, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id, agent_id=agent_id)
        return views(d, store, [info])[0]

    @router.get("/v1/stores/<store>/threads", tags=["threads"],
                summary="A tenant's threads (optionally one agent's), newest activity first")
    def list_threads(store: str, app_id: IdParam = None, tenant_id: IdParam = None, agent_id: IdParam = None,
                     limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> ThreadList:
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id)
        found, next_cursor = threads.list_(d, store, app_id=app_id, tenant_id=tenant_id, agent_id=agent_id,
                                           limit=limit, cursor=cursor)
        return ThreadList(threads=views(d, store, found), next_cursor=next_cursor)

    @router.delete("/v1/stores/<store>/threads/<thread_id>", tags=["threads"],
                   summary="Delete a thread: its messages, run-scoped memories and summary; tenant memories stay")
    def delete_thread(store: str, thread_id: str, app_id: IdParam = None, tenant_id: IdParam = None,
                      agent_id: IdParam = None) -> RunDeleted:
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id, run_id=thread_id)
        return RunDeleted(**threads.delete(d, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id,
                                           agent_id=agent_id))

    return router
