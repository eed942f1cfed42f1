"""Readings: write again the reading (`Memory.reading`, policies/conflicts.py) of each memory of a store that keeps
none made by this version's statement rules.

A reading is sealed by the rules that made it: after an upgrade that changes them, every memory written before reads
as stale, and each search reads such a memory's words anew — the same order, more time (docs/benchmarks.md §15).
This walks the store's tenants, counts the stale readings and, with `repair`, writes each one again over the version
read: a memory edited, superseded or deleted meanwhile is left to its writer (which stamped a reading of its own, or
emptied it). Only the table changes; the index keeps no reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..domain.errors import ConditionFailed
from ..domain.models import MemoryStatus
from ..policies import conflicts
from .access import Records

Progress = Callable[[str], None]

REPORT_EVERY = 10_000  # memories between two progress lines


@dataclass(frozen=True)
class ReadingsReport:
    store: str
    tenants: int
    memories: int  # memories that keep a reading (deleted ones keep none)
    stale: int  # of these, readings made by other rules, of another text, or none
    written: int  # stale readings written again (0 without repair)
    changed_meanwhile: int  # stale, then edited, superseded or deleted before it could be written


def readings(deps: Records, store: str, *, repair: bool = False, progress: Progress | None = None) -> ReadingsReport:
    say = progress or (lambda _line: None)
    repo = deps.repo  # the operator's table: every tenant's partition
    repo.get_store(store)  # unknown store → NotFound
    tenants = memories = stale = written = meanwhile = 0
    for app_id, tenant_id in repo.iter_tenants(store):
        tenants += 1
        for memory in repo.iter_memories(store, app_id, tenant_id):
            if memory.status == MemoryStatus.DELETED:
                continue
            memories += 1
            if memories % REPORT_EVERY == 0:
                say(f"{store}: {memories} memories of {tenants} tenants read, {stale} stale")
            if not conflicts.stale(memory):
                continue
            stale += 1
            if not repair:
                continue
            try:  # not an edit: `updated_at` stays, and the write holds only over the version read
                repo.put_memory(store, memory.model_copy(update={"reading": conflicts.reading(memory.text)}),
                                previous=memory)
                written += 1
            except ConditionFailed:
                meanwhile += 1
    say(f"{store}: {memories} memories of {tenants} tenants, {stale} stale readings"
        + (f", {written} written again, {meanwhile} changed meanwhile" if repair else ""))
    return ReadingsReport(store=store, tenants=tenants, memories=memories, stale=stale, written=written,
                          changed_meanwhile=meanwhile)
