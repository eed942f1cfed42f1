"""Background jobs: what a queue worker (local thread or the extract Lambda) runs for each job kind."""

from __future__ import annotations

from ..domain.errors import InvalidInput
from ..ports import Job
from . import extract
from .deps import Deps


def handle(deps: Deps, job: Job) -> None:
    if job.kind == "extract":
        extract.run(deps, job.store, job.request_id)
        return
    raise InvalidInput(f"unknown job kind '{job.kind}'", field="kind")


def give_up(deps: Deps, job: Job, reason: str) -> None:
    """A job that will not be retried again: its task must say FAILED, with the reason."""
    if job.kind == "extract":
        extract.fail(deps, job.store, job.request_id, reason)
