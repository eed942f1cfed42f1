"""Reindex from the table on the embedded adapters (the same service runs against OpenSearch in
tests/integration/test_opensearch_service.py)."""

import pytest

from memlane.domain.errors import NotFound
from memlane.domain.models import MemoryStatus
from memlane.services import ingest, search, stores
from memlane.services.reindex import reindex

U1 = {"app_id": "app", "tenant_id": "u1", "run_id": "r1"}
U2 = {"app_id": "app", "tenant_id": "u2", "run_id": "r1"}


@pytest.fixture()
def store(deps):
    name = stores.create(deps, name="demo").name
    ingest.add(deps, name, scope=U1, text="Ann adopted a beagle named Max.", sync=True)
    ingest.add(deps, name, scope=U1, text="Ann works as a nurse in Denver.", sync=True)
    ingest.add(deps, name, scope=U2, text="Bob plays the cello.", sync=True)
    return name


def texts(hits):
    return [h.memory.text for h in hits]


def test_reindex_rebuilds_every_tenant_from_the_table(deps, store):
    deps.index.drop_store(store)
    assert search.search(deps, store, query="beagle", scope=U1) == []
    lines = []
    report = reindex(deps, store, progress=lines.append, batch=2)
    assert (report.tenants, report.indexed, report.skipped) == (2, 3, 0)
    assert texts(search.search(deps, store, query="beagle", scope=U1, top_k=1)) == ["Ann adopted a beagle named Max."]
    assert texts(search.search(deps, store, query="cello", scope=U2, top_k=1)) == ["Bob plays the cello."]
    assert any("2 memories indexed" in line for line in lines) and "done" in lines[-1]


def test_reindex_rebuilds_message_documents_too(deps, store):
    deps.index.drop_store(store)
    report = reindex(deps, store, batch=2)
    assert report.messages == 3
    [hit] = search.search(deps, store, query="cello", scope=U2, record_types=["message"])
    assert hit.message is not None and hit.message.content == "Bob plays the cello."
    assert "beagle" not in " ".join(texts(search.search(deps, store, query="beagle", scope=U2, record_types=["message"])))


def test_reindex_leaves_deleted_memories_out(deps, store):
    [hit] = search.search(deps, store, query="nurse", scope=U1, top_k=1)
    # A dream's DELETE retires a memory (status deleted, kept for undo); a user's delete removes it.
    deps.repo.put_memory(store, hit.memory.model_copy(update={"status": MemoryStatus.DELETED}))
    report = reindex(deps, store)
    assert (report.indexed, report.skipped) == (2, 1)
    assert "nurse" not in " ".join(texts(search.search(deps, store, query="nurse", scope=U1)))


def test_reindex_records_a_new_embedding_model(deps, store):
    record = deps.repo.get_store(store)
    deps.repo.update_store(record.model_copy(update={"embedding_model": "older-model", "embedding_dim": 8}))
    lines = []
    reindex(deps, store, progress=lines.append)
    assert "was older-model (8 dims)" in lines[0]
    after = deps.repo.get_store(store)
    assert (after.embedding_model, after.embedding_dim) == (deps.embedder.name, deps.embedder.dim)


def test_unknown_store_drops_nothing(deps, store):
    with pytest.raises(NotFound):
        reindex(deps, "nope")
    assert search.search(deps, store, query="beagle", scope=U1, top_k=1)


def _restarted(settings):
    from memlane.adapters.embedders.hashing import HashingEmbedder
    from memlane.bootstrap import build_local

    return build_local(settings, embedder=HashingEmbedder())


def _a_store_with_a_memory_closed(tmp_path):
    """A local data dir holding one store with one memory, its service closed: (settings, store name)."""
    from memlane.config import Settings

    settings = Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none",
                                 sweep_interval_seconds=0, dream_interval_seconds=0)
    service = _restarted(settings)
    name = stores.create(service.deps, name="demo").name
    ingest.add(service.deps, name, scope=U1, text="Ann adopted a beagle named Max.", sync=True)
    service.close()
    for index_file in (tmp_path / "data").glob("index.db*"):
        index_file.unlink()
    return settings, name


def test_an_index_file_lost_while_the_table_holds_stores_is_rebuilt_at_start(tmp_path, caplog):
    """A faults trial: with index.db deleted (or lost with a disk), the next start created it empty and served it —
    health ok, every search answered nothing, the table's 600 memories out of sight, and nothing said why."""
    settings, name = _a_store_with_a_memory_closed(tmp_path)
    _search_after_a_restart_finds(settings, name)
    assert any("holds nothing of store 'demo'" in r.getMessage() for r in caplog.records)
    # A second trial: an index file that exists but holds nothing (copied without its -wal) was served empty too.
    (tmp_path / "data" / "index.db").unlink()
    (tmp_path / "data" / "index.db").write_bytes(b"")
    for wal in (tmp_path / "data").glob("index.db-*"):
        wal.unlink()
    _search_after_a_restart_finds(settings, name)


def test_an_index_file_that_cannot_be_read_is_removed_and_rebuilt_at_start(tmp_path, caplog):
    """A faults trial: random bytes in index.db ended the start in a traceback ("file is not a database"). The index
    is derived data: it is built again from the table. A deletion trial: the unreadable file, kept aside for a look,
    held an erased tenant's text for ever — nothing of it is kept."""
    settings, name = _a_store_with_a_memory_closed(tmp_path)
    (tmp_path / "data" / "index.db").write_bytes(b"Zqxkept " + bytes(range(256)) * 64)
    _search_after_a_restart_finds(settings, name)
    assert any("cannot be read" in r.getMessage() for r in caplog.records)
    assert [p.name for p in (tmp_path / "data").rglob("*") if p.is_file() and b"Zqxkept" in p.read_bytes()] == []


def test_a_store_with_nothing_to_index_is_not_rebuilt_at_every_start(tmp_path, caplog):
    """A third regression trial: a tenant with only a thread (or a profile, a policy, a deleted run) counted as data
    the index had lost: every start rebuilt its store and warned of a lost index."""
    from memlane.config import Settings
    from memlane.services import threads

    settings = Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none",
                                 sweep_interval_seconds=0, dream_interval_seconds=0)
    service = _restarted(settings)
    name = stores.create(service.deps, name="thr").name
    threads.create(service.deps, name, scope={"app_id": "app", "tenant_id": "u1"})
    service.close()
    _restarted(settings).close()
    assert not any("holds nothing" in r.getMessage() for r in caplog.records)


def _search_after_a_restart_finds(settings, name):
    service = _restarted(settings)
    try:
        found = texts(search.search(service.deps, name, query="beagle", scope=U1, top_k=1))
        assert found == ["Ann adopted a beagle named Max."]
    finally:
        service.close()
