"""Reindex: rebuild a store's search index from the table, the source of truth.

Drops the index, creates it again at the current embedder's dimension, then walks every
tenant of the store (from the activity registry) and re-embeds and indexes its active and
superseded memories, its messages and its thread summaries' documents, in batches. Deleted memories stay out
of the index, as they are after a
delete. Run it after losing the index, or to move a store to another embedding model.

While it runs, searches of the store find only what has been indexed so far, and an
extraction that writes to the index between the drop and the re-creation fails and is
retried by its queue; nothing in the table is touched except the store's model record (name,
dimension and probe of the embedder: from then on, processes with another embedder refuse the store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..domain.models import Memory, MemoryStatus, Message
from ..domain.errors import ConditionFailed, Conflict
from . import embedder_guard, message_index, summaries
from .deps import Deps

Progress = Callable[[str], None]

BATCH = 1000  # memories embedded and indexed together


@dataclass(frozen=True)
class ReindexReport:
    store: str
    tenants: int
    indexed: int  # active and superseded memories now in the index
    skipped: int  # deleted memories, left out
    seconds: float
    messages: int = 0  # message documents now in the index


def reindex(deps: Deps, store: str, *, progress: Progress | None = None, batch: int = BATCH) -> ReindexReport:
    say = progress or (lambda _line: None)
    started = deps.clock.now()
    record = deps.repo.get_store(store)  # unknown store → NotFound, before anything is dropped
    embedder = deps.embedder
    if (record.embedding_model, record.embedding_dim) != (embedder.name, embedder.dim):
        say(f"{store}: re-embedding with {embedder.name} ({embedder.dim} dims), "
            f"was {record.embedding_model or '?'} ({record.embedding_dim} dims)")

    deps.index.drop_store(store)
    deps.index.ensure_store(store, embedder.dim)
    say(f"{store}: index dropped and re-created ({embedder.dim} dims)")
    filled = fill(deps, store, progress=say, batch=batch)

    _record_embedder(deps, store)
    seconds = (deps.clock.now() - started).total_seconds()
    report = ReindexReport(store=store, seconds=seconds, **filled)
    say(f"{store}: done, {report.indexed} memories and {report.messages} messages of {report.tenants} tenants "
        f"indexed, {report.skipped} deleted skipped, {seconds:.1f}s")
    return report


Indexed = dict[tuple[str, str], set[str]]  # (app_id, tenant_id) → the ids of the documents a fill wrote


def fill(deps: Deps, store: str, *, progress: Progress | None = None, batch: int = BATCH,
         ids: Indexed | None = None) -> dict[str, int]:
    """Index every tenant's memories, messages and summaries of `store` from the table into `deps.index`
    (which exists): upserts by id, so filling again is harmless. Counts: tenants, indexed, skipped, messages.
    `ids`, when given, collects each tenant's document ids (what a rebuild sweeps with: see schema.py)."""
    say = progress or (lambda _line: None)
    tenants = indexed = skipped = messages = 0
    # Batches span tenants: each upsert waits for a refresh (about a second), so one per tenant
    # would make a store of many small tenants take hours.
    pending: list[Memory] = []
    said: list[Message] = []
    for app_id, tenant_id in deps.repo.iter_tenants(store):
        tenants += 1
        # Each tenant's partition through that tenant's own table (on AWS: its scoped credentials).
        tenant = deps.for_tenant(store, app_id, tenant_id)
        repo = tenant.repo
        mine = ids.setdefault((app_id, tenant_id), set()) if ids is not None else set()
        for memory in repo.iter_memories(store, app_id, tenant_id):
            if memory.status == MemoryStatus.DELETED:
                skipped += 1
                continue
            pending.append(memory)
            mine.add(memory.memory_id)
            if len(pending) >= batch:
                indexed += _index(deps, store, pending)
                pending = []
                say(f"{store}: {indexed} memories indexed ({tenants} tenants read)")
        for message in repo.iter_messages(store, app_id, tenant_id):
            said.append(message)
            mine.add(message.message_id)
            if len(said) >= batch:
                message_index.index(deps, store, said)
                messages += len(said)
                said = []
                say(f"{store}: {messages} messages indexed ({tenants} tenants read)")
        threads = list(summaries.index_documents(tenant, store, app_id, tenant_id))  # its threads' summaries
        pending += threads
        mine.update(d.memory_id for d in threads)
    indexed += _index(deps, store, pending)
    message_index.index(deps, store, said)
    messages += len(said)

    return {"tenants": tenants, "indexed": indexed, "skipped": skipped, "messages": messages}


def rebuild_lost(deps: Deps, lost: Callable[[str], None], *, progress: Progress | None = None) -> list[ReindexReport]:
    """Reindex each store the index holds nothing of while the table holds a memory or a message of it (an embedded
    index file deleted, lost with a disk, copied without its -wal): opened empty, every search answered nothing and
    nothing said why. `lost` hears of each before its rebuild. An index that cannot count a store's documents is
    left alone (OpenSearch: its own durability)."""
    count = getattr(deps.index, "count", None)
    names, cursor = [], None
    while count is not None:
        page, cursor = deps.repo.list_stores(limit=100, cursor=cursor)
        names += [s.name for s in page if count(s.name) == 0 and _holds_documents(deps, s.name)]
        if cursor is None:
            break
    reports = []
    for name in names:
        lost(name)
        reports.append(reindex(deps, name, progress=progress))
    return reports


def _holds_documents(deps: Deps, store: str) -> bool:
    """Whether the table holds a memory or a message of `store` (a tenant with only a thread, a profile or a
    policy has nothing to index)."""
    for app_id, tenant_id in deps.repo.iter_tenants(store):
        repo = deps.for_tenant(store, app_id, tenant_id).repo
        if next(iter(repo.iter_memories(store, app_id, tenant_id)), None) is not None \
                or next(iter(repo.iter_messages(store, app_id, tenant_id)), None) is not None:
            return True
    return False


def _record_embedder(deps: Deps, store: str) -> None:
    """The store's vectors are now this process's embedder's: record its name, dimension and probe
    (services/embedder_guard.py), conditioned on the record's version and read again if it moved."""
    for _ in range(5):
        try:
            deps.repo.update_store(embedder_guard.recorded(deps.repo.get_store(store), deps.embedder))
            return
        except ConditionFailed:
            continue
    raise Conflict(f"store '{store}' kept changing while its embedder was recorded; run reindex again", code="busy")


def _index(deps: Deps, store: str, memories: list[Memory]) -> int:
    if not memories:
        return 0
    vectors = deps.embedder.embed([m.text for m in memories])  # the text alone, as extraction embeds it
    deps.index.upsert(store, list(zip(memories, vectors)))
    return len(memories)
