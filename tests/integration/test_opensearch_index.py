"""OpenSearchIndex against a real OpenSearch node: what the shared contract suite cannot see —
routing, the index layout, bulk failure reporting, error translation, SigV4 signing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from opensearchpy.exceptions import AuthenticationException

from memlane.adapters.opensearch.documents import (alias_name, document_id, document_terms, index_name, routing_key,
                                                  to_document)
from memlane.adapters.opensearch.index import OpenSearchIndex
from memlane.adapters.opensearch.queries import search_lines
from memlane.adapters.opensearch.tenant_auth import without_userinfo
from memlane.domain.errors import Conflict, DependencyFailed, InvalidInput, NotFound, Retryable
from memlane.domain.models import Memory
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery
from tests.contract.test_index_contract import DIM, embed, ids, mem, put, search

from .conftest import drop_prefix

pytestmark = pytest.mark.integration

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_store_is_a_versioned_index_behind_an_alias(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    client, alias = os_index.client, alias_name(os_index.prefix, "s1")
    assert list(client.indices.get_alias(name=alias)) == [index_name(os_index.prefix, "s1")]
    mapping = client.indices.get_mapping(index=alias)[index_name(os_index.prefix, "s1")]["mappings"]
    assert mapping["_routing"] == {"required": True}
    assert mapping["properties"]["embedding"]["dimension"] == DIM
    assert mapping["properties"]["embedding"]["method"]["space_type"] == "cosinesimil"
    assert mapping["properties"]["terms"]["analyzer"] == "whitespace"
    os_index.drop_store("s1")
    assert not client.indices.exists(index=index_name(os_index.prefix, "s1"))
    assert not client.indices.exists_alias(name=alias)


def test_two_deployments_whose_prefixes_nest_never_take_or_drop_each_others_index(opensearch_url: str,
                                                                                   index_prefix: str) -> None:
    """An AWS-path trial: prefixes P and P-shared both name P-shared-demo_v1 (store "shared-demo" of P, store "demo" of
    P-shared). P adopted the other deployment's index for its store, and its drop_store deleted it — the other's
    searches then answered nothing. Each index is stamped with the prefix that made it."""
    inner = OpenSearchIndex.from_url(opensearch_url, index_prefix=f"{index_prefix}-shared")
    outer = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix)
    try:
        inner.ensure_store("demo", DIM)
        put(inner, "demo", mem("m1", "zebra note"))
        with pytest.raises(Conflict) as refused:
            outer.ensure_store("shared-demo", DIM)
        assert refused.value.code == "index_of_another_deployment"
        outer.drop_store("shared-demo")
        assert ids(search(inner, "demo", "zebra").vector) == ["m1"]  # still there
        assert [name for name in outer.describe().found] == []  # not reported as the outer deployment's
        assert list(inner.describe().found) == [index_name(f"{index_prefix}-shared", "demo")]
    finally:
        drop_prefix(inner.client, index_prefix)
        inner.close()
        outer.close()


def test_an_index_made_before_the_stamp_is_claimed_by_the_first_deployment_to_open_it(opensearch_url: str,
                                                                                      index_prefix: str) -> None:
    """A regression trial: an index made before the owner stamp counted as every deployment's, and nothing stamped it:
    nested prefixes still adopted and dropped each other's. And a rebuild (`memlane schema recreate`) took another
    deployment's stamped index from behind a shared name and deleted it."""
    from memlane.adapters.opensearch.index import index_body

    outer = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix)
    inner = OpenSearchIndex.from_url(opensearch_url, index_prefix=f"{index_prefix}-shared")
    name = index_name(index_prefix, "shared-demo")
    try:
        outer.client.indices.create(index=name, body={**index_body(DIM), "aliases": {
            alias_name(index_prefix, "shared-demo"): {}}})  # as the code before the stamp made it
        outer.ensure_store("shared-demo", DIM)
        with pytest.raises(Conflict):
            inner.ensure_store("demo", DIM)
        inner.drop_store("demo")
        with pytest.raises(Conflict):
            with inner.rebuilding("demo", DIM):
                pass
        assert outer.client.indices.exists(index=name)
        assert list(outer.client.indices.get_alias(name=alias_name(index_prefix, "shared-demo"))) == [name]
    finally:
        drop_prefix(outer.client, index_prefix)
        inner.close()
        outer.close()


def test_a_tenant_lives_on_the_shard_of_its_routing(opensearch_url: str, index_prefix: str) -> None:
    idx = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix, shards=4)
    try:
        idx.ensure_store("s1", DIM)
        tenants = [f"t{i}" for i in range(8)]
        put(idx, "s1", *[mem(f"{t}-{j}", f"zebra note {j}", tenant=t) for t in tenants for j in range(5)])
        alias = alias_name(index_prefix, "s1")
        homes = set()
        for t in tenants:
            home = idx.client.search_shards(index=alias, routing=routing_key("app", t))["shards"][0][0]["shard"]
            homes.add(home)
            per_shard = {s: idx.client.count(index=alias, preference=f"_shards:{s}",
                                             body={"query": {"term": {"tenant_id": t}}})["count"] for s in range(4)}
            assert per_shard == {s: (5 if s == home else 0) for s in range(4)}, t
        assert len(homes) > 1, "the tenants should spread over shards, or this test proves little"

        # A search goes to the tenant's shard only: both halves of the _msearch touch one shard.
        query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t3"), text="zebra", vector=embed("zebra"))
        lines, signals = search_lines(alias, "s1", query, k=10, vector=embed("zebra"))
        responses = idx.client.msearch(body=lines)["responses"]
        assert signals == ["keyword", "vector"]
        assert [r["_shards"]["total"] for r in responses] == [1, 1]
        assert all(h["_source"]["memory_id"].startswith("t3-") for r in responses for h in r["hits"]["hits"])
    finally:
        drop_prefix(idx.client, index_prefix)
        idx.close()


def test_a_write_without_routing_is_refused_by_the_mapping(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    from opensearchpy.exceptions import RequestError

    with pytest.raises(RequestError) as caught:
        os_index.client.index(index=alias_name(os_index.prefix, "s1"), id="x", body={"text": "no routing"})
    assert "routing" in str(caught.value)


def test_a_tenants_delete_is_routed_to_its_shard_and_touches_only_its_documents(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    put(os_index, "s1", *[mem(f"m{t}", "zebra", tenant=f"t{t}") for t in range(6)])
    every_id = [f"m{t}" for t in range(6)]
    for t in range(0, 6, 2):  # each of t0, t2, t4 names every id: only its own goes
        os_index.for_tenant("s1", "app", f"t{t}").delete("s1", every_id, app_id="app", tenant_id=f"t{t}")
    alias = alias_name(os_index.prefix, "s1")
    left = {h["_source"]["memory_id"] for h in os_index.client.search(index=alias, body={"size": 10})["hits"]["hits"]}
    assert left == {"m1", "m3", "m5"}


def test_partial_bulk_failure_names_the_failed_ids(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    good = mem("good", "zebra fine")
    # A keyword longer than Lucene's term limit (32 KB): OpenSearch refuses this one document.
    bad = mem("bad", "zebra broken").model_copy(update={"request_id": "x" * 40_000})
    with pytest.raises(DependencyFailed) as caught:
        os_index.upsert("s1", [(good, embed(good.text)), (bad, embed(bad.text))])
    assert caught.value.details["failed_ids"] == ["bad"]
    assert "bad" in caught.value.message
    result = os_index.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="zebra"))
    assert [h.memory_id for h in result.keyword] == ["good"]  # the rest of the batch was written


def test_upsert_after_another_process_dropped_the_store_is_not_found(opensearch_url: str,
                                                                      os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    put(os_index, "s1", mem("m", "zebra"))  # the dimension is cached now
    other = OpenSearchIndex.from_url(opensearch_url, index_prefix=os_index.prefix)
    other.drop_store("s1")
    with pytest.raises(NotFound):
        put(os_index, "s1", mem("n", "zebra"))
    # require_alias: the failed write did not auto-create an index under the alias name
    assert not os_index.client.indices.exists(index=alias_name(os_index.prefix, "s1"))
    other.close()


def test_bad_query_vector_is_invalid_input_even_when_the_dimension_is_not_cached(opensearch_url: str,
                                                                                 os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    fresh = OpenSearchIndex.from_url(opensearch_url, index_prefix=os_index.prefix)
    with pytest.raises(InvalidInput) as caught:
        fresh.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="zebra",
                                      vector=[1.0] * (DIM - 1)))
    assert "dimension" in caught.value.message.lower()
    fresh.close()


def test_zero_vectors(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    put(os_index, "s1", mem("m", "zebra"))
    with pytest.raises(InvalidInput):
        os_index.upsert("s1", [(mem("z", "zebra"), [0.0] * DIM)])
    result = os_index.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="zebra",
                                              vector=[0.0] * DIM))
    assert [h.memory_id for h in result.keyword] == ["m"] and result.vector == []


def test_unreachable_engine_is_retryable() -> None:
    idx = OpenSearchIndex.from_url("http://127.0.0.1:9", index_prefix="nowhere")
    with pytest.raises(Retryable):
        idx.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="zebra"))
    with pytest.raises(Retryable):
        idx.ensure_store("s1", DIM)


def test_sigv4_client_signs_requests(opensearch_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The test node does not know SigV4 (its security plugin answers 401); this proves the signing
    # path builds, signs and sends.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    url = without_userinfo(opensearch_url)
    with pytest.raises(InvalidInput):  # a signed client never also carries a password
        OpenSearchIndex.from_url("http://user:pw@127.0.0.1:9", sigv4=True)
    idx = OpenSearchIndex.from_url(url, sigv4=True, region="eu-west-1", index_prefix="sigv4")
    connection = idx.client.transport.get_connection()
    import requests

    prepared = requests.Request("GET", url + "/").prepare()
    signed = connection.session.auth(prepared)
    assert signed.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/es/aws4_request" in signed.headers["Authorization"]
    try:
        assert idx.client.info()["version"]["number"]  # a node without the security plugin
    except AuthenticationException:
        pass  # the test engine's security plugin: the signed request arrived, and is not a login it knows
    idx.close()


def test_documents_carry_every_filter_field(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    memory = Memory(memory_id="m", scope=Scope(app_id="app", tenant_id="t1", agent_id="a", run_id="r"),
                    text="zebra", created_at=T0, updated_at=T0, evidence=["e1", "e2"], metadata={"k": [1, "x"]},
                    importance=0.9, keywords="Zed")
    os_index.upsert("s1", [(memory, embed("zebra"))])
    doc = os_index.client.get(index=alias_name(os_index.prefix, "s1"), id=document_id("app", "t1", "m"),
                              routing=routing_key("app", "t1"))["_source"]
    assert "embedding" not in doc  # kept out of _source: the vector lives in the k-NN structures only
    assert doc["evidence"] == ["e1", "e2"] and doc["metadata"] == {"k": [1, "x"]}
    assert doc["metadata_terms"] == ['["k",1]', '["k","x"]']
    assert doc["time"] == doc["created_at"] == "2024-01-01T00:00:00.000000Z"


def test_documents_of_the_older_id_form_are_read_replaced_and_deleted(os_index: OpenSearchIndex) -> None:
    """Before a document's `_id` carried its tenant it was the memory id alone: an index made then, or a
    process of that version still writing during an upgrade, holds such documents. They are found under
    their memory id (read from `_source`, not cut out of `_id`), a write of one replaces it with a document
    of the new form, a delete removes it — an erasure leaves none behind — and another tenant writes the
    same memory id freely."""
    os_index.ensure_store("s1", DIM)
    alias = alias_name(os_index.prefix, "s1")

    def old_form(memory_id: str, text: str, tenant: str) -> None:  # as the previous version wrote it
        m = mem(memory_id, text, tenant=tenant)
        os_index.client.index(index=alias, id=memory_id, routing=routing_key("app", tenant), refresh=True,
                              body=to_document("s1", m, embed(text)))

    def held() -> dict[tuple[str, str], str]:
        hits = os_index.client.search(index=alias, body={"size": 100})["hits"]["hits"]
        return {(h["_source"]["tenant_id"], h["_source"]["memory_id"]): h["_id"] for h in hits}

    old_form("seat", "zebra seat two C", "t1")
    old_form("gone", "zebra secret to erase", "t1")
    t1 = os_index.for_tenant("s1", "app", "t1")
    found = search(t1, "s1", "zebra", tenant="t1")
    assert set(ids(found.keyword)) == set(ids(found.vector)) == {"seat", "gone"}
    assert set(os_index.similarities("s1", ScopeFilter(app_id="app", tenant_id="t1"), embed("zebra"), ["seat"])) == {"seat"}
    put(os_index, "s1", mem("seat", "zebra seat fourteen F", tenant="t2"))  # t2's own "seat": no conflict
    put(t1, "s1", mem("seat", "zebra seat three A", tenant="t1"))  # replaces the older document
    t1.delete("s1", ["gone"], app_id="app", tenant_id="t1")
    assert held() == {("t1", "seat"): document_id("app", "t1", "seat"), ("t2", "seat"): document_id("app", "t2", "seat")}
    assert ids(search(t1, "s1", "three", tenant="t1").keyword) == ["seat"]
    assert ids(search(t1, "s1", "secret", tenant="t1").keyword) == [] and ids(search(t1, "s1", "two", tenant="t1").keyword) == []


def test_an_index_made_before_record_types_is_migrated_on_first_use(opensearch_url: str, index_prefix: str) -> None:
    """A store index of the mapping without `record_type`: its documents read as memories, and the
    field is added to the mapping when a process first touches the store, so messages can join."""
    from memlane.adapters.opensearch.index import index_body
    from memlane.domain.models import RecordType

    old = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix)
    body = index_body(DIM)
    del body["mappings"]["properties"]["record_type"]  # the mapping as it was
    old.client.indices.create(index=index_name(index_prefix, "s1"),
                              body={**body, "aliases": {alias_name(index_prefix, "s1"): {}}})
    old.client.index(index=alias_name(index_prefix, "s1"), id=document_id("app", "t1", "old"), routing=routing_key("app", "t1"),
                     body={"store": "s1", "memory_id": "old", "app_id": "app", "tenant_id": "t1",
                           "agent_id": "a", "run_id": "r", "memory_type": "fact", "status": "active",
                           "text": "zebra from before", "keywords": "", "embedding": embed("zebra from before"),
                           "terms": document_terms("app", "t1", "zebra from before", ""),
                           "created_at": "2024-01-01T00:00:00Z", "time": "2024-01-01T00:00:00Z"},
                     refresh=True)
    old.close()
    idx = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix)
    try:
        put(idx, "s1", mem("said", "zebra said today", agent="a", run="r", record_type=RecordType.MESSAGE))
        scope = ScopeFilter(app_id="app", tenant_id="t1")
        default = idx.search("s1", IndexQuery(scope=scope, text="zebra", vector=embed("zebra")))
        assert [h.memory_id for h in default.keyword] == ["old"] == [h.memory_id for h in default.vector]
        assert default.keyword[0].record_type == RecordType.MEMORY
        both = idx.search("s1", IndexQuery(scope=scope, text="zebra", vector=embed("zebra"),
                                           record_types=(RecordType.MEMORY, RecordType.MESSAGE)))
        assert {(h.memory_id, h.record_type, h.run_id) for h in both.keyword} == {
            ("old", RecordType.MEMORY, "r"), ("said", RecordType.MESSAGE, "r")}
        messages = idx.search("s1", IndexQuery(scope=scope, text="zebra", record_types=(RecordType.MESSAGE,)))
        assert [h.memory_id for h in messages.keyword] == ["said"]
    finally:
        drop_prefix(idx.client, index_prefix)
        idx.close()


def test_a_small_tenants_vector_half_is_the_exact_top_k_once_counted(os_index: OpenSearchIndex,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The first search of a tenant walks the graph and counts the tenant; a tenant counted at most
    `exact_vector_max` documents is then scored exactly over its filter: the exact top k by cosine, of its own
    documents only (another tenant holds the nearest vectors), in the order (score, id). Past the threshold
    the walk stays."""
    import numpy as np

    from memlane.adapters.opensearch import index as index_module

    rng = np.random.default_rng(5)
    x = rng.standard_normal((60, DIM))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[0] + 0.3 * rng.standard_normal(DIM)
    os_index.ensure_store("s1", DIM)
    os_index.upsert("s1", [(mem(f"t1-{i:02d}", f"note {i}", tenant="t1", agent="ab"[i % 2]), x[i].tolist())
                           for i in range(40)])
    os_index.upsert("s1", [(mem(f"t2-{i:02d}", f"note {i}", tenant="t2"), (x[0] + 0.01 * x[i]).tolist())
                           for i in range(40, 60)])
    sent: list[list[dict]] = []
    msearch = os_index.client.msearch
    monkeypatch.setattr(os_index.client, "msearch", lambda body, **kw: sent.append(body) or msearch(body=body, **kw))

    def vector_hits() -> list[tuple[str, float]]:
        query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1", agent_ids=("a",)), text="note",
                           vector=q.tolist(), k=10)
        return [(h.memory_id, h.score) for h in os_index.search("s1", query).vector]

    unit = q / np.linalg.norm(q)
    allowed = [i for i in range(40) if i % 2 == 0]
    cosines = {f"t1-{i:02d}": float(x[i] @ unit) for i in allowed}
    exact = sorted(cosines, key=lambda m: (-cosines[m], m))[:10]

    walked = vector_hits()
    assert "knn" in sent[-1][3]["query"] and sent[-1][5]["track_total_hits"] == index_module.EXACT_VECTOR_MAX + 1
    assert os_index.exact_vector_max == index_module.EXACT_VECTOR_MAX
    scored = vector_hits()
    assert "script_score" in sent[-1][3]["query"] and len(sent[-1]) == 4  # counted: no count line for a while
    assert [m for m, _ in scored] == exact
    assert all(abs(score - cosines[m]) < 1e-4 for m, score in scored)
    assert {m for m, _ in walked} <= set(cosines)

    monkeypatch.setattr(os_index, "exact_vector_max", 10)  # 40 documents: a large tenant now
    os_index._tenant_sizes.clear()
    vector_hits()
    assert sent[-1][5]["track_total_hits"] == 11
    vector_hits()
    assert "knn" in sent[-1][3]["query"]


def test_concurrent_searches_of_small_and_large_tenants_each_get_their_own_answer(os_index: OpenSearchIndex,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The tenant counts that choose the vector half are shared by every copy of the index (`for_tenant`):
    four tenants, two under the threshold and two over it, searched at once from eight threads through their
    own bound copies, each get exactly the answer they get alone, of their own documents only."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    monkeypatch.setattr(os_index, "exact_vector_max", 20)
    rng = np.random.default_rng(9)
    sizes = {"t1": 8, "t2": 16, "t3": 30, "t4": 45}
    os_index.ensure_store("s1", DIM)
    for tenant, n in sizes.items():
        x = rng.standard_normal((n, DIM))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        os_index.upsert("s1", [(mem(f"{tenant}-{i:02d}", f"note {i}", tenant=tenant), x[i].tolist()) for i in range(n)])
    queries = rng.standard_normal((4, DIM)).tolist()

    def one(job: tuple[str, int]) -> tuple[str, int, list[tuple[str, float]], list[str]]:
        tenant, i = job
        bound = os_index.for_tenant("s1", "app", tenant)
        result = bound.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id=tenant), text="note",
                                               vector=queries[i], k=10))
        return tenant, i, [(h.memory_id, round(h.score, 5)) for h in result.vector], [h.memory_id for h in result.keyword]

    jobs = [(t, i) for t in sizes for i in range(len(queries))]
    for tenant in sizes:
        one((tenant, 0))  # counted: from here on t1 and t2 are scored exactly, t3 and t4 walked
    # Counted exactly up to the threshold + 1: enough to choose the plan, no more.
    assert {t[2]: n for t, (n, _) in os_index._tenant_sizes.items()} == {t: min(n, 21) for t, n in sizes.items()}
    alone = {(t, i): (v, k) for t, i, v, k in map(one, jobs)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(one, jobs * 5))
    for tenant, i, vector, keyword in together:
        assert (vector, keyword) == alone[(tenant, i)]
        assert vector and all(m.startswith(f"{tenant}-") for m, _ in vector) and all(m.startswith(f"{tenant}-") for m in keyword)


def test_what_another_tenant_holds_changes_no_keyword_rank(opensearch_url: str, index_prefix: str) -> None:
    """The keyword side channel (docs/security.md): mallory holds "<guess> filler" and "<nonce> filler" and
    reads which ranks first for "<guess> <nonce>". With the shard's document frequencies a guess that other
    tenants' documents hold ranks second; with each tenant's own terms both words are as rare as ever, so the
    two still tie (ordered by id) whatever the victim, on the same shard (one shard here), writes."""
    idx = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix, shards=1)
    try:
        idx.ensure_store("s1", DIM)
        alias = alias_name(index_prefix, "s1")
        put(idx, "s1", mem("a-guess", "4711 filler words", tenant="mallory"),
            mem("b-nonce", "qzxv filler words", tenant="mallory"))

        def probe() -> list[tuple[str, float]]:
            idx.client.indices.refresh(index=alias)
            q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="mallory"), text="4711 qzxv", k=10)
            return [(h.memory_id, h.score) for h in idx.search("s1", q).keyword]

        before = probe()
        assert [mid for mid, _ in before] == ["a-guess", "b-nonce"] and before[0][1] == before[1][1]
        put(idx, "s1", *[mem(f"v-{i}", f"my card PIN is 4711, note {i}", tenant="victim") for i in range(40)])
        after = probe()
        assert [mid for mid, _ in after] == ["a-guess", "b-nonce"] and after[0][1] == after[1][1], after
    finally:
        drop_prefix(idx.client, index_prefix)
        idx.close()
