"""The schema policy against the real OpenSearch engine: the index is described and compared with
memory-index.json, a difference is named precisely, and `recreate` rebuilds a store's index from the
table behind its alias — searches running meanwhile never come back empty."""

from __future__ import annotations

import threading

import pytest

from memlane.adapters.opensearch.documents import alias_name, index_name
from memlane.adapters.opensearch.index import OpenSearchIndex, index_body
from memlane.domain.schema import SchemaMismatch, differences
from memlane.services import erase, ingest, schema, search, stores
from tests.contract.test_index_contract import DIM

pytestmark = pytest.mark.integration

U1 = {"app_id": "app", "tenant_id": "u1"}


def test_a_store_index_made_by_this_version_has_no_difference(os_index: OpenSearchIndex) -> None:
    assert differences(os_index.describe()) == []  # no index yet: nothing to differ
    os_index.ensure_store("s1", DIM)
    os_index.ensure_store("s2", 2 * DIM)  # the dimension is each store's own
    described = os_index.describe()
    assert sorted(described.found) == [index_name(os_index.prefix, "s1"), index_name(os_index.prefix, "s2")]
    assert differences(described) == []


def test_another_analyzer_and_knn_space_are_named(os_index: OpenSearchIndex) -> None:
    body = index_body(DIM)
    body["mappings"]["properties"]["terms"]["analyzer"] = "standard"
    body["mappings"]["properties"]["embedding"]["method"]["space_type"] = "l2"
    name = index_name(os_index.prefix, "old")
    os_index.client.indices.create(index=name, body={**body, "aliases": {alias_name(os_index.prefix, "old"): {}}})
    assert [str(d) for d in differences(os_index.describe())] == [
        f"index {name}: field terms: analyzer whitespace expected, standard found",
        f"index {name}: field embedding: method.space_type cosinesimil expected, l2 found",
    ]
    assert os_index.create_missing() == []  # create never touches what differs


def test_a_store_index_of_another_knn_engine_is_named(os_index: OpenSearchIndex, opensearch_url: str) -> None:
    """MEMLANE_OPENSEARCH_KNN_ENGINE changed after stores were made: their lucene indices are named, not
    silently searched as if they were the engine configured (nothing is written to a faiss index here:
    this node has no faiss libraries, docs/engines.md)."""
    from memlane.bootstrap import _index
    from memlane.config import Settings

    os_index.ensure_store("s1", DIM)  # lucene, as shipped
    faiss = _index(Settings.from_env(env={"MEMLANE_OPENSEARCH_URL": opensearch_url, "MEMLANE_INDEX": "opensearch",
                                          "MEMLANE_OPENSEARCH_INDEX_PREFIX": os_index.prefix,
                                          "MEMLANE_OPENSEARCH_KNN_ENGINE": "faiss", "MEMLANE_OPENSEARCH_SIGV4": "false"}))
    try:
        assert [str(d) for d in differences(faiss.describe())] == [
            f"index {index_name(os_index.prefix, 's1')}: field embedding: method.engine faiss expected, lucene found"]
    finally:
        faiss.close()


def test_an_index_of_the_english_analyzer_layout_is_named(os_index: OpenSearchIndex) -> None:
    """Before backend parity, text and keywords were searched themselves with the `english` analyzer; now
    one field is, scored like the embedded index. `schema validate` must name such an index
    (`schema recreate` rebuilds it), not search a field it lacks."""
    body = index_body(DIM)
    props = body["mappings"]["properties"]
    del props["terms"]
    props["text"] = props["keywords"] = {"type": "text", "analyzer": "english"}
    del body["settings"]["index"]["similarity"]
    name = index_name(os_index.prefix, "old")
    os_index.client.indices.create(index=name, body={**body, "aliases": {alias_name(os_index.prefix, "old"): {}}})
    found = [str(d) for d in differences(os_index.describe())]
    assert any(d.startswith(f"index {name}: field terms") for d in found), found


def test_an_index_of_the_shard_statistics_layout_is_named(os_index: OpenSearchIndex) -> None:
    """Before each tenant's words were its own terms, text and keywords were copied into one `content`
    field, and BM25 counted a word over every tenant of the shard (docs/security.md). Such an index is
    named (`schema recreate` rebuilds it), not searched for terms it lacks."""
    body = index_body(DIM)
    props = body["mappings"]["properties"]
    del props["terms"]
    props["text"] = props["keywords"] = {"type": "text", "index": False, "copy_to": ["content"]}
    props["content"] = {"type": "text", "analyzer": "porter_unicode61", "similarity": "fts5_bm25"}
    body["settings"]["index"]["analysis"] = {
        "tokenizer": {"unicode61": {"type": "pattern", "pattern": "[^\\p{L}\\p{N}]+"}},
        "analyzer": {"porter_unicode61": {"type": "custom", "tokenizer": "unicode61",
                                          "filter": ["lowercase", "asciifolding", "porter_stem"]}}}
    name = index_name(os_index.prefix, "old")
    os_index.client.indices.create(index=name, body={**body, "aliases": {alias_name(os_index.prefix, "old"): {}}})
    found = [str(d) for d in differences(os_index.describe())]
    assert any(d.startswith(f"index {name}: field terms") for d in found), found


def test_validate_refuses_and_recreate_rebuilds_with_no_search_gap(os_deps) -> None:  # type: ignore[no-untyped-def]
    deps = os_deps
    index: OpenSearchIndex = deps.index
    name = stores.create(deps, name="demo").name
    alias, v1 = alias_name(index.prefix, name), index_name(index.prefix, name)
    # The store's index as an older layout made it (another analyzer), behind the alias, then written.
    index.client.indices.delete(index=v1)
    old = index_body(deps.embedder.dim)
    old["mappings"]["properties"]["terms"]["analyzer"] = "standard"
    index.client.indices.create(index=v1, body={**old, "aliases": {alias: {}}})
    facts = ["I adopted a beagle named Max last Saturday.", "I work as a nurse at St. Mary's hospital in Denver.",
             "My favourite food is spicy Thai green curry."]
    for i, text in enumerate(facts):
        task = ingest.add(deps, name, scope={**U1, "run_id": f"r{i}"}, sync=True,
                          messages=[{"role": "user", "name": "Ann", "content": text}])
        assert task.status == "SUCCEEDED"

    for policy in ("validate", "create"):  # create makes what is missing, never what differs
        with pytest.raises(SchemaMismatch) as refused:
            schema.check(deps, policy)
        assert f"index {v1}: field terms: analyzer whitespace expected, standard found" in refused.value.message

    stop, results, errors = threading.Event(), [], []

    def searcher() -> None:
        while not stop.is_set():
            try:
                results.append(len(search.search(deps, name, query="beagle named Max", scope=U1, top_k=3)))
            except Exception as error:  # noqa: BLE001 — any failure is what this test looks for
                errors.append(repr(error))

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        while len(results) < 3:  # the searchers are running before the rebuild starts
            stop.wait(0.05)
        before = len(results)
        report = schema.check(deps, "recreate")
        during = len(results) - before
    finally:
        stop.set()
        for t in threads:
            t.join()

    print(f"recreate under load: {during} searches ran during the rebuild, {results.count(0)} empty")
    assert errors == []
    assert during > 0, "no search ran while the index was rebuilt: the test proved nothing"
    assert 0 not in results, f"{results.count(0)} of {len(results)} searches came back empty"
    v2 = index_name(index.prefix, name, 2)
    assert report.rebuilt == [name]
    assert list(index.client.indices.get_alias(name=alias)) == [v2]
    assert not index.client.indices.exists(index=v1)
    assert differences(index.describe()) == []
    schema.check(deps, "validate")  # clean now
    for text in ("beagle Max", "nurse Denver", "Thai green curry"):
        assert search.search(deps, name, query=text, scope=U1, top_k=1), text


def test_what_is_deleted_while_the_index_is_rebuilt_is_not_carried_into_the_new_index(os_deps, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A run deleted after the new index was filled from the table but before the alias moved: its
    deletion reached the old index only. The rebuilt index must hold no document of it."""
    deps = os_deps
    index: OpenSearchIndex = deps.index
    name = stores.create(deps, name="demo").name
    kept, gone = {**U1, "agent_id": "bot", "run_id": "kept"}, {**U1, "agent_id": "bot", "run_id": "gone"}
    for scope, text in ((kept, "I adopted a beagle named Max last Saturday."),
                        (gone, "My passport number is X1234567 and I keep it in the desk.")):
        assert ingest.add(deps, name, scope=scope, sync=True,
                          messages=[{"role": "user", "content": text}]).status == "SUCCEEDED"
    fill, fills = schema.fill, []

    def deleted_before_the_swap(*args, **kwargs):  # type: ignore[no-untyped-def]
        filled = fill(*args, **kwargs)
        if not fills:  # the new index is full; the alias still names the old one
            erase.delete_run(deps, name, scope=gone)
        fills.append(filled)
        return filled

    monkeypatch.setattr(schema, "fill", deleted_before_the_swap)
    schema.recreate_store(deps, name)
    assert fills
    alias = alias_name(index.prefix, name)
    index.client.indices.refresh(index=alias)
    documents = index.client.search(index=alias, body={"query": {"match_all": {}}, "size": 100, "_source": ["run_id"]})
    runs = {hit["_source"].get("run_id") for hit in documents["hits"]["hits"]}
    assert runs == {"kept"}, f"documents of the deleted run in the rebuilt index: {documents['hits']['hits']}"
