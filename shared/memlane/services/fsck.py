"""fsck: compare a store's index with its table (the source of truth) and repair the drift.

The index should hold exactly the store's active and superseded memories, each with the text,
keywords, scope and status the table has, and each thread summary's document (services/summaries.py). Drift comes from a crash between a table write and its
index write, from a write to one side by hand, or from a bug. fsck counts:

- missing: in the table, not in the index (not findable);
- orphans: in the index without a live table item (findable, but gone or retired: a leak);
- stale:   in both, but the index has another text, keywords, scope or status.

With `repair`, orphans are deleted from the index (then the local files compacted, so what they
held leaves the disk), and missing and stale memories are indexed again from the table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

from ..domain.errors import InvalidInput
from ..domain.models import Memory, MemoryStatus
from ..ports import IndexedDoc, IndexInventory
from . import summaries
from .deps import Deps

Progress = Callable[[str], None]

BATCH = 500  # memories read, embedded and indexed together during a repair


@dataclass(frozen=True)
class FsckReport:
    store: str
    tenants: int
    memories: int  # table memories that belong in the index (active and superseded)
    documents: int  # documents the index holds for the store
    missing: int
    orphans: int
    stale: int
    repaired: int  # documents deleted or written again (0 without repair)


def _fingerprint(app_id: str, tenant_id: str, agent_id: str, run_id: str, status: str, text: str,
                 keywords: str) -> bytes:
    return hashlib.sha256("\x1f".join((app_id, tenant_id, agent_id, run_id, status, text, keywords)).encode()).digest()


def _of_memory(m: Memory) -> bytes:
    s = m.scope
    return _fingerprint(s.app_id, s.tenant_id, s.agent_id, s.run_id, str(m.status), m.text, m.keywords)


def _of_doc(d: IndexedDoc) -> bytes:
    return _fingerprint(d.app_id, d.tenant_id, d.agent_id, d.run_id, d.status, d.text, d.keywords)


def fsck(deps: Deps, store: str, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
    say = progress or (lambda _line: None)
    deps.repo.get_store(store)  # unknown store → NotFound
    if not isinstance(deps.index, IndexInventory):
        raise InvalidInput(f"the configured index ({type(deps.index).__name__}) cannot list its documents; "
                           "fsck needs one that can (the embedded index)", code="fsck_unsupported")
    # What the table says the index should hold: id → (tenant, fingerprint). Fingerprints, not
    # memories, so a large store is compared in little memory; repair reads the few it needs again.
    expected: dict[str, tuple[str, str, bytes]] = {}
    tenants = 0
    for app_id, tenant_id in deps.repo.iter_tenants(store):
        tenants += 1
        tenant = deps.for_tenant(store, app_id, tenant_id)
        for m in tenant.repo.iter_memories(store, app_id, tenant_id):
            if m.status != MemoryStatus.DELETED:
                expected[m.memory_id] = (app_id, tenant_id, _of_memory(m))
        for doc in summaries.index_documents(tenant, store, app_id, tenant_id):
            expected[doc.memory_id] = (app_id, tenant_id, _of_memory(doc))
    say(f"{store}: {len(expected)} memories of {tenants} tenants in the table")

    seen: set[str] = set()
    orphans: list[str] = []
    stale: list[str] = []
    documents = 0
    for doc in deps.index.documents(store):
        documents += 1
        want = expected.get(doc.memory_id)
        if want is None:
            orphans.append(doc.memory_id)
            continue
        seen.add(doc.memory_id)
        if want[2] != _of_doc(doc):
            stale.append(doc.memory_id)
    missing = [mid for mid in expected if mid not in seen]
    say(f"{store}: {documents} documents in the index; {len(missing)} missing, {len(orphans)} orphans, "
        f"{len(stale)} stale")

    repaired = 0
    if repair and (orphans or missing or stale):
        repaired = _repair(deps, store, orphans, missing + stale, expected)
        say(f"{store}: repaired {repaired} documents")
    return FsckReport(store=store, tenants=tenants, memories=len(expected), documents=documents,
                      missing=len(missing), orphans=len(orphans), stale=len(stale), repaired=repaired)


def _repair(deps: Deps, store: str, orphans: list[str], reindex: list[str],
            expected: dict[str, tuple[str, str, bytes]]) -> int:
    for start in range(0, len(orphans), BATCH):
        deps.index.delete(store, orphans[start:start + BATCH])
    by_tenant: dict[tuple[str, str], list[str]] = {}
    for mid in reindex:
        by_tenant.setdefault(expected[mid][:2], []).append(mid)
    written = 0
    for (app_id, tenant_id), ids in by_tenant.items():
        tenant = deps.for_tenant(store, app_id, tenant_id)
        for start in range(0, len(ids), BATCH):
            found = tenant.repo.get_memories(store, app_id, tenant_id, ids[start:start + BATCH])
            found += summaries.documents(tenant, store, app_id, tenant_id, ids[start:start + BATCH])
            live = [m for m in found if m.status != MemoryStatus.DELETED]
            if live:
                vectors = deps.embedder.embed([m.text for m in live])  # the text alone, as extraction embeds it
                deps.index.upsert(store, list(zip(live, vectors)))
                written += len(live)
    if orphans:
        deps.compact()  # an orphan may hold text that was meant to be gone
    return len(orphans) + written
