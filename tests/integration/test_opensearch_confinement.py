"""Tenant confinement in OpenSearch, against the real engine (docs/index-confinement.md).

Two layers, each tested on its own:
- the adapter: a document's `_id` carries its tenant, so two tenants may hold one memory id; nothing is
  read, written or deleted by id alone; an index bound to a tenant (`for_tenant`) refuses a call naming
  another tenant, and a delete selects the tenant's document ids AND its terms;
- the engine: a request sent with one tenant's credentials (a token the security plugin maps to the
  memlane_tenant role, whose document-level security is keyed by the token's claims) can neither
  read, search nor delete another tenant's document, even when the application's query carries no
  tenant filter at all. These requests are built by hand here, to stand for a filter bug.
"""

from __future__ import annotations

import base64
import os
import time
from typing import Iterator
from urllib.parse import urlparse

import pytest
from opensearchpy import OpenSearch
from opensearchpy.exceptions import AuthenticationException, AuthorizationException, NotFoundError

from memlane.adapters.opensearch.documents import alias_name, document_id, index_name, routing_key
from memlane.adapters.opensearch.errors import lost_dls_race
from memlane.adapters.opensearch.index import OpenSearchIndex
from memlane.adapters.opensearch.tenant_auth import TokenClients, tenant_token
from memlane.domain.analysis import tokens
from memlane.domain.errors import Forbidden
from memlane.domain.scope import ScopeFilter
from memlane.ports import IndexQuery
from tests.contract.test_index_contract import DIM, embed, mem, put

from .conftest import drop_prefix

pytestmark = pytest.mark.integration


def _ids(idx: OpenSearchIndex, store: str) -> set[str]:
    """The memory id of every document of the store, as the service (admin) sees it."""
    return {memory_id for _, memory_id in _owned(idx, store)}


def _owned(idx: OpenSearchIndex, store: str) -> set[tuple[str, str]]:
    """(tenant, memory id) of every document of the store, as the service (admin) sees it."""
    resp = idx.client.search(index=alias_name(idx.prefix, store), body={"size": 100, "query": {"match_all": {}}})
    return {(h["_source"]["tenant_id"], h["_source"]["memory_id"]) for h in resp["hits"]["hits"]}


def _found(hits: list[dict]) -> set[str]:
    return {h["_source"]["memory_id"] for h in hits}


def _doc(tenant: str, memory_id: str) -> str:
    """The `_id` of a tenant's document: what a raw request by id must name."""
    return document_id("app", tenant, memory_id)


def _ids_matching(idx: OpenSearchIndex, store: str, word: str) -> set[str]:
    """The documents whose terms hold `word`, whatever their tenant (a term is `<tenant digest>_<stem>`)."""
    (term,) = tokens(word)
    resp = idx.client.search(index=alias_name(idx.prefix, store), body={"query": {"wildcard": {"terms": f"*_{term}"}}})
    return _found(resp["hits"]["hits"])


def _two_tenants(idx: OpenSearchIndex) -> None:
    idx.ensure_store("s1", DIM)
    idx.ensure_store("s2", DIM)
    put(idx, "s1", mem("a1", "alice likes zebra tea", tenant="alice"), mem("a2", "alice zebra note", tenant="alice"),
        mem("b1", "bob likes zebra coffee", tenant="bob"), mem("b2", "bob zebra secret", tenant="bob"))
    put(idx, "s2", mem("x1", "alice zebra in another store", tenant="alice"))


# -- the adapter --------------------------------------------------------------------------------

def test_a_bound_delete_leaves_another_tenants_document(os_index: OpenSearchIndex) -> None:
    _two_tenants(os_index)
    os_index.for_tenant("s1", "app", "alice").delete("s1", ["a1", "b1", "nope"], app_id="app", tenant_id="alice")
    assert _ids(os_index, "s1") == {"a2", "b1", "b2"}


def test_two_tenants_hold_one_id_apart_on_one_shard(opensearch_url: str, index_prefix: str) -> None:
    """Before, a document's `_id` was its memory id: where two tenants shared a shard, the second tenant's
    write of an id the first held was refused (409 `index_id_conflict`), so a tenant could take an id another
    would use, or learn that another held it (docs/security.md)."""
    idx = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix, shards=1)
    try:
        _two_tenants(idx)
        for writer in (idx, idx.for_tenant("s1", "app", "alice")):
            put(writer, "s1", mem("a3", "alice new", tenant="alice"), mem("b1", "alice's words under bob's id", tenant="alice"))
        assert _owned(idx, "s1") == {("alice", m) for m in ("a1", "a2", "a3", "b1")} | {("bob", "b1"), ("bob", "b2")}
        alias = alias_name(idx.prefix, "s1")
        assert idx.client.get(index=alias, id=_doc("bob", "b1"), routing=routing_key("app", "bob"))["_source"]["tenant_id"] == "bob"
        assert _ids_matching(idx, "s1", "coffee") == {"b1"} and _ids_matching(idx, "s1", "under") == {"b1"}
        query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="bob"), text="coffee under", vector=embed("coffee"))
        bob = idx.for_tenant("s1", "app", "bob").search("s1", query)
        assert [h.memory_id for h in bob.keyword] == ["b1"] and {h.memory_id for h in bob.vector} == {"b1", "b2"}
        idx.delete("s1", ["b1", "b2"], app_id="app", tenant_id="alice")  # the service's delete names the tenant
        assert ("alice", "b1") not in _owned(idx, "s1") and {("bob", "b1"), ("bob", "b2")} <= _owned(idx, "s1")
        assert _ids_matching(idx, "s1", "coffee") == {"b1"} and _ids_matching(idx, "s1", "under") == set()
    finally:
        drop_prefix(idx.client, index_prefix)
        idx.close()


def test_a_bound_index_refuses_another_tenants_write_search_and_store(os_index: OpenSearchIndex) -> None:
    _two_tenants(os_index)
    alice = os_index.for_tenant("s1", "app", "alice")
    with pytest.raises(Forbidden):
        put(alice, "s1", mem("a3", "fine"), mem("b1", "overwritten", tenant="bob"))
    with pytest.raises(Forbidden):
        alice.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="bob"), text="zebra"))
    with pytest.raises(Forbidden):
        alice.delete("s2", ["x1"], app_id="app", tenant_id="alice")
    with pytest.raises(Forbidden):
        alice.delete("s1", ["b1"], app_id="app", tenant_id="bob")
    with pytest.raises(Forbidden):
        alice.drop_store("s1")
    assert _ids(os_index, "s1") == {"a1", "a2", "b1", "b2"}  # nothing of the refused batch was written
    assert _ids(os_index, "s2") == {"x1"}


def test_a_bound_index_does_its_own_tenants_work(os_index: OpenSearchIndex) -> None:
    _two_tenants(os_index)
    alice = os_index.for_tenant("s1", "app", "alice")
    put(alice, "s1", mem("a3", "alice zebra third", tenant="alice"))
    got = alice.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="alice"), text="zebra",
                                        vector=embed("zebra")))
    assert {h.memory_id for h in got.keyword} == {"a1", "a2", "a3"}
    alice.delete("s1", ["a3"], app_id="app", tenant_id="alice")
    assert _ids(os_index, "s1") == {"a1", "a2", "b1", "b2"}


def test_the_index_keeps_no_memory_text(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    put(os_index, "s1", mem("a1", "alice's private zebra diary", tenant="alice", keywords="hidden words"))
    doc = os_index.client.get(index=alias_name(os_index.prefix, "s1"), id=_doc("alice", "a1"),
                              routing=routing_key("app", "alice"))["_source"]
    assert "text" not in doc and "keywords" not in doc and "embedding" not in doc
    assert "diary" not in repr(doc) and "hidden" not in repr(doc)
    assert _ids_matching(os_index, "s1", "diary") == {"a1"}  # still found by its words


# -- the engine --------------------------------------------------------------------------------

@pytest.fixture()
def tenant_key() -> str:
    key = os.environ.get("MEMLANE_OPENSEARCH_TENANT_KEY")
    if not key:
        pytest.skip("MEMLANE_OPENSEARCH_TENANT_KEY is not set: this engine has no security plugin "
                    "(scripts/engines.sh start installs it)")
    return key


@pytest.fixture()
def confined(opensearch_url: str, index_prefix: str, tenant_key: str) -> Iterator[OpenSearchIndex]:
    """The service's index (admin) whose tenants reach the engine with their own tokens."""
    idx = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix,
                                   tenant_clients=TokenClients(opensearch_url, tenant_key))
    yield idx
    drop_prefix(idx.client, index_prefix)
    idx.close()


def _as(idx: OpenSearchIndex, store: str, tenant: str) -> OpenSearch:
    """A raw client carrying `tenant`'s credentials, the token the adapter would send. It sends a 500
    again: these requests bypass the adapter, which absorbs the security plugin's race with the indices
    other tests create meanwhile (errors.DLS_RACE)."""
    clients = idx.tenant_clients
    assert isinstance(clients, TokenClients)
    token = tenant_token(clients.key, store, "app", tenant, now=time.time())
    return OpenSearch(hosts=[clients.url], headers={"Authorization": f"Bearer {token}"},
                      max_retries=5, retry_on_status=(500,))


def _mget(client: OpenSearch, index: str, docs: list[dict]) -> list[dict]:
    """`_mget`, sent again while an item lost the security plugin's race with an index other tests create
    meanwhile (errors.DLS_RACE): that race fails one item, not the request, so the client's retry on 500
    never sees it. Any other item error is left for the caller's assertion to show."""
    for _ in range(5):
        items = client.mget(index=index, body={"docs": docs})["docs"]
        if not any(lost_dls_race(item.get("error")) for item in items):
            return items
        time.sleep(0.2)
    return items


def _msearch(client: OpenSearch, body: list[dict]) -> list[dict]:
    """`_msearch`, sent again while a search lost the security plugin's race, as `_mget` (a CI run: KeyError 'hits',
    the item an error). Any other item error is left for the caller's assertion to show."""
    for _ in range(5):
        responses = client.msearch(body=body)["responses"]
        if not any(lost_dls_race(r.get("error")) for r in responses):
            return responses
        time.sleep(0.2)
    return responses


def test_a_tenants_credentials_search_only_its_documents_whatever_the_query(confined: OpenSearchIndex) -> None:
    _two_tenants(confined)
    alias = alias_name(confined.prefix, "s1")
    alice = _as(confined, "s1", "alice")
    everything = {"size": 100, "query": {"match_all": {}}}  # the filter bug: no tenant, no store term
    assert _found(alice.search(index=alias, body=everything)["hits"]["hits"]) == {"a1", "a2"}
    bob_by_name = {"size": 100, "query": {"term": {"tenant_id": "bob"}}}
    assert alice.search(index=alias, body=bob_by_name)["hits"]["hits"] == []
    # every shard, every index of the prefix, the k-NN signal and _msearch: still only alice's
    hits = alice.search(index=f"{confined.prefix}-*", body=everything, routing=None)["hits"]["hits"]
    assert _found(hits) == {"a1", "a2"}  # not x1: her token is for store s1
    knn = {"size": 10, "query": {"knn": {"embedding": {"vector": embed("zebra"), "k": 10}}}}
    responses = _msearch(alice, [{"index": alias}, knn, {"index": alias}, everything])
    assert [_found(r["hits"]["hits"]) if "hits" in r else r for r in responses] == [{"a1", "a2"}, {"a1", "a2"}]
    assert alice.count(index=alias)["count"] == 2


def test_a_tenants_credentials_cannot_read_another_tenants_document_by_id(confined: OpenSearchIndex) -> None:
    _two_tenants(confined)
    alias, alice = alias_name(confined.prefix, "s1"), _as(confined, "s1", "alice")
    with pytest.raises(NotFoundError):
        alice.get(index=alias, id=_doc("bob", "b1"), routing=routing_key("app", "bob"))
    docs = _mget(alice, alias, [{"_id": _doc("bob", "b1"), "routing": routing_key("app", "bob")},
                                {"_id": _doc("alice", "a1"), "routing": routing_key("app", "alice")}])
    assert [d.get("found") for d in docs] == [False, True], docs
    assert docs[1]["_source"]["tenant_id"] == "alice"


def test_a_tenants_credentials_cannot_delete_or_overwrite_any_document(confined: OpenSearchIndex) -> None:
    _two_tenants(confined)
    alias, alice = alias_name(confined.prefix, "s1"), _as(confined, "s1", "alice")
    bob = routing_key("app", "bob")
    # DLS filters reads only: a principal that may write by id could reach any document, so the
    # tenant's credentials write nothing — not by id, not by query, not in bulk.
    with pytest.raises(AuthorizationException):
        alice.delete(index=alias, id=_doc("bob", "b1"), routing=bob)
    with pytest.raises(AuthorizationException):
        alice.delete_by_query(index=alias, body={"query": {"match_all": {}}})
    with pytest.raises(AuthorizationException):
        alice.index(index=alias, id=_doc("bob", "b2"), routing=bob, body={"text": "overwritten"})
    items = alice.bulk(body=[{"delete": {"_index": alias, "_id": _doc("bob", "b1"), "routing": bob}},
                             {"index": {"_index": alias, "_id": _doc("bob", "b2"), "routing": bob}}, {"text": "x"}])["items"]
    assert [(op, r["status"]) for item in items for op, r in item.items()] == [("delete", 403), ("index", 403)]
    assert _ids(confined, "s1") == {"a1", "a2", "b1", "b2"}
    assert confined.client.get(index=alias, id=_doc("bob", "b2"), routing=bob)["_source"]["tenant_id"] == "bob"
    assert _ids_matching(confined, "s1", "secret") == {"b2"}  # not overwritten: its terms are still bob's


def test_a_tenant_rewrites_and_deletes_its_own_documents(os_index: OpenSearchIndex) -> None:
    _two_tenants(os_index)
    alice = os_index.for_tenant("s1", "app", "alice")
    put(alice, "s1", mem("a1", "alice rewrote this", tenant="alice"))
    put(alice, "s1", mem("a1", "and again", tenant="alice"))
    assert _ids_matching(os_index, "s1", "again") == {"a1"} and _ids_matching(os_index, "s1", "rewrote") == set()
    alice.delete("s1", ["a1", "a1", "a2"], app_id="app", tenant_id="alice")
    assert _ids(os_index, "s1") == {"b1", "b2"}


def test_the_adapters_tenant_calls_go_through_the_engines_confinement(confined: OpenSearchIndex) -> None:
    _two_tenants(confined)
    alice = confined.for_tenant("s1", "app", "alice")
    assert alice.client is not confined.client
    got = alice.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="alice"), text="zebra",
                                        vector=embed("zebra")))
    assert {h.memory_id for h in got.keyword} == {h.memory_id for h in got.vector} == {"a1", "a2"}
    put(alice, "s1", mem("a3", "alice zebra third", tenant="alice"))
    alice.delete("s1", ["a1", "b1"], app_id="app", tenant_id="alice")
    assert _ids(confined, "s1") == {"a2", "a3", "b1", "b2"}


def test_the_engine_refuses_a_token_it_did_not_sign_and_a_tenant_creating_or_dropping_indices(
        confined: OpenSearchIndex, opensearch_url: str) -> None:
    _two_tenants(confined)
    alias = alias_name(confined.prefix, "s1")
    forged = tenant_token(base64.b64decode(base64.b64encode(b"k" * 32)), "s1", "app", "bob", now=time.time())
    plain = urlparse(opensearch_url)._replace(netloc=f"{urlparse(opensearch_url).hostname}:{urlparse(opensearch_url).port}")
    stranger = OpenSearch(hosts=[plain.geturl()], headers={"Authorization": f"Bearer {forged}"})
    with pytest.raises(AuthenticationException):
        stranger.search(index=alias, body={"query": {"match_all": {}}})
    alice = _as(confined, "s1", "alice")
    with pytest.raises(AuthorizationException):
        alice.indices.delete(index=index_name(confined.prefix, "s1"))
    with pytest.raises(AuthorizationException):
        alice.indices.create(index=f"{confined.prefix}-mine")
    assert _ids(confined, "s1") == {"a1", "a2", "b1", "b2"}


def test_message_documents_are_confined_like_memories(confined: OpenSearchIndex) -> None:
    """Messages share the index: a tenant's credentials reach its own messages only, whatever the query,
    and a bound index finds, overwrites and deletes only its own tenant's messages."""
    from memlane.domain.models import RecordType

    message = RecordType.MESSAGE
    _two_tenants(confined)
    put(confined, "s1", mem("am", "alice said zebra", tenant="alice", record_type=message),
        mem("bm", "bob said zebra secretly", tenant="bob", record_type=message))
    alias, alice = alias_name(confined.prefix, "s1"), _as(confined, "s1", "alice")
    everything = {"size": 100, "query": {"term": {"record_type": "message"}}}  # the filter bug: no tenant
    assert _found(alice.search(index=alias, body=everything)["hits"]["hits"]) == {"am"}
    bound = confined.for_tenant("s1", "app", "alice")
    query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="alice"), text="zebra secretly said",
                       vector=embed("zebra"), record_types=(RecordType.MEMORY, message))
    found = bound.search("s1", query)
    assert {h.memory_id for h in found.keyword} == {h.memory_id for h in found.vector} == {"a1", "a2", "am"}
    with pytest.raises(Forbidden):
        put(bound, "s1", mem("bm", "overwrite", tenant="bob", record_type=message))
    bound.delete("s1", ["am", "bm"], app_id="app", tenant_id="alice")  # bob's message id is left alone
    assert _ids(confined, "s1") >= {"bm"} and "am" not in _ids(confined, "s1")


def test_a_tenants_reads_survive_indices_created_and_dropped_meanwhile(confined: OpenSearchIndex) -> None:
    """The security plugin renders a tenant's DLS query over every index of the cluster, once for a request
    and again for its parts: a store created or dropped in between failed ~4% of tenant searches with 500
    "dls_query does not match" (errors.DLS_RACE). The adapter sends such a read again."""
    import threading

    _two_tenants(confined)
    alice = confined.for_tenant("s1", "app", "alice")
    query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="alice"), text="zebra", vector=embed("zebra"))
    stop = threading.Event()

    def churn() -> None:  # another store of the service, created and dropped without a pause
        n = 0
        while not stop.is_set():
            confined.ensure_store(f"churn{n % 2}", DIM)
            confined.drop_store(f"churn{n % 2}")
            n += 1

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        for i in range(300):
            found = alice.search("s1", query)
            assert {h.memory_id for h in found.keyword} >= {"a1", "a2"}
            if i % 60 == 0:  # a write looks up the tenant's versions first: a read under its token too
                put(alice, "s1", mem(f"a-{i}", "alice zebra later", tenant="alice"))
                alice.delete("s1", [f"a-{i}"], app_id="app", tenant_id="alice")
    finally:
        stop.set()
        churner.join()
    assert _ids(confined, "s1") == {"a1", "a2", "b1", "b2"}


def test_a_tenants_credentials_read_the_scores_the_services_login_reads(confined: OpenSearchIndex) -> None:
    """An AWS-path trial: the security plugin scores its document-level security clause 1.0 beside every query, so a
    tenant's token read every cosine as 1.0 (clamped from 1 + cos) — distinct facts were dropped as near-duplicates
    and `min_similarity` filtered nothing — and every BM25 score 1.0 higher. A tenant reads what the service reads."""
    _two_tenants(confined)
    scope = ScopeFilter(app_id="app", tenant_id="alice")
    query = IndexQuery(scope=scope, text="alice tea", vector=embed("alice tea"), k=10)
    as_service = OpenSearchIndex(confined.client, index_prefix=confined.prefix).for_tenant("s1", "app", "alice")
    alice = confined.for_tenant("s1", "app", "alice")
    assert alice.client is not as_service.client
    mine, theirs = alice.search("s1", query), as_service.search("s1", query)
    def scores(result):
        return {signal: {h.memory_id: round(h.score, 5) for h in getattr(result, signal)} for signal in ("keyword", "vector")}

    assert scores(mine) == scores(theirs)
    assert scores(mine)["vector"]["a2"] < 0.9  # "alice zebra note" is not "alice tea"
    similar = alice.similarities("s1", scope, embed("alice tea"), ["a1", "a2"])
    assert similar == pytest.approx(as_service.similarities("s1", scope, embed("alice tea"), ["a1", "a2"]), abs=1e-5)
    assert similar["a2"] == pytest.approx(scores(mine)["vector"]["a2"], abs=1e-4)
