"""The OpenSearch request builder, without an engine: every search carries the scope filter and
the tenant's routing, on both halves of the _msearch (tests/integration runs it for real)."""

from datetime import UTC, datetime

import pytest

from memlane.adapters.opensearch.documents import metadata_filter_terms, metadata_terms
from memlane.adapters.opensearch.index import index_body
from memlane.adapters.opensearch.documents import document_terms, term_prefix
from memlane.adapters.opensearch.queries import query_terms, search_lines
from memlane.domain.errors import InvalidInput
from memlane.domain.models import MemoryType, RecordType
from memlane.domain.scope import ScopeFilter
from memlane.ports import IndexQuery


def lines_for(**kw):
    q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1", agent_ids=("a1",)), text="zebra", **kw)
    return search_lines("mem-s1", "s1", q, k=7, vector=[1.0, 0.0])


def test_both_signals_carry_the_scope_filter_and_the_routing():
    lines, signals = lines_for(memory_types=(MemoryType.PLAN,), metadata={"topic": ["a", "b"]},
                               time_from=datetime(2024, 1, 1, tzinfo=UTC))
    assert signals == ["keyword", "vector"]
    headers, bodies = lines[0::2], lines[1::2]
    assert headers == [{"index": "mem-s1", "routing": "app#t1"}] * 2
    keyword_filters = bodies[0]["query"]["bool"]["filter"]
    knn = bodies[1]["query"]["knn"]["embedding"]
    assert knn["filter"] == {"bool": {"filter": keyword_filters}}  # inside the knn clause: efficient filtering
    assert knn["k"] == 7 and bodies[0]["size"] == bodies[1]["size"] == 7
    for clause in ({"term": {"store": "s1"}}, {"term": {"app_id": "app"}}, {"term": {"tenant_id": "t1"}},
                   {"terms": {"agent_id": ["a1"]}}, {"terms": {"status": ["active"]}},
                   {"terms": {"metadata_terms": ['["topic","a"]', '["topic","b"]']}},
                   {"range": {"time": {"gte": "2024-01-01T00:00:00.000000Z"}}}):
        assert clause in keyword_filters


# A document written before record types has none: it is a memory.
IS_MEMORY = {"bool": {"should": [{"term": {"record_type": "memory"}},
                                 {"bool": {"must_not": {"exists": {"field": "record_type"}}}}],
                      "minimum_should_match": 1}}


@pytest.mark.parametrize(("record_types", "clause"), [
    ((RecordType.MEMORY,), IS_MEMORY),
    ((RecordType.MESSAGE,), {"terms": {"record_type": ["message"]}}),
    ((RecordType.MEMORY, RecordType.SUMMARY), {"bool": {"should": [{"terms": {"record_type": ["summary"]}}, IS_MEMORY],
                                                        "minimum_should_match": 1}}),
    ((), {"bool": {"must_not": {"match_all": {}}}}),
])
def test_record_types_filter_reads_a_missing_type_as_memory(record_types, clause):
    lines, _ = lines_for(record_types=record_types)
    assert clause in lines[1]["query"]["bool"]["filter"]


def test_memory_types_narrow_memories_only():
    lines, _ = lines_for(memory_types=(MemoryType.PLAN,), record_types=(RecordType.MEMORY, RecordType.MESSAGE))
    assert {"bool": {"should": [{"terms": {"memory_type": ["plan"]}}, {"bool": {"must_not": IS_MEMORY}}],
                     "minimum_should_match": 1}} in lines[1]["query"]["bool"]["filter"]


def test_hits_carry_their_memory_id_record_type_and_run_but_no_text():
    lines, _ = lines_for()
    assert lines[1]["_source"] == lines[3]["_source"] == ["memory_id", "record_type", "agent_id", "run_id"]


def test_no_words_means_no_keyword_half_and_no_vector_no_vector_half():
    q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="!!! ??")
    assert search_lines("mem-s1", "s1", q, k=5, vector=None) == ([], [])


@pytest.mark.parametrize(("text", "words"), [
    ('text:zebra AND "giraffe" OR zeb*', "text zebra giraff zeb"),  # stop words out, stemmed, as embedded
    ("Zebra zebra ZEBRA", "zebra"),
    ("zebra " * 500, "zebra"),
    (" ".join(f"w{i}" for i in range(100)), " ".join(f"w{i}" for i in range(64))),
])
def test_query_terms_keep_only_words_stem_and_cap_them(text, words):
    prefix = term_prefix("app", "t1")
    assert query_terms(text, "app", "t1") == " ".join(prefix + w for w in words.split())


def test_each_tenant_has_its_own_terms_so_bm25_counts_only_its_documents():
    """The same words are other terms for another tenant (or the same tenant id under another app): a
    word's document frequency on the shard is then the tenant's own."""
    mine, theirs, other_app = term_prefix("app", "t1"), term_prefix("app", "t2"), term_prefix("app2", "t1")
    assert len({mine, theirs, other_app, term_prefix("app\x1ft", "1")}) == 4
    assert document_terms("app", "t1", "The cats' café", "cats") == f"{mine}the {mine}cat {mine}cafe {mine}cat"
    q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t2"), text="cafe")
    lines, _ = search_lines("mem-s1", "s1", q, k=5, vector=None)
    assert lines[1]["query"]["bool"]["must"] == [{"match": {"terms": {"query": f"{theirs}cafe"}}}]


def test_metadata_terms_keep_json_types_and_literal_keys():
    assert metadata_terms({"n": 2.0, "s": "2", "b": True, "z": None, "l": [1, "x", {"o": 1}], "a.b": "x",
                           "o": {"k": "v"}}) == ['["n",2]', '["s","2"]', '["b",true]', '["z",null]',
                                                 '["l",1]', '["l","x"]', '["a.b","x"]']
    assert metadata_filter_terms("n", [2, 2.5]) == ['["n",2]', '["n",2.5]']
    with pytest.raises(InvalidInput):
        metadata_filter_terms("o", {"k": "v"})


def test_index_body_comes_from_the_infra_json():
    body = index_body(384, shards=3, replicas=0)
    assert body["mappings"]["properties"]["embedding"]["dimension"] == 384
    assert body["mappings"]["properties"]["embedding"]["method"]["engine"] == "lucene"
    assert body["settings"]["index"]["number_of_shards"] == 3
    assert body["settings"]["index"]["number_of_replicas"] == 0 and "auto_expand_replicas" not in body["settings"]["index"]
    assert "_comment" not in body


def test_a_small_tenants_vector_half_scores_every_document_of_its_filter():
    """`exact`: a script score over the same filter as the keyword half, the top k by (score, id) — not the
    graph walk, whose answer depends on the segments' graphs (docs/benchmarks.md "Exact vectors for small
    tenants")."""
    q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1", agent_ids=("a1",)), text="zebra")
    lines, signals = search_lines("mem-s1", "s1", q, k=7, vector=[1.0, 0.0], exact=True)
    assert signals == ["keyword", "vector"] and lines[2] == {"index": "mem-s1", "routing": "app#t1"}
    score = lines[3]["query"]["script_score"]
    assert score["query"] == {"bool": {"filter": lines[1]["query"]["bool"]["filter"]}}
    assert score["script"]["source"] == "knn_score" and score["script"]["params"]["query_value"] == [1.0, 0.0]
    assert score["script"]["params"]["space_type"] == "cosinesimil"
    assert lines[3]["size"] == 7 and lines[3]["sort"] == lines[1]["sort"]


def test_the_tenants_count_rides_along_under_its_terms_and_routing():
    q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="zebra")
    lines, signals = search_lines("mem-s1", "s1", q, k=7, vector=[1.0, 0.0], count_up_to=20_001)
    assert signals == ["keyword", "vector", "tenant_size"]
    assert lines[4] == {"index": "mem-s1", "routing": "app#t1"}
    assert lines[5] == {"size": 0, "track_total_hits": 20_001, "query": {"bool": {"filter": [
        {"term": {"store": "s1"}}, {"term": {"app_id": "app"}}, {"term": {"tenant_id": "t1"}}]}}}


def test_the_tenant_counts_a_process_keeps_are_bounded(monkeypatch):
    from memlane.adapters.opensearch import index as index_module

    monkeypatch.setattr(index_module, "TENANT_SIZES_KEPT", 3)
    sizes = index_module._TenantSizes()
    for i in range(5):
        sizes.put(("s", "app", f"t{i}"), i, float(i))
    sizes.put(("s", "app", "t2"), 20, 9.0)  # counted again: the most recent now
    sizes.put(("s", "app", "t5"), 5, 10.0)
    assert [t[2] for t, _ in sizes.items()] == ["t4", "t2", "t5"]
    assert sizes.get(("s", "app", "t2")) == (20, 9.0) and sizes.get(("s", "app", "t0")) is None
