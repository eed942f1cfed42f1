"""Memories' index writes, which follow the table: every write of a memory goes to the table (the truth)
first, then to the index. A delete or an edit that runs between the two would be undone by the late index
write — a deleted memory's text back in the index files, or an old text found by search — so after writing,
the index is made to hold what the table holds now."""

from __future__ import annotations

from typing import Iterable, Sequence

from ..domain.models import Memory
from .deps import Deps

RACE_RETRIES = 20  # each retry means another writer changed one of the memories first


def index_memories(deps: Deps, store: str, written: Sequence[tuple[Memory, Sequence[float]]]) -> None:
    """Index `written` (memories as this writer put them in the table, with their vectors), then correct the
    index where the table no longer holds them so: a memory gone is removed, one changed is indexed as it
    is now — read again after each correction, until the index holds what the table held after it."""
    if not written:
        return
    deps.index.upsert(store, list(written))
    pending = {m.memory_id: m for m, _ in written}
    for _ in range(RACE_RETRIES):
        changed: list[Memory] = []
        for (app_id, tenant_id), ids in _by_tenant(pending.values()).items():
            current = {m.memory_id: m for m in deps.repo.get_memories(store, app_id, tenant_id, ids)}
            gone = [i for i in ids if i not in current]
            if gone:
                take_back(deps, store, gone, app_id=app_id, tenant_id=tenant_id)
            changed += [current[i] for i in ids if i in current and current[i].updated_at != pending[i].updated_at]
        if not changed:
            return
        deps.index.upsert(store, list(zip(changed, deps.embedder.embed([m.text for m in changed]))))
        pending = {m.memory_id: m for m in changed}


def _by_tenant(memories: Iterable[Memory]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for m in memories:
        out.setdefault((m.scope.app_id, m.scope.tenant_id), []).append(m.memory_id)
    return out


def take_back(deps: Deps, store: str, documents: Sequence[str], *, app_id: str, tenant_id: str) -> None:
    """Remove documents this writer indexed after a deletion removed their items, and compact: the deletion's own
    compaction ran before they were written, so their text would stay in the local files' free pages and
    write-ahead log."""
    deps.index.delete(store, list(documents), app_id=app_id, tenant_id=tenant_id)
    deps.compact()
