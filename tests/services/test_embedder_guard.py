"""A store's vectors are comparable only with vectors of the same model: a process whose embedder is not
the store's refuses its writes and searches (409 embedder_mismatch, naming both models and the reindex
to run), reindex moves the store to the process's model, and a store recorded before fingerprints gets
one on first use."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.domain.errors import Conflict
from memlane.repository import STORES_PK
from memlane.services import dream, extract, ingest, memories, search, stores, tasks
from memlane.services.reindex import reindex

SCOPE = {"app_id": "app", "tenant_id": "ann", "agent_id": "bot", "run_id": "r1"}
WHO = {"app_id": "app", "tenant_id": "ann"}


def refused(call) -> Conflict:
    with pytest.raises(Conflict) as e:
        call()
    assert e.value.code == "embedder_mismatch", e.value
    return e.value


def test_a_process_with_the_hashing_embedder_refuses_a_minilm_store(tmp_path, minilm):
    data = tmp_path / "data"
    first = build_local(Settings.from_env(env={}, data_dir=data, reranker="none"), embedder=minilm)
    stores.create(first.deps, name="demo")
    ingest.add(first.deps, "demo", scope=SCOPE, text="I have a kitten called Miso.", sync=True)
    first.close()

    second = build_local(Settings.from_env(env={}, data_dir=data, reranker="none", embedder="hashing"))
    try:
        deps = second.deps
        error = refused(lambda: ingest.add(deps, "demo", scope=SCOPE, text="I play the cello."))
        assert minilm.name in error.message and "hashing-lexical" in error.message
        assert "memlane reindex demo" in error.message
        refused(lambda: search.search(deps, "demo", query="pet cat", scope=WHO))
        [memory], _ = memories.list_(deps, "demo", scope=WHO, limit=10, cursor=None)
        refused(lambda: memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id=memory.memory_id,
                                        text="I have two kittens."))
        # nothing of the refused add was written
        assert len(tasks.list_(deps, "demo", app_id="app", tenant_id="ann", limit=10, cursor=None)[0]) == 1

        reindex(deps, "demo")  # the way out the error names: re-embed with this process's model

        record = deps.repo.get_store("demo")
        assert (record.embedding_model, record.embedding_dim) == ("hashing-lexical", 384)
        ingest.add(deps, "demo", scope=SCOPE, text="I play the cello.", sync=True)
        assert search.search(deps, "demo", query="cello", scope=WHO)
    finally:
        second.close()

    # and now the MiniLM process is the one refused
    third = build_local(Settings.from_env(env={}, data_dir=data, reranker="none"), embedder=minilm)
    try:
        refused(lambda: search.search(third.deps, "demo", query="pet cat", scope=WHO))
    finally:
        third.close()


class Permuted(HashingEmbedder):
    """The same name and dimension as the hashing embedder, other vectors: a changed model behind an
    unchanged name (a new model file, an endpoint serving something else)."""

    def embed(self, texts):
        return [v[1:] + v[:1] for v in super().embed(texts)]


def test_the_same_model_name_with_other_vectors_is_refused_by_the_fingerprint(tmp_path):
    svc = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", reranker="none", embedder="hashing"))
    try:
        stores.create(svc.deps, name="demo")
        ingest.add(svc.deps, "demo", scope=SCOPE, text="I have a kitten.")
        other = replace(svc.deps, embedder=Permuted())
        assert (other.embedder.name, other.embedder.dim) == (svc.deps.embedder.name, svc.deps.embedder.dim)
        error = refused(lambda: search.search(other, "demo", query="kitten", scope=WHO))
        assert "fingerprint" in error.message
        refused(lambda: ingest.add(other, "demo", scope=SCOPE, text="I have a dog.", sync=True))
        assert len(tasks.list_(svc.deps, "demo", app_id="app", tenant_id="ann", limit=10, cursor=None)[0]) == 1
        # an asynchronous add embeds nothing itself: it is accepted, and its extraction refuses the store
        queued = ingest.add(other, "demo", scope=SCOPE, text="I have a parrot.")
        refused(lambda: extract.run(other, "demo", queued.request_id, app_id="app", tenant_id="ann"))
        refused(lambda: dream.start(other, "demo", scope=WHO, sync=True))  # dreams embed and index too
        assert search.search(svc.deps, "demo", query="kitten", scope=WHO) is not None  # its own model still works
    finally:
        svc.close()


def test_a_store_recorded_before_fingerprints_gets_one_on_first_use(tmp_path):
    svc = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", reranker="none", embedder="hashing"))
    try:
        deps = svc.deps
        stores.create(deps, name="demo")
        legacy = {k: v for k, v in deps.table.get(STORES_PK, "demo").items()
                  if k not in ("embedding_fingerprint", "embedding_probe", "version")}
        deps.table.put(legacy)  # as a store created by an earlier version was stored
        assert deps.repo.get_store("demo").embedding_probe is None

        search.search(deps, "demo", query="kitten", scope=WHO)

        record = deps.repo.get_store("demo")
        assert record.embedding_fingerprint and record.embedding_probe and record.version == 1
        refused(lambda: search.search(replace(deps, embedder=Permuted()), "demo", query="kitten", scope=WHO))
    finally:
        svc.close()


def test_a_new_store_records_its_model_and_fingerprint(deps):
    record = stores.create(deps, name="demo")
    assert (record.embedding_model, record.embedding_dim) == (deps.embedder.name, deps.embedder.dim)
    assert record.embedding_fingerprint and len(record.embedding_probe) == 3
    assert deps.repo.get_store("demo").embedding_fingerprint == record.embedding_fingerprint


def _local(data, precision="auto"):
    return build_local(Settings.from_env(env={}, data_dir=data, reranker="none", embedder="minilm",
                                         local_embedder_precision=precision))


def _int8_store(data) -> None:
    """A data dir whose store "demo" was made under the int8 graph (every local store before fp32)."""
    first = _local(data, "int8")
    stores.create(first.deps, name="demo")
    ingest.add(first.deps, "demo", scope=SCOPE, text="I have a kitten called Miso.", sync=True)
    first.close()


def test_switching_the_local_model_precision_is_detected_and_pinning_it_keeps_the_store(tmp_path, minilm):
    """int8 and fp32 MiniLM vectors differ (cosine 0.996-0.9996): a store made under one precision is
    refused by a process running the other — never silently mixed — until pinned back or reindexed."""
    data = tmp_path / "data"
    _int8_store(data)

    second = _local(data, "fp32")
    try:
        error = refused(lambda: search.search(second.deps, "demo", query="pet cat", scope=WHO))
        assert "all-MiniLM-L6-v2-int8" in error.message and "all-MiniLM-L6-v2-fp32" in error.message
    finally:
        second.close()

    pinned = _local(data, "int8")  # MEMLANE_LOCAL_EMBEDDER_PRECISION=int8: the store is served as before
    try:
        assert search.search(pinned.deps, "demo", query="pet cat", scope=WHO)
    finally:
        pinned.close()


def test_auto_keeps_the_precision_the_stores_were_made_with(tmp_path, minilm):
    """An upgrade whose CPU choice is another graph (auto: fp32 here) serves the stores made before it under
    the graph they were made with, instead of refusing every one of them."""
    data = tmp_path / "data"
    _int8_store(data)

    upgraded = _local(data)
    try:
        assert search.search(upgraded.deps, "demo", query="pet cat", scope=WHO)
        assert upgraded.deps.embedder.name == "all-MiniLM-L6-v2-int8"
    finally:
        upgraded.close()

    fresh = _local(tmp_path / "new")
    try:  # no store yet: the CPU's choice
        assert fresh.deps.embedder.name.startswith("all-MiniLM-L6-v2-")
    finally:
        fresh.close()
