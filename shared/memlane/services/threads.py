"""Threads: a run made explicit. Its record is the run's scope-registry entry (message and token counts,
last activity, access policy, metadata); a thread id names one thread of the tenant (its claim item
records the agent). Adds to a run keep working as before and make it a thread too.

Deleting a thread is deleting its run (services/erase.delete_run): messages, run-scoped memories and
whatever is kept of them elsewhere; the tenant's other memories stay.
"""

from __future__ import annotations

from typing import Any

from ..domain import limits
from ..domain.errors import ConditionFailed, Conflict, NotFound
from ..domain.ids import sortable_id
from ..domain.models import AccessPolicy, ScopeInfo
from ..domain.scope import DEFAULT, Scope, validate_id, write_scope
from ..domain.validation import check_metadata
from . import erase, stores
from .deps import Deps

_RACE_RETRIES = 20


def create(deps: Deps, store: str, *, scope: dict[str, Any] | None, thread_id: str | None = None,
           access_policy: AccessPolicy | None = None,
           metadata: dict[str, Any] | None = None) -> tuple[ScopeInfo, bool]:
    """The thread and whether this call created it. Idempotent on `thread_id`: asking again for the
    thread as it is answers it; naming another agent or other metadata is 409 `thread_exists`, another
    access policy 409 `access_policy_mismatch` (changed only by PUT /access-policy, as for any run)."""
    store_obj = deps.repo.get_store(store)
    if scope is not None and scope.get("run_id") not in (None, ""):
        raise Conflict("name the thread by thread_id, not scope.run_id", code="conflicting_scope", field="scope.run_id")
    thread_id = validate_id("thread_id", thread_id) if thread_id is not None else sortable_id(deps.clock.now())
    where = write_scope({**(scope or {}), "run_id": thread_id})
    metadata = check_metadata(metadata)
    repo = deps.repo
    repo.know_scope(store, where, deps.clock.now())  # the store's purge finds a tenant known only by its threads
    for _ in range(_RACE_RETRIES):
        claimed = repo.thread_agent(store, where.app_id, where.tenant_id, thread_id)
        if claimed not in (None, where.agent_id):
            raise Conflict(f"thread '{thread_id}' belongs to agent '{claimed}' of the tenant", code="thread_exists",
                           field="scope.agent_id")
        existing = repo.get_scope(store, where)
        if existing is not None:
            _same(existing, access_policy, metadata)
        now = deps.clock.now()
        info = existing or ScopeInfo(scope=where, access_policy=access_policy or AccessPolicy.RECALL_AND_STORE,
                                     first_seen=now, last_activity=now, metadata=metadata)
        if existing is None:  # the run, with its id's claim as read above (free, or this agent's old one)
            writes = [*repo.scope_writes(store, info, previous=None), *repo.claim_as_read(store, where, claimed)]
        else:
            writes = [repo.thread_claim(store, where)] if claimed is None else []
        try:
            if writes:
                repo.transact(writes)
        except ConditionFailed:
            continue  # an add, another create or a deletion came first: read again
        found = repo.get_scope(store, where)
        if found is None:
            continue  # deleted (or erased) since: made again
        if existing is None and not stores.still_the_store(deps, store_obj):
            # Its store deleted meanwhile (a trial: the thread showed, metadata and all, in the store made again
            # under the name): it goes, as an add's run does.
            try:
                repo.transact(repo.run_removal(store, found))
            except ConditionFailed:
                pass  # an add moved it meanwhile: that add takes itself back with its run
            raise NotFound(f"store '{store}' was deleted while the thread was created", code="store_not_found")
        return found, existing is None
    raise Conflict("the thread is too busy; retry the create", code="busy")


def _same(existing: ScopeInfo, access_policy: AccessPolicy | None, metadata: dict[str, Any]) -> None:
    if access_policy is not None and AccessPolicy(access_policy) != existing.access_policy:
        raise Conflict(f"thread '{existing.scope.run_id}' has access policy '{existing.access_policy}'",
                       code="access_policy_mismatch", field="access_policy")
    if metadata and metadata != existing.metadata:
        raise Conflict(f"thread '{existing.scope.run_id}' exists with other metadata", code="thread_exists",
                       field="metadata")


def locate(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, thread_id: Any,
           agent_id: Any = None) -> ScopeInfo:
    """A thread by its id within the tenant (the agent from its claim, or the one named). Runs from
    before thread ids were claimed are found by naming their agent (`__default__` when none is named)."""
    info = deps.repo.get_scope(store, scope_of(deps, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id,
                                               agent_id=agent_id))
    if info is None:
        raise NotFound(f"thread '{thread_id}' not found", code="thread_not_found")
    return info


def scope_of(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, thread_id: Any, agent_id: Any = None) -> Scope:
    """The scope a thread id names within the tenant, whether or not the thread exists: under the agent named,
    else the agent that claimed the id, else `__default__`. Every route addressing a thread resolves it so."""
    deps.repo.get_store(store)
    app, tenant = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    thread = validate_id("thread_id", thread_id)
    agent = validate_id("agent_id", agent_id) if agent_id not in (None, "") else None
    claimed = None if agent else deps.repo.thread_agent(store, app, tenant, thread)
    return Scope(app_id=app, tenant_id=tenant, agent_id=agent or claimed or DEFAULT, run_id=thread)


def claimant(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, thread_id: Any) -> str:
    """The agent whose thread this id is, for a route that deletes a run without naming its agent. 404 when no
    thread of the id is known (none, or deleted): a run of explicit memories alone has no thread to say whose it
    is, and a guess (`__default__`) would answer a delete of nothing as done."""
    deps.repo.get_store(store)
    app, tenant = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    claimed = deps.repo.thread_agent(store, app, tenant, validate_id("run_id", thread_id))
    if claimed is None:
        raise NotFound(f"no thread '{thread_id}' in the tenant: name its agent_id to delete a run that holds only "
                       "explicit memories", code="thread_not_found")
    return claimed


def get(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, thread_id: Any, agent_id: Any = None) -> ScopeInfo:
    return locate(deps, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id, agent_id=agent_id)


def list_(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, agent_id: Any = None, limit: int,
          cursor: str | None) -> tuple[list[ScopeInfo], str | None]:
    """A tenant's threads (optionally one agent's), newest activity first."""
    deps.repo.get_store(store)
    agent = validate_id("agent_id", agent_id) if agent_id not in (None, "") else None
    return deps.repo.recent_threads(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                    agent_id=agent, limit=min(limit, limits.MAX_PAGE_SIZE), cursor=cursor,
                                    max_scan=limits.MAX_THREAD_SCAN)


def delete(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, thread_id: Any,
           agent_id: Any = None) -> dict[str, int]:
    """Delete a thread: its run's messages, run-scoped memories, registry entry and place in the order
    (services/erase.delete_run, which also redacts the copies other records keep). A run that holds only
    memories written to it with `infer: false` is no thread in the registry, yet deleting it by its id
    deletes them, as `DELETE .../runs/{id}` does; 404 only when there was nothing of it."""
    scope = scope_of(deps, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id, agent_id=agent_id)
    known = deps.repo.get_scope(store, scope) is not None
    cleared = erase.delete_run(deps, store, scope=scope.as_dict())
    if not known and not (cleared["messages"] or cleared["memories"] or cleared["summaries"]):
        raise NotFound(f"thread '{thread_id}' not found", code="thread_not_found")
    return cleared
