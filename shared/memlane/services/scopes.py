"""The scope registry: which agents and runs a tenant has, and each run's access policy."""

from __future__ import annotations

from typing import Any

from ..domain.models import AccessPolicy, ScopeInfo
from ..domain.scope import exact_scope, validate_id
from .deps import Deps


def list_(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, limit: int,
          cursor: str | None) -> tuple[list[ScopeInfo], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_scopes(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                 limit=limit, cursor=cursor)


def set_access_policy(deps: Deps, store: str, *, scope: dict[str, Any], policy: AccessPolicy) -> ScopeInfo:
    deps.repo.get_store(store)
    where = exact_scope(scope)
    now = deps.clock.now()
    info = deps.repo.get_scope(store, where) or ScopeInfo(scope=where, first_seen=now, last_activity=now)
    info = info.model_copy(update={"access_policy": policy})
    deps.repo.set_access_policy(store, info)
    return info
