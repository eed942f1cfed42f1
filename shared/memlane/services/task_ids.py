"""The ids a job writes under, the same on every attempt of it: its memories (one per statement) and its actions.

Request ids are the tenant's own (two tenants may both send "req-1"), and memory and action ids are unique per
store: the tenant is part of the id. Apart from services/consolidate.py, so that a deletion (services/rehome.py)
can name a statement's memory without the consolidation machinery (the API functions' cold start).
"""

from __future__ import annotations

import hashlib

from ..domain.ids import derived_id
from ..domain.models import Task


def statement_key(text: str) -> str:
    """What names a statement among a job's: its text, whitespace and case aside."""
    return hashlib.sha256(" ".join(text.split()).casefold().encode()).hexdigest()[:32]


def task_id(task: Task, *parts: str) -> str:
    """An id this task writes (a memory, an action)."""
    return derived_id(task.store, task.scope.app_id, task.scope.tenant_id, task.request_id, *parts)


def memory_id_of(task: Task, text: str) -> str:
    """The id the job's memory of the statement `text` takes."""
    return task_id(task, statement_key(text))
