"""The job that runs a task, by its kind: made where a task is written (an add, the sweeper, a retry) without
loading what runs it (jobs.py: extraction, dreams, erasure), which no API function's cold start needs."""

from __future__ import annotations

from ..domain.models import Task
from ..domain.scope import Scope
from ..ports import Job
from . import summaries


def extract_job(store: str, request_id: str, scope: Scope) -> Job:
    """The extraction job of an add; its tenant is its fairness group."""
    return Job.of_tenant("extract", store, request_id, scope.app_id, scope.tenant_id)


def task_job(store: str, task: Task) -> Job:
    """The job that runs a task, by its kind (the sweeper re-enqueues it when it was lost)."""
    if task.kind == summaries.KIND:
        return summaries.job(store, task.request_id, task.scope)
    return extract_job(store, task.request_id, task.scope)
