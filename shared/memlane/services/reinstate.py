"""Reinstate what a deleted run's memories had superseded: deleting a run makes the tenant's memory as if the
run had never been said. A memory of another run that one of them superseded (a write-time update) or absorbed
(a dream merge) would otherwise stay hidden from every read — its successor gone — and a fact whose conversation
is still there would be lost. It is made current again or, where the deleted successor was itself superseded by
a memory that stays, superseded by that one. A successor that stays loses its link back to the deleted memory.

Only a run's deletion does this (services/erase.py). An explicit delete of one memory (services/memories.py) says
that memory was wrong, not that it was never said: what it superseded stays superseded, as before.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Iterable, Sequence

from ..domain.errors import ConditionFailed, Conflict
from ..domain.models import Memory, MemoryStatus
from ..policies.consolidation import succeeds
from . import embedder_guard
from .deps import Deps
from .index_writes import RACE_RETRIES, index_memories

log = logging.getLogger(__name__)


def reinstate(deps: Deps, store: str, deleted: Sequence[Memory], others: Iterable[Memory] | None = None) -> int:
    """Move every supersede of the tenant that names one of the `deleted` memories past them. Called while their
    items are still in the table (with `deps` bound to their tenant): a retry after a crash lists them again and
    finds what is left to do; and once more after they went (services/erase.py), for a supersede that named
    them meanwhile. `others`: the tenant's other memories, if the caller has read them already.
    Returns how many memories were rewritten."""
    gone = {m.memory_id: m for m in deleted}
    if not gone:
        return 0
    app_id, tenant_id, now = deleted[0].scope.app_id, deleted[0].scope.tenant_id, deps.clock.now()
    if others is None:
        others = deps.repo.iter_memories(store, app_id, tenant_id)
    held = {m.memory_id: m for m in others if m.memory_id not in gone}
    # A successor of theirs written after `others` was read (another run's update of one of them meanwhile).
    later = {str(m.superseded_by) for m in gone.values() if m.superseded_by} - held.keys() - gone.keys()
    held.update({m.memory_id: m for m in deps.repo.get_memories(store, app_id, tenant_id, sorted(later))})
    # Who supersedes whom once the chains are moved: a successor's link back names one of its predecessors.
    after = {mid: m.model_copy(update=_past(m, gone, held, now) or {}) for mid, m in held.items()}
    first: dict[str, str] = {}
    for m in sorted(after.values(), key=lambda m: m.memory_id):
        if m.status == MemoryStatus.SUPERSEDED and m.superseded_by:
            first.setdefault(m.superseded_by, m.memory_id)

    def change(m: Memory) -> Memory | None:
        changes = _past(m, gone, held, now) or {}
        before = gone.get(str(m.supersedes))
        if before is not None and before.superseded_by == m.memory_id and succeeds(m, before):
            changes.update(supersedes=first.get(m.memory_id), updated_at=now)
        return m.model_copy(update=changes) if changes else None

    def rewrite(m: Memory, indexed: bool) -> bool:
        """Write `change(m)` over `m` as read — and over the successor it now names as read, which another
        deletion may be taking — conditioned on both: a concurrent edit, supersede or deletion wins, and the
        change is planned again on what the table holds then."""
        for _ in range(RACE_RETRIES):
            new = change(m)
            if new is None:
                return False
            # The index keeps no vector to reuse (OpenSearch's source leaves it out): the text is embedded again.
            vector = deps.embedder.embed([new.text])[0] if indexed else None
            # The index first: a crash after the table write would leave a memory current in the table but
            # superseded in the index, never found by a default search, and a retry would find nothing to do.
            # An index ahead of the table is harmless: search checks every hit against the table.
            if vector is not None:
                deps.index.upsert(store, [(new, vector)])
            successor = held.get(str(new.superseded_by)) if new.status == MemoryStatus.SUPERSEDED else None
            try:
                if successor is not None and m.superseded_by != new.superseded_by:
                    deps.repo.put_memory_beside(store, new, m, successor)
                else:
                    deps.repo.put_memory(store, new, previous=m)
                written = True
            except ConditionFailed:
                written = False
            if vector is not None:
                index_memories(deps, store, [(new, vector)])  # the index as the table holds it now, whoever won
            if written:
                return True
            fresh = {f.memory_id: f for f in deps.repo.get_memories(store, app_id, tenant_id,
                                                                    [m.memory_id, *([successor.memory_id] if successor
                                                                                     else [])])}
            if successor is not None:
                if successor.memory_id in fresh:
                    held[successor.memory_id] = fresh[successor.memory_id]
                else:
                    held.pop(successor.memory_id, None)  # deleted meanwhile: the chain ends before it
            if m.memory_id not in fresh:
                return False
            m = held[m.memory_id] = fresh[m.memory_id]
        raise Conflict("the memories are too busy to restore; retry", code="busy")

    changed = [m for m in held.values() if change(m) is not None]
    indexed = bool(changed) and _embeds_for(deps, store)
    return sum(rewrite(m, indexed) for m in changed)


def _embeds_for(deps: Deps, store: str) -> bool:
    """Whether this process embeds as the store's vectors were embedded. If not, the deletion still goes on:
    the memories are reinstated in the table, and the store, which no search can read until `memlane reindex`
    moves it to this process's model (409 embedder_mismatch), gets them indexed by that reindex."""
    try:
        embedder_guard.ensure(deps, deps.repo.get_store(store))
    except Conflict:
        log.warning("store %s: reinstated memories are indexed at its next `memlane reindex` (its embedder "
                    "is not this process's)", store)
        return False
    return True


def _past(m: Memory, gone: dict[str, Memory], held: dict[str, Memory], now: datetime) -> dict[str, Any] | None:
    """The changes that take `m`'s supersede past the deleted memories (None: none of them superseded it)."""
    at = m
    for _ in range(len(gone)):  # through the deleted memories of its chain (a merge of the run's own, an update)
        successor = gone.get(str(at.superseded_by)) if at.status == MemoryStatus.SUPERSEDED else None
        if successor is None or not succeeds(successor, at):  # not one of them: one written under its id since
            break
        at = successor
    if at is m:
        return None
    kept = held.get(str(at.superseded_by)) if at.status == MemoryStatus.SUPERSEDED else None
    if kept is not None and succeeds(kept, at):  # held until the one that stays was said
        return {"superseded_by": kept.memory_id, "valid_to": at.valid_to or now, "updated_at": now}
    return {"status": MemoryStatus.ACTIVE, "superseded_by": None, "valid_to": None, "updated_at": now}
