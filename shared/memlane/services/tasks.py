"""Tasks: the status of extraction jobs, by request id or by tenant."""

from __future__ import annotations

from typing import Any

from ..domain.errors import NotFound
from ..domain.models import Task
from ..domain.scope import validate_id
from ..domain.validation import check_request_id
from .access import Visible, everyone
from .deps import Deps


def owner(deps: Deps, store: str, request_id: str, visible: Visible = everyone) -> tuple[str, str]:
    """(app_id, tenant_id) of a request id — read before binding to the tenant it belongs to. A task the
    caller may not see is as not found as one that does not exist: a 403 would name its owner."""
    deps.repo.get_store(store)
    check_request_id(request_id)
    found = deps.repo.task_tenant(store, request_id)
    if found is None or not visible(*found):
        raise NotFound(f"task '{request_id}' not found", code="task_not_found")
    return found


def get(deps: Deps, store: str, request_id: str) -> Task:
    deps.repo.get_store(store)
    check_request_id(request_id)
    return deps.repo.get_task(store, request_id)


def list_(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, limit: int,
          cursor: str | None) -> tuple[list[Task], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_tasks(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                limit=limit, cursor=cursor)
