"""Tasks: the status of extraction jobs, by request id or by tenant."""

from __future__ import annotations

from typing import Any

from ..domain.errors import InvalidInput, NotFound
from ..domain.models import Task
from ..domain.scope import validate_id
from ..domain.validation import check_request_id
from .access import Visible, everyone
from .deps import Deps


def owner(deps: Deps, store: str, request_id: str, *, app_id: Any = None, tenant_id: Any = None,
          visible: Visible = everyone) -> tuple[str, str]:
    """(app_id, tenant_id) of a request id, to bind to before reading the task. Request ids are per
    tenant: given both, they are the answer; else the one tenant that used the id among those the caller
    may see (another tenant's use is as not found as a missing id: a 403 would name its owner), or 400
    `tenant_required` if several."""
    deps.repo.get_store(store)
    check_request_id(request_id, stored=True)
    if app_id is not None or tenant_id is not None:
        return validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    found = [o for o in deps.repo.task_owners(store, request_id) if visible(*o)]
    if not found:
        raise NotFound(f"task '{request_id}' not found", code="task_not_found")
    if len(found) > 1:
        raise InvalidInput(f"request_id '{request_id}' is used by several tenants: name app_id and tenant_id",
                           code="tenant_required", field="tenant_id")
    return found[0]


def get(deps: Deps, store: str, request_id: str, *, app_id: Any = None, tenant_id: Any = None) -> Task:
    deps.repo.get_store(store)
    check_request_id(request_id, stored=True)
    if app_id is not None or tenant_id is not None:
        app_id, tenant_id = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    return deps.repo.locate_task(store, request_id, app_id, tenant_id)


def list_(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, limit: int,
          cursor: str | None) -> tuple[list[Task], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_tasks(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                limit=limit, cursor=cursor)
