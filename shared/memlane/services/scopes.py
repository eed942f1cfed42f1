"""The scope registry: which agents and runs a tenant has, and each run's access policy."""

from __future__ import annotations

from typing import Any

from ..domain.errors import ConditionFailed, Conflict
from ..domain.models import AccessPolicy, ScopeInfo
from ..domain.scope import Scope, ScopeFilter, exact_scope, validate_id
from .deps import Deps

RACE_RETRIES = 20  # each retry means another writer succeeded; only a storm of them exhausts this


def list_(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, limit: int,
          cursor: str | None) -> tuple[list[ScopeInfo], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_scopes(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                 limit=limit, cursor=cursor)


def set_access_policy(deps: Deps, store: str, *, scope: dict[str, Any], policy: AccessPolicy) -> ScopeInfo:
    """Set a run's policy. A read-modify-write of the registry entry, conditioned on the version read:
    an add that commits in between (a count, an activity time) makes this read again, never lost."""
    deps.repo.get_store(store)
    where = exact_scope(scope)
    deps.repo.know_scope(store, where, deps.clock.now())  # the store's purge finds a tenant known only by its policy
    for _ in range(RACE_RETRIES):
        now = deps.clock.now()
        previous = deps.repo.get_scope(store, where)
        info = (previous or ScopeInfo(scope=where, first_seen=now, last_activity=now)).model_copy(
            update={"access_policy": policy})
        writes = [*deps.repo.scope_writes(store, info, previous=previous),
                  *(deps.repo.new_run_claim(store, where) if previous is None else [])]  # a new run is a thread
        try:
            deps.repo.transact(writes)
        except ConditionFailed:
            continue  # an add or another change moved the entry: read it again
        return ScopeInfo.model_validate(writes[0].item)  # type: ignore[union-attr]  # the entry's Put
    raise Conflict("the run is too busy; retry the policy change", code="busy")


def recall_filter(deps: Deps, store: str, where: ScopeFilter) -> ScopeFilter | None:
    """A search that names runs is made on their behalf: drop the runs whose access policy forbids
    recall (store_only, none). None when no run is left. A search over every run (`*`) is unaffected."""
    if where.run_ids is None:
        return where
    forbidden: set[str] = set()
    cursor = None
    while True:
        infos, cursor = deps.repo.list_scopes(store, where.app_id, where.tenant_id, limit=500, cursor=cursor)
        forbidden |= {i.scope.run_id for i in infos if i.scope.run_id in where.run_ids
                      and (where.agent_ids is None or i.scope.agent_id in where.agent_ids)
                      and not i.access_policy.recalls}
        if cursor is None:
            break
    allowed = tuple(run for run in where.run_ids if run not in forbidden)
    return where.model_copy(update={"run_ids": allowed}) if allowed else None


def storing_nothing(deps: Deps, store: str, app_id: str, tenant_id: str,
                    threads: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Of these (agent_id, run_id) threads of the tenant, those whose access policy stores nothing in long-term
    memory (none, recall_only)."""
    return {(agent, run) for agent, run in threads
            if (info := deps.repo.get_scope(store, Scope(app_id=app_id, tenant_id=tenant_id, agent_id=agent,
                                                         run_id=run))) is not None
            and not info.access_policy.extracts}


def private_threads(deps: Deps, store: str, where: ScopeFilter, named: tuple[str, ...] | None) -> set[tuple[str, str]]:
    """Every (agent_id, run_id) thread of the tenant in `where` that stores nothing in long-term memory, but those
    `named` (read from its registry, page by page)."""
    found: set[tuple[str, str]] = set()
    cursor = None
    while True:
        infos, cursor = deps.repo.list_scopes(store, where.app_id, where.tenant_id, limit=500, cursor=cursor)
        found |= {(i.scope.agent_id, i.scope.run_id) for i in infos if not i.access_policy.extracts
                  and where.matches(i.scope.as_dict()) and (named is None or i.scope.run_id not in named)}
        if cursor is None:
            return found
