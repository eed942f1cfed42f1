from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...domain import limits
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query

from ...domain.errors import NotFound
from ...services import audit, erase, scopes, tasks, threads
from ...services.deps import Deps
from ..access import Gate
from ..models import AccessPolicyIn, EraseTenantIn, ErasureOut, RunDeleted, AuditList, ScopeInfoOut, ScopeList, TaskList, TaskOut
from .common import Cursor, IdParam, InstantParam, Limit


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.get("/v1/stores/<store>/tasks/<request_id>", tags=["tasks"],
                summary="Status of an add's extraction (app_id and tenant_id name the tenant whose request id it is; "
                        "needed only when several tenants within your grant used it)")
    def get_task(store: str, request_id: str, app_id: IdParam = None, tenant_id: IdParam = None) -> TaskOut:
        return owned_task(store, request_id, app_id, tenant_id, tasks.get)

    @router.post("/v1/stores/<store>/tasks/<request_id>/retry", status_code=202, tags=["tasks"],
                 summary="Run a FAILED extraction or summary refresh again: its task PENDING, its job queued "
                         "(app_id and tenant_id as for the task's status)")
    def retry_task(store: str, request_id: str, app_id: IdParam = None, tenant_id: IdParam = None) -> TaskOut:
        return owned_task(store, request_id, app_id, tenant_id, tasks.retry)

    def owned_task(store: str, request_id: str, app_id: IdParam, tenant_id: IdParam, act: Any) -> TaskOut:
        # Request ids are per tenant: the tenant named, or the one within the grant that used the id. The
        # pointer is a global read: only after authentication, and blind to other tenants (an id outside the
        # grant answers as a missing one).
        event = router.current_event
        d = gate.bind_owner(event, store, lambda visible: tasks.owner(
            deps, store, request_id, app_id=app_id, tenant_id=tenant_id, visible=visible))
        owner = gate.checked(event).scope  # the tenant just found and authorized
        task = act(d, store, request_id, app_id=owner["app_id"], tenant_id=owner["tenant_id"])
        found = d.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, task.memory_ids)
        return TaskOut.of(task, found)

    @router.get("/v1/stores/<store>/tasks", tags=["tasks"],
                summary="List a tenant's tasks by request id, descending (generated ids: newest first)")
    def list_tasks(store: str, app_id: IdParam = None, tenant_id: IdParam = None,
                   limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> TaskList:
        d = gate.bind(router.current_event, store, app_id, tenant_id)
        found, next_cursor = tasks.list_(d, store, app_id=app_id, tenant_id=tenant_id, limit=limit, cursor=cursor)
        return TaskList(tasks=[TaskOut.of(t) for t in found], next_cursor=next_cursor)

    @router.get("/v1/stores/<store>/scopes", tags=["tasks"], summary="List a tenant's agents and runs")
    def list_scopes(store: str, app_id: IdParam = None, tenant_id: IdParam = None,
                    limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> ScopeList:
        d = gate.bind(router.current_event, store, app_id, tenant_id)
        found, next_cursor = scopes.list_(d, store, app_id=app_id, tenant_id=tenant_id, limit=limit,
                                          cursor=cursor)
        return ScopeList(scopes=[ScopeInfoOut.of(s) for s in found], next_cursor=next_cursor)

    @router.put("/v1/stores/<store>/access-policy", tags=["tasks"], summary="Set a run's access policy")
    def set_access_policy(store: str, body: AccessPolicyIn) -> ScopeInfoOut:
        d = gate.bind(router.current_event, store, body.scope.app_id, body.scope.tenant_id,
                      agent_id=body.scope.agent_id, run_id=body.scope.run_id)
        info = scopes.set_access_policy(d, store, scope=body.scope.model_dump(exclude_none=True),
                                        policy=body.access_policy)
        return ScopeInfoOut.of(info)

    @router.delete("/v1/stores/<store>/runs/<run_id>", tags=["tasks"],
                   summary="Delete a run: its messages and run-scoped memories, from table and index")
    def delete_run(store: str, run_id: str, app_id: IdParam = None, tenant_id: IdParam = None,
                   agent_id: IdParam = None) -> RunDeleted:
        scope = {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id or None, "run_id": run_id}
        d = gate.bind(router.current_event, store, **scope)
        if scope["agent_id"] is None and app_id and tenant_id:
            scope["agent_id"] = threads.claimant(d, store, app_id=app_id, tenant_id=tenant_id, thread_id=run_id)
        return RunDeleted(**erase.delete_run(d, store, scope=scope))

    @router.post("/v1/tenants/erase", status_code=202, tags=["tasks"],
                 summary="Erase everything of a tenant in every store (asynchronous)")
    def erase_tenant(body: EraseTenantIn) -> ErasureOut:
        caller = gate.require(router.current_event, body.app_id, body.tenant_id)
        found = erase.request_erasure(deps, app_id=body.app_id, tenant_id=body.tenant_id, principal=caller.principal)
        return ErasureOut.model_validate(found.model_dump())

    @router.get("/v1/erasures/<erasure_id>", tags=["tasks"], summary="Status of a tenant erasure")
    def get_erasure(erasure_id: str) -> ErasureOut:
        caller = gate.caller(router.current_event)  # 401 before any lookup
        found = deps.repo.get_erasure(erasure_id)
        if not caller.may_use(found.app_id, found.tenant_id):  # the same 404 as an unknown id: no owner named
            raise NotFound(f"erasure '{erasure_id}' not found", code="erasure_not_found")
        gate.require(router.current_event, found.app_id, found.tenant_id)
        return ErasureOut.model_validate(found.model_dump())

    @router.get("/v1/stores/<store>/requests", tags=["tasks"], summary="The audit log of a store, newest first")
    def list_requests(store: str, since: InstantParam = None, until: InstantParam = None, principal: IdParam = None,
                      status: Annotated[int | None, Query(ge=0, le=599)] = None,
                      operation: Annotated[str | None, Query(max_length=200)] = None, tenant_id: IdParam = None,
                      limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> AuditList:
        gate.require_admin(router.current_event)
        found, next_cursor = audit.list_(deps, store, limit=limit, cursor=cursor, since=since, until=until,
                                         principal=principal, status=status, operation=operation,
                                         tenant_id=tenant_id)
        return AuditList(requests=found, next_cursor=next_cursor)

    return router
