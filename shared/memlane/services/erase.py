"""Deletion: a run (its messages and run-scoped memories), or a whole tenant in every store.

Both remove table items and index documents. Tenant erasure runs as an asynchronous task: it is
idempotent (re-running finds less and less to delete) and safe to retry after a failure.
"""

from __future__ import annotations

from typing import Any

from ..domain.ids import sortable_id
from ..domain.models import Erasure, TaskStatus
from ..domain.scope import Scope, exact_scope, validate_id
from ..ports import Job
from ..repository import requests_pk, tenant_pk
from .deps import Deps


def delete_run(deps: Deps, store: str, *, scope: dict[str, Any]) -> dict[str, int]:
    """Delete a run's messages, its memories and its registry entry. Returns what was deleted."""
    deps.repo.get_store(store)
    run = exact_scope(scope)
    deps = deps.for_tenant(store, run.app_id, run.tenant_id)
    pk = tenant_pk(store, run.app_id, run.tenant_id)
    messages = [(i["pk"], i["sk"]) for i in deps.repo.tenant_keys(store, run.app_id, run.tenant_id,
                                                                    prefix=f"MSG#{run.agent_id}#{run.run_id}#")]
    memory_items = [i for i in deps.repo.tenant_keys(store, run.app_id, run.tenant_id, prefix="MEM#")
                    if Scope.model_validate(i["scope"]) == run]
    memory_ids = [i["memory_id"] for i in memory_items]
    # Index first: a memory must never stay findable after its table item is gone.
    if memory_ids:
        deps.index.delete(store, memory_ids)
    deps.repo.delete_items(messages + [(i["pk"], i["sk"]) for i in memory_items]
                           + [(pk, f"SCOPE#{run.agent_id}#{run.run_id}")])
    return {"messages": len(messages), "memories": len(memory_ids)}


def request_erasure(deps: Deps, *, app_id: Any, tenant_id: Any, principal: str) -> Erasure:
    now = deps.clock.now()
    erasure = Erasure(erasure_id=sortable_id(now), app_id=validate_id("app_id", app_id),
                      tenant_id=validate_id("tenant_id", tenant_id), principal=principal, created_at=now,
                      updated_at=now)
    # The erasure and its job in one commit: a crash cannot leave it PENDING with no job behind it.
    deps.queue.commit(deps.table, [deps.repo.erasure_put(erasure)],
                      Job(kind="erase", store="~all", request_id=erasure.erasure_id))
    return erasure


def run_erasure(deps: Deps, erasure_id: str) -> Erasure:
    repo = deps.repo
    erasure = repo.get_erasure(erasure_id)
    if erasure.status == TaskStatus.SUCCEEDED:
        return erasure
    erasure = erasure.model_copy(update={"status": TaskStatus.RUNNING, "updated_at": deps.clock.now()})
    repo.put_erasure(erasure)
    items = documents = 0
    touched: list[str] = []
    cursor = None
    while True:
        stores, cursor = repo.list_stores(100, cursor)
        for store in stores:
            n_items, n_docs = _erase_in_store(deps, store.name, erasure.app_id, erasure.tenant_id)
            if n_items:
                touched.append(store.name)
            items, documents = items + n_items, documents + n_docs
            deps.faults.point("erase.after_store")
        if cursor is None:
            break
    deps.faults.point("erase.before_done")
    done = erasure.model_copy(update={"status": TaskStatus.SUCCEEDED, "deleted_items": erasure.deleted_items + items,
                                      "deleted_documents": erasure.deleted_documents + documents,
                                      "stores": sorted(set(erasure.stores + touched)), "updated_at": deps.clock.now()})
    repo.put_erasure(done)
    return done


def fail_erasure(deps: Deps, erasure_id: str, reason: str) -> None:
    erasure = deps.repo.get_erasure(erasure_id)
    deps.repo.put_erasure(erasure.model_copy(update={"status": TaskStatus.FAILED, "error": reason[:1000],
                                                     "updated_at": deps.clock.now()}))


def _erase_in_store(deps: Deps, store: str, app_id: str, tenant_id: str) -> tuple[int, int]:
    tenant = deps.for_tenant(store, app_id, tenant_id)  # the tenant's partition, with its own credentials
    items = list(tenant.repo.tenant_keys(store, app_id, tenant_id))
    memory_ids = [i["memory_id"] for i in items if i["sk"].startswith("MEM#")]
    if memory_ids:
        deps.index.delete(store, memory_ids)
    # Global partitions that name the tenant: each task's request-id guard, the activity registry.
    guards = [(requests_pk(store), i["request_id"]) for i in items if i["sk"].startswith("TASK#")]
    guards += deps.repo.dream_keys_outside(store, app_id, tenant_id, items)  # activity registry, dream pointers
    tenant.repo.delete_items([(i["pk"], i["sk"]) for i in items])
    deps.repo.delete_items(guards)
    return len(items) + len(guards), len(memory_ids)


def purge_store(deps: Deps, store: str) -> int:
    """Delete every table item of a deleted store (its audit log excepted: it expires by itself).
    Idempotent: a retry deletes what is left. Returns how many items it deleted."""
    tenants = list(deps.repo.iter_tenants(store))
    deleted = 0
    for app_id, tenant_id in tenants:
        tenant = deps.for_tenant(store, app_id, tenant_id)
        keys = [(i["pk"], i["sk"]) for i in tenant.repo.tenant_keys(store, app_id, tenant_id)]
        tenant.repo.delete_items(keys)
        deleted += len(keys)
    globals_ = list(deps.repo.store_global_keys(store))
    deps.repo.delete_items(globals_)
    deps.repo.purged(store)
    return deleted + len(globals_)
