"""Tasks: the status of extraction jobs, by request id or by tenant; a failed one run again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..domain.errors import ConditionFailed, Conflict, InvalidInput, NotFound, Overloaded
from ..domain.models import Task, TaskStatus
from ..domain.scope import validate_id
from ..domain.validation import check_request_id
from . import summaries
from .access import Visible, everyone
from .deps import Deps
from .redaction import BODY_DELETED
from .task_jobs import task_job


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


# -- running a failed task again (POST .../tasks/{request_id}/retry) ------------------------------

RETRYABLE = ("extract", summaries.KIND)  # the kinds a job runs; an explicit write ran nothing
_RETRY_ATTEMPTS = 5  # each retry means the task changed between its read and its write


def retry(deps: Deps, store: str, request_id: str, *, app_id: Any, tenant_id: Any) -> Task:
    """Run a FAILED extraction (or forced summary refresh) again: its task PENDING, no attempt, no error, its job
    queued. The task is written only if it is still as read (FAILED, same version, content not deleted meanwhile),
    so of two retries at once one queues the job and the other is refused. `deps` bound to the tenant."""
    repo = deps.repo
    repo.get_store(store)
    check_request_id(request_id, stored=True)
    app_id, tenant_id = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    opened = False
    try:
        for _ in range(_RETRY_ATTEMPTS):
            # The item as stored: the write is conditioned on the very version read (a redaction keeps updated_at
            # but changes body_hash, and a retry must not write back what a deletion took out).
            item = repo.task_item(store, app_id, tenant_id, request_id)
            if item is None:
                raise NotFound(f"task '{request_id}' not found", code="task_not_found")
            task = Task.model_validate(item)
            _refuse_retry(deps, store, task)
            _refuse_when_backlogged(deps)
            now = deps.clock.now()
            pending = task.model_copy(update={"status": TaskStatus.PENDING, "attempts": 0, "error": None,
                                              "updated_at": now})
            put = replace(repo.task_put(pending), if_absent=False, expect={
                "status": item["status"], "updated_at": item["updated_at"], "body_hash": item.get("body_hash")})
            # As an add: the sweeper's entry first, then the task with its job (on SQS sent after the commit: a
            # send lost after it leaves the task PENDING in the registry, and the sweeper sends it).
            opened = repo.open_task(store, request_id, task.scope, now) or opened
            try:
                deps.queue.commit(deps.table, [put], task_job(store, pending))
            except ConditionFailed:
                continue  # another retry, a late delivery or a deletion moved it: read it again
            return pending
        raise Conflict(f"task '{request_id}' is too busy to retry; retry later", code="busy")
    except Exception:
        if opened:  # the entry this retry made, unless a task it names is queued now (another retry's)
            item = repo.task_item(store, app_id, tenant_id, request_id)
            if item is None or item["status"] not in (TaskStatus.PENDING, TaskStatus.RUNNING):
                repo.close_task(store, request_id, app_id, tenant_id)
        raise


def _refuse_retry(deps: Deps, store: str, task: Task) -> None:
    rid = task.request_id
    if task.kind not in RETRYABLE:
        raise Conflict(f"task '{rid}' is of kind '{task.kind}': it wrote its memories as given and runs no job, "
                       "so there is nothing to run again", code="task_not_retryable")
    if task.status != TaskStatus.FAILED:
        raise Conflict(f"task '{rid}' is {task.status}, not FAILED: only a failed task can be run again",
                       code="task_not_failed")
    if _content_deleted(deps, store, task):
        # Its thread (or its tenant's data) was deleted: there is nothing left to extract or summarise.
        raise Conflict(f"request_id '{rid}' named a request whose content was deleted; it cannot run again",
                       code="request_content_deleted", field="request_id")
    info = deps.repo.get_scope(store, task.scope)
    if info is not None and not info.access_policy.extracts:  # switched since: as an add or a forced refresh now
        what, code = ("no summary", "summary_not_kept") if task.kind == summaries.KIND else \
            ("no memories", "memories_not_kept")
        raise Conflict(f"thread '{task.scope.run_id}' keeps {what}: its access policy ({info.access_policy}) "
                       "stores nothing in long-term memory", code=code)


def _content_deleted(deps: Deps, store: str, task: Task) -> bool:
    """Whether what the task would read is gone: its body redacted, its thread deleted (or deleted and made again
    since: a new thread of the same id is not the one the task named), or the add's messages."""
    if task.body_hash == BODY_DELETED:
        return True
    info = deps.repo.get_scope(store, task.scope)
    if info is None or info.first_seen > task.created_at:
        return True
    return bool(task.message_ids) and not deps.repo.get_messages(store, task.scope, task.message_ids)


def _refuse_when_backlogged(deps: Deps) -> None:
    """Back-pressure, as an add: past the queue limit a retry queues nothing (a retry of many failed tasks at once
    after an outage must not flood the workers)."""
    limit = deps.settings.queue_limit
    if limit and deps.queue.depth() >= limit:
        raise Overloaded(f"extraction is {limit}+ jobs behind; retry later",
                         retry_after=deps.settings.queue_retry_after)
