"""fsck: compare a store's index with its table (the source of truth) and repair the drift.

The index should hold exactly the store's active and superseded memories, its messages and each
thread summary's document (services/summaries.py), each with the text, keywords, scope, status and record
type the table implies. Drift comes from a crash between a table write and its index write, from a write
to one side by hand, or from a bug. fsck counts:

- missing: in the table, not in the index (not findable);
- orphans: in the index without a live table item (findable, but gone or retired: a leak);
- stale:   in both, but the index has another text, keywords, scope, status or record type.

With `repair`, orphans are deleted from the index (then the local files compacted, so what they
held leaves the disk), and missing and stale records are indexed again from the table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

from ..domain.errors import InvalidInput
from ..domain.models import Memory, MemoryStatus, RecordType
from ..domain.records import message_document
from ..domain.scope import Scope
from ..ports import IndexedDoc, IndexInventory
from . import message_index, summaries
from .deps import Deps

Progress = Callable[[str], None]

BATCH = 500  # records read, embedded and indexed together during a repair

_Key = tuple[str, str, str]  # (app_id, tenant_id, document id): a document's identity in a store


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
    messages: int = 0  # table messages (each one a document)


@dataclass(frozen=True)
class _Expected:
    """What the table says one document should be: where it lives, what it is, and its fingerprint."""

    scope: Scope
    record_type: RecordType
    fingerprint: bytes


def _fingerprint(app_id: str, tenant_id: str, agent_id: str, run_id: str, status: str, text: str,
                 keywords: str, record_type: str) -> bytes:
    fields = (app_id, tenant_id, agent_id, run_id, status, text, keywords, record_type)
    return hashlib.sha256("\x1f".join(fields).encode()).digest()


def _of_memory(m: Memory) -> bytes:
    s = m.scope
    return _fingerprint(s.app_id, s.tenant_id, s.agent_id, s.run_id, str(m.status), m.text, m.keywords,
                        str(m.record_type))


def _of_doc(d: IndexedDoc) -> bytes:
    return _fingerprint(d.app_id, d.tenant_id, d.agent_id, d.run_id, d.status, d.text, d.keywords, d.record_type)


def fsck(deps: Deps, store: str, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
    say = progress or (lambda _line: None)
    deps.repo.get_store(store)  # unknown store → NotFound
    if not isinstance(deps.index, IndexInventory):
        raise InvalidInput(f"the configured index ({type(deps.index).__name__}) cannot list its documents; "
                           "fsck needs one that can (the embedded index)", code="fsck_unsupported")
    # What the table says the index should hold: (app, tenant, id) → where, what, fingerprint (an id is its
    # tenant's: two tenants may hold one). Fingerprints, not records, so a large store is compared in little
    # memory; repair reads the few it needs again.
    expected: dict[_Key, _Expected] = {}
    tenants = memories = messages = 0
    for app_id, tenant_id in deps.repo.iter_tenants(store):
        tenants += 1
        tenant = deps.for_tenant(store, app_id, tenant_id)
        repo = tenant.repo
        for m in repo.iter_memories(store, app_id, tenant_id):
            if m.status != MemoryStatus.DELETED:
                memories += 1
                expected[app_id, tenant_id, m.memory_id] = _Expected(m.scope, RecordType.MEMORY, _of_memory(m))
        for message in repo.iter_messages(store, app_id, tenant_id):
            messages += 1
            expected[app_id, tenant_id, message.message_id] = _Expected(message.scope, RecordType.MESSAGE,
                                                                        _of_memory(message_document(message)))
        for doc in summaries.index_documents(tenant, store, app_id, tenant_id):
            expected[app_id, tenant_id, doc.memory_id] = _Expected(doc.scope, RecordType.SUMMARY, _of_memory(doc))
    say(f"{store}: {memories} memories and {messages} messages of {tenants} tenants in the table")

    seen: set[_Key] = set()
    orphans: list[_Key] = []
    stale: list[_Key] = []
    documents = 0
    for doc in deps.index.documents(store):
        documents += 1
        key = (doc.app_id, doc.tenant_id, doc.memory_id)
        want = expected.get(key)
        if want is None:
            orphans.append(key)
            continue
        seen.add(key)
        if want.fingerprint != _of_doc(doc):
            stale.append(key)
    missing = [key for key in expected if key not in seen]
    say(f"{store}: {documents} documents in the index; {len(missing)} missing, {len(orphans)} orphans, "
        f"{len(stale)} stale")

    repaired = 0
    if repair and (orphans or missing or stale):
        repaired = len(orphans) + _repair(deps, store, orphans, missing + stale, expected)
        say(f"{store}: repaired {repaired} documents")
    return FsckReport(store=store, tenants=tenants, memories=memories, documents=documents,
                      missing=len(missing), orphans=len(orphans), stale=len(stale), repaired=repaired,
                      messages=messages)


def _repair(deps: Deps, store: str, drop: list[_Key], reindex: list[_Key], expected: dict[_Key, _Expected]) -> int:
    """Deletes `drop`, indexes `reindex` again from the table; how many were written."""
    dropped: dict[tuple[str, str], list[str]] = {}
    for app_id, tenant_id, mid in drop:
        dropped.setdefault((app_id, tenant_id), []).append(mid)
    for (app_id, tenant_id), ids in dropped.items():
        for start in range(0, len(ids), BATCH):
            deps.index.delete(store, ids[start:start + BATCH], app_id=app_id, tenant_id=tenant_id)
    # Grouped by tenant (its own credentials) and by what to read: memories by id, messages by thread.
    groups: dict[tuple[str, str], dict[tuple[RecordType, Scope | None], list[str]]] = {}
    for key in reindex:
        want = expected[key]
        by = (want.record_type, want.scope if want.record_type == RecordType.MESSAGE else None)
        groups.setdefault(key[:2], {}).setdefault(by, []).append(key[2])
    written = 0
    for (app_id, tenant_id), kinds in groups.items():
        tenant = deps.for_tenant(store, app_id, tenant_id)
        for (kind, thread), ids in kinds.items():
            for start in range(0, len(ids), BATCH):
                chunk = ids[start:start + BATCH]
                if thread is not None:
                    found = tenant.repo.get_messages(store, thread, chunk)
                    message_index.index(tenant, store, found)
                    written += len(found)
                    continue
                found = (summaries.documents(tenant, store, app_id, tenant_id, chunk) if kind == RecordType.SUMMARY
                         else tenant.repo.get_memories(store, app_id, tenant_id, chunk))
                live = [m for m in found if m.status != MemoryStatus.DELETED]
                if live:
                    vectors = deps.embedder.embed([m.text for m in live])  # the text alone, as extraction embeds it
                    deps.index.upsert(store, list(zip(live, vectors)))
                    written += len(live)
    if drop:
        deps.compact()  # an orphan may hold text that was meant to be gone
    return written
