"""The sweeper: no accepted add stays unfinished because its job was lost.

On SQS a job is sent after its task commits (no transaction spans DynamoDB and SQS), so a crash
in between, or a last delivery whose give-up could not be recorded, can leave a task PENDING or RUNNING with no
job behind it. The sweeper reads the open-task registry (a global partition: no tenant partition
is scanned, so function credentials suffice), and for each task untouched for the deadline it
enqueues the job again — or, once the task has used its attempts, marks it FAILED. A task never started
(PENDING, no attempt) is sent again sooner, once, after LOST_AFTER, when its queue holds no job at all: then its
own cannot be on its way (a backlog waits for the deadline, not to run its jobs twice). Extraction is idempotent, so
a job enqueued twice does no harm. Runs on a schedule on AWS (functions/sweep), at start and periodically in
`memlane serve`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterator

from ..domain.errors import MemlaneError
from ..domain.models import Task, TaskStatus
from . import erase, extract, message_index, stores, task_jobs
from ..repository.open_tasks import OpenTask
from .deps import Deps

log = logging.getLogger(__name__)

# A task not started this long, its queue empty, lost its job (a shared-engines trial: a server killed between
# the add's commit and its send, the client's retry a replay — the add waited out the 900 s deadline).
LOST_AFTER = timedelta(seconds=60)


@dataclass
class SweepReport:
    checked: int = 0
    requeued: int = 0
    failed: int = 0
    closed: int = 0  # registry entries of finished tasks, or of adds that died (or were refused) before their task
    expired: int = 0  # items past their expiry (audit rows; deletion markers locally), deleted: DynamoDB's TTL on AWS


def sweep(deps: Deps, *, limit: int = 1000) -> SweepReport:
    """One pass over the open tasks of every store; at most `limit` are checked (a Lambda has 29 s), and the next
    pass starts where this one stopped (a review: each began at the first entry, so past `limit` open tasks the
    later ones were never checked, and a lost job of theirs never sent again)."""
    report = SweepReport()
    now = deps.clock.now()
    deadline = timedelta(seconds=deps.settings.task_deadline_seconds)
    idle: bool | None = None  # whether the queue holds no job: read once a pass, when a task may be lost
    mark = deps.repo.sweep_mark()
    stopped: tuple[str, str] | None = None
    for store, entry in _entries(deps, mark):
        if report.checked >= limit:
            stopped = (store, entry.key)
            break
        report.checked += 1
        tenant = deps.for_tenant(store, entry.app_id, entry.tenant_id)
        task = tenant.repo.find_task(store, entry.app_id, entry.tenant_id, entry.request_id)
        if task is None or task.status.finished:
            # No task: the add died before writing it (the client was never answered), or the
            # tenant was erased. Left alone within the deadline: the add may still be running.
            if task is not None and not task.extract and not _index_messages(tenant, store, task):
                continue  # an add without extraction stays open until its messages are indexed
            if task is not None:
                deps.repo.close_task(store, entry.request_id, entry.app_id, entry.tenant_id)
                report.closed += 1
            elif now - entry.since > deadline and deps.repo.release_request(
                    store, entry.request_id, entry.app_id, entry.tenant_id, entry.since):
                report.closed += 1  # and the request-id pointer the add claimed: nothing names it now
            continue
        waited = now - max(task.updated_at, entry.since)
        if waited < deadline:
            # Once only: a job that fails before its task runs (to its dead letters, which the depth does
            # not count) is not sent every minute, but at the deadline, as before.
            if task.status != TaskStatus.PENDING or task.attempts or entry.swept or waited < LOST_AFTER:
                continue
            if idle is None:
                idle = deps.queue.health().depth == 0  # unknown (None) is not idle
            if not idle:
                continue
        if task.status == TaskStatus.RUNNING and task.attempts >= deps.settings.max_extract_attempts:
            extract.fail(tenant, store, entry.request_id,
                         f"gave up: {task.attempts} attempts did not finish within "
                         f"{deps.settings.task_deadline_seconds:.0f}s",
                         app_id=entry.app_id, tenant_id=entry.tenant_id)
            report.failed += 1
            continue
        deps.queue.enqueue(task_jobs.task_job(store, task))
        deps.repo.swept(store, entry, now)
        report.requeued += 1
    if stopped != mark:
        deps.repo.set_sweep_mark(stopped, read=mark)
    report.requeued += _requeue_purges(deps, now, deadline) + _requeue_erasures(deps, now, deadline)
    if report.requeued or report.failed:
        log.warning("sweeper: %d task(s) re-enqueued, %d failed (of %d open)", report.requeued, report.failed,
                    report.checked)
    return report


def _entries(deps: Deps, mark: tuple[str, str] | None) -> Iterator[tuple[str, OpenTask]]:
    """Every store's open-task entries once, in key order from `mark` (where the last pass stopped) round to it."""
    names, cursor = [], None
    while True:
        page, cursor = deps.repo.list_stores(100, cursor)
        names += [s.name for s in page]
        if cursor is None:
            break
    at, key = mark if mark is not None else ("", "")
    names.sort()
    for name in [n for n in names if n >= at] + [n for n in names if n < at]:
        if name != at:
            yield from ((name, e) for e in deps.repo.open_tasks(name))
        else:  # the mark's own store: from its entry on now, and what lies before it last
            yield from ((name, e) for e in deps.repo.open_tasks(name, start=key))
    if at in names and key:
        yield from ((at, e) for e in deps.repo.open_tasks(at, end=key) if e.key != key)


def _requeue_purges(deps: Deps, now: datetime, deadline: timedelta) -> int:
    """Send again the purge of each deleted store whose record has waited past the deadline (its job was lost:
    on SQS it is sent after the record commits). Not one that failed: its dead letter is redriven by hand."""
    sent = 0
    for name, record in deps.repo.purging():
        since = record.get("since")
        if record.get("status") == "FAILED" or since and now - datetime.fromisoformat(since) < deadline:
            continue
        deps.queue.enqueue(stores.purge_job(name))
        deps.repo.purge_requeued(name, now)
        sent += 1
    return sent


def _requeue_erasures(deps: Deps, now: datetime, deadline: timedelta) -> int:
    """Send again the job of each erasure unfinished and untouched past the deadline (on SQS the job is sent after
    the record commits: a crash in between lost it, and the tenant's data stayed). An erasure resumes where it
    stopped, so a job sent twice does no harm; one given up on (FAILED) is redriven by hand."""
    sent = 0
    for erasure in deps.repo.erasures():
        # Marked first, and only if its job has not touched it since it was read: sent, it waits another deadline.
        if erasure.status in (TaskStatus.PENDING, TaskStatus.RUNNING) and now - erasure.updated_at >= deadline \
                and deps.repo.erasure_resent(erasure, now):
            deps.queue.enqueue(erase.erasure_job(erasure.erasure_id))
            sent += 1
    return sent


def _index_messages(deps: Deps, store: str, task: Task) -> bool:
    """Index the messages of an add that extracts nothing (its entry is open: its own index write may
    have failed). False when the index still fails: the next pass tries again."""
    try:
        message_index.index(deps, store, deps.repo.get_messages(store, task.scope, task.message_ids))
    except MemlaneError as error:
        log.warning("sweeper: messages of %s not indexed (%s); retried next pass", task.request_id, error.code)
        return False
    return True
