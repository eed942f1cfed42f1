"""Background jobs: what a queue worker (local thread, the extract Lambda, `memlane worker`) runs for each
job kind, and, for a queue that counts deliveries (SQS), what each delivery of a job does (`deliver`).

A job whose task no longer exists (its tenant was erased, its store deleted) has nothing left to
do: it is logged and dropped, never retried, never allowed to fail the worker.
"""

from __future__ import annotations

import logging
from typing import Callable

from ..domain.errors import InvalidInput, NotFound
from ..domain.models import Task
from ..ports import Job
from . import dream_actions, erase, extract, memories, summaries
from .deps import Deps
from .extract import describe

# services.dream (its engines and prompts) is imported where a dream job runs: the functions that only
# make jobs (an add queues its extraction) do not load it at their cold start (docs/benchmarks.md §9).

log = logging.getLogger(__name__)


def handle(deps: Deps, job: Job) -> Task | None:
    """Run one job; an extraction returns its finished task (the extract Lambda counts its memories)."""
    try:
        return _run(deps, job)
    except NotFound as gone:
        log.warning("dropping %s job %s of store %s: %s", job.kind, job.request_id, job.store, gone.message)
        _close_if_gone(deps, job)
        return None


def _close_if_gone(deps: Deps, job: Job) -> None:
    """A dropped job's task that is gone (erased with its tenant after the erasure listed its tasks) leaves no
    open-task entry naming its request id; one whose task still exists keeps it, for the sweeper. The task is
    read with the tenant's credentials (on AWS the function's own reach no tenant partition)."""
    if job.kind not in ("extract", summaries.KIND) or job.app_id is None or job.tenant_id is None:
        return
    tenant = deps.for_tenant(job.store, job.app_id, job.tenant_id)
    if tenant.repo.find_task(job.store, job.app_id, job.tenant_id, job.request_id) is None:
        deps.repo.close_task(job.store, job.request_id, job.app_id, job.tenant_id)


def _run(deps: Deps, job: Job) -> Task | None:
    if job.kind == "extract":
        app_id, tenant_id = _owner(deps, job)
        return extract.run(deps.for_tenant(job.store, app_id, tenant_id), job.store, job.request_id, app_id=app_id,
                           tenant_id=tenant_id)
    if job.kind == summaries.KIND:
        app_id, tenant_id = _owner(deps, job)
        return summaries.run_job(deps.for_tenant(job.store, app_id, tenant_id), job)
    if job.kind == dream_actions.REINDEX:
        app_id, tenant_id = _owner(deps, job)
        tenant = deps.for_tenant(job.store, app_id, tenant_id)
        dream_actions.reindex(tenant, tenant.repo.get_action(job.store, job.request_id))
        return None
    if job.kind == memories.REINDEX:
        app_id, tenant_id = _owner(deps, job)
        memories.reindex(deps.for_tenant(job.store, app_id, tenant_id), job.store, app_id, tenant_id,
                         job.memory_ids or [job.request_id])
        return None
    if job.kind == "purge_store":
        erase.purge_store(deps, job.store)
        return None
    if job.kind == "erase":
        erase.run_erasure(deps, job.request_id)
        return None
    if job.kind == erase.CLEAR_RUN:
        erase.finish_run_deletion(deps, job)
        return None
    if job.kind == "dream":
        from . import dream

        dream.run(dream.for_task(deps, job.store, job.request_id), job.store, job.request_id)
        return None
    raise InvalidInput(f"unknown job kind '{job.kind}'", field="kind")


class JobAbandoned(Exception):
    """A job given up on without running (its last delivery): the message fails, on to the dead-letter queue."""


GaveUp = Callable[[Job, int, str], None]  # (job, its delivery count, the reason): told after give_up


def deliver(deps: Deps, job: Job, receives: int, max_receives: int, *, gave_up: GaveUp = lambda *_: None,
            will_retry: GaveUp = lambda *_: None) -> Task | None:
    """One delivery of `job` from a queue that counts them (SQS's ApproximateReceiveCount; `max_receives` is
    its redrive policy's maxReceiveCount, MEMLANE_WORKER_MAX_ATTEMPTS). A consumer killed mid-job (a Lambda
    timeout, a worker's kill -9) records nothing, so the count decides before any work: the last delivery the
    queue allows works no more, it gives the job up (its task says FAILED) and raises JobAbandoned, so the
    message goes on to the dead-letter queue. The deliveries before it run the job; a failure raises (the
    message is delivered again), and on the last of those gives up at once, with its own reason."""
    if receives >= max_receives:
        reason = (f"gave up after {receives} deliveries: the job never finished (each attempt failed, "
                  "or its worker timed out or was killed mid-job)")
        give_up(deps, job, reason)
        gave_up(job, receives, reason)
        raise JobAbandoned(reason)
    try:
        return handle(deps, job)
    except Exception as error:  # noqa: BLE001 — the worker boundary: any failure is a failed attempt
        if receives < max_receives - 1:
            will_retry(job, receives, describe(error))
            raise
        give_up(deps, job, describe(error))  # its last working delivery: keep its own reason
        gave_up(job, receives, describe(error))
        raise


def give_up(deps: Deps, job: Job, reason: str) -> None:
    """A job that will not be retried again: its task (an erasure's record, a deleted store's purge) must
    say FAILED, with the reason. Every kind of job has one; one already failed keeps its first reason."""
    try:
        if job.kind in ("extract", summaries.KIND):  # a forced refresh's task says FAILED like an extraction's
            app_id, tenant_id = _owner(deps, job)
            extract.fail(deps.for_tenant(job.store, app_id, tenant_id), job.store, job.request_id, reason,
                         app_id=app_id, tenant_id=tenant_id)
        elif job.kind == "erase":
            erase.fail_erasure(deps, job.request_id, reason)
        elif job.kind == "dream":
            from . import dream

            dream.fail(dream.for_task(deps, job.store, job.request_id), job.store, job.request_id, reason)
        elif job.kind == "purge_store":
            erase.fail_purge(deps, job.store, reason)
    except NotFound as gone:
        log.warning("dead %s job %s of store %s has no task left to fail: %s", job.kind, job.request_id,
                    job.store, gone.message)


def _owner(deps: Deps, job: Job) -> tuple[str, str]:
    """The tenant an extraction works in (with that tenant's credentials): named by the job, or, for a job
    queued before jobs named it, by the request-id pointer when one tenant alone used the id."""
    if job.app_id is not None and job.tenant_id is not None:
        return job.app_id, job.tenant_id
    owners = deps.repo.task_owners(job.store, job.request_id)
    if len(owners) != 1:
        raise NotFound(f"task '{job.request_id}' not found (or not named by its tenant)", code="task_not_found")
    return owners[0]
