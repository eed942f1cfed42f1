from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from ...domain import limits
from ...domain.models import DreamActionStatus
from ...services import dream
from ...services.deps import Deps
from ..access import Gate
from ..models import DreamActionList, DreamActionOut, DreamIn, DreamTaskList, DreamTaskOut
from .common import Cursor, IdParam, Limit, request_deadline

StatusParam = Annotated[DreamActionStatus | None, Query()]


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.post("/v1/stores/<store>/dream", status_code=202, tags=["dream"],
                 summary="Consolidate a scope's memories (runs on the queue, or inline with sync=true within the "
                         "request's deadline)",
                 responses={202: {"description": "Accepted; also a sync dream that did not finish within its "
                                                 "deadline (its job goes on: poll the dream task)",
                                  "content": {"application/json": {"model": DreamTaskOut}}},
                            200: {"description": "Dreamt (sync), with its actions",
                                  "content": {"application/json": {"model": DreamTaskOut}}}})
    def start_dream(store: str, body: DreamIn) -> tuple[dict[str, Any], int]:
        d = gate.bind(router.current_event, store, body.scope.app_id, body.scope.tenant_id,
                      agent_id=body.scope.agent_id, run_id=body.scope.run_id)
        task = dream.start(d, store, scope=body.scope.model_dump(exclude_none=True), mode=body.mode,
                           threshold=body.threshold, kinds=body.kinds, sync=body.sync,
                           deadline=request_deadline(router.lambda_context, deps.settings) if body.sync else None)
        if body.sync and task.status.finished:
            actions, _ = dream.list_actions(d, store, task.task_id, limit=1000)
            return DreamTaskOut.of(task, actions).model_dump(mode="json"), 200
        return DreamTaskOut.of(task).model_dump(mode="json"), 202

    @router.get("/v1/stores/<store>/dream-tasks/<task_id>", tags=["dream"], summary="A dream task")
    def get_dream_task(store: str, task_id: str) -> DreamTaskOut:
        return DreamTaskOut.of(dream.get_task(_task_tenant(store, task_id), store, task_id))

    @router.get("/v1/stores/<store>/dream-tasks", tags=["dream"], summary="A tenant's dream tasks, newest first")
    def list_dream_tasks(store: str, app_id: IdParam = None, tenant_id: IdParam = None,
                         limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> DreamTaskList:
        d = gate.bind(router.current_event, store, app_id, tenant_id)
        found, next_cursor = dream.list_tasks(d, store, app_id=app_id, tenant_id=tenant_id, limit=limit,
                                              cursor=cursor)
        return DreamTaskList(tasks=[DreamTaskOut.of(t) for t in found], next_cursor=next_cursor)

    @router.get("/v1/stores/<store>/dream-tasks/<task_id>/actions", tags=["dream"],
                summary="The actions a dream proposed, in order (optionally only those with one status)")
    def list_dream_actions(store: str, task_id: str, status: StatusParam = None,
                           limit: Limit = limits.MAX_PAGE_SIZE, cursor: Cursor = None) -> DreamActionList:
        d = _task_tenant(store, task_id)
        found, next_cursor = dream.list_actions(d, store, task_id, status=status, limit=limit, cursor=cursor)
        return DreamActionList(actions=[DreamActionOut.of(a) for a in found], next_cursor=next_cursor)

    @router.get("/v1/stores/<store>/dream-actions/<action_id>", tags=["dream"], summary="A dream action")
    def get_dream_action(store: str, action_id: str) -> DreamActionOut:
        return DreamActionOut.of(dream.get_action(_action_tenant(store, action_id), store, action_id))

    @router.post("/v1/stores/<store>/dream-actions/<action_id>/apply", tags=["dream"],
                 summary="Apply a pending action (409 if what it is about changed since it was proposed)")
    def apply_dream_action(store: str, action_id: str) -> DreamActionOut:
        return DreamActionOut.of(dream.apply_action(_action_tenant(store, action_id), store, action_id))

    @router.post("/v1/stores/<store>/dream-actions/<action_id>/reject", tags=["dream"],
                 summary="Reject a pending action; a later dream does not propose it again")
    def reject_dream_action(store: str, action_id: str) -> DreamActionOut:
        return DreamActionOut.of(dream.reject_action(_action_tenant(store, action_id), store, action_id))

    @router.post("/v1/stores/<store>/dream-actions/<action_id>/undo", tags=["dream"],
                 summary="Undo an applied action: every memory it touched back exactly as it was")
    def undo_dream_action(store: str, action_id: str) -> DreamActionOut:
        return DreamActionOut.of(dream.undo_action(_action_tenant(store, action_id), store, action_id))

    def _task_tenant(store: str, task_id: str) -> Deps:
        """The task's tenant (its pointer, a global read after authentication), checked and bound."""
        return gate.bind_owner(router.current_event, store,
                               lambda visible: dream.task_owner(deps, store, task_id, visible))

    def _action_tenant(store: str, action_id: str) -> Deps:
        return gate.bind_owner(router.current_event, store,
                               lambda visible: dream.action_owner(deps, store, action_id, visible))

    return router
