from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...domain import limits
from ...services import scopes, tasks
from ...services.deps import Deps
from ..models import AccessPolicyIn, ScopeInfoOut, ScopeList, TaskList, TaskOut
from .common import Cursor, IdParam, Limit


def routes(deps: Deps) -> Router:
    router = Router()

    @router.get("/v1/stores/<store>/tasks/<request_id>", tags=["tasks"], summary="Status of an add's extraction")
    def get_task(store: str, request_id: str) -> TaskOut:
        task = tasks.get(deps, store, request_id)
        found = deps.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, task.memory_ids)
        return TaskOut.of(task, found)

    @router.get("/v1/stores/<store>/tasks", tags=["tasks"], summary="List a tenant's tasks, newest first")
    def list_tasks(store: str, app_id: IdParam = None, tenant_id: IdParam = None,
                   limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> TaskList:
        found, next_cursor = tasks.list_(deps, store, app_id=app_id, tenant_id=tenant_id, limit=limit, cursor=cursor)
        return TaskList(tasks=[TaskOut.of(t) for t in found], next_cursor=next_cursor)

    @router.get("/v1/stores/<store>/scopes", tags=["tasks"], summary="List a tenant's agents and runs")
    def list_scopes(store: str, app_id: IdParam = None, tenant_id: IdParam = None,
                    limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> ScopeList:
        found, next_cursor = scopes.list_(deps, store, app_id=app_id, tenant_id=tenant_id, limit=limit,
                                          cursor=cursor)
        return ScopeList(scopes=[ScopeInfoOut.of(s) for s in found], next_cursor=next_cursor)

    @router.put("/v1/stores/<store>/access-policy", tags=["tasks"], summary="Set a run's access policy")
    def set_access_policy(store: str, body: AccessPolicyIn) -> ScopeInfoOut:
        info = scopes.set_access_policy(deps, store, scope=body.scope.model_dump(exclude_none=True),
                                        policy=body.access_policy)
        return ScopeInfoOut.of(info)

    return router
