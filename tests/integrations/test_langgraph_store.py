"""`memlane.integrations.langgraph.MemlaneStore` passes the behaviour LangGraph expects of a `BaseStore`
(the cases of its InMemoryStore's contract: put/get/update/delete, namespace prefixes, filters, query
ranking, list_namespaces with match conditions, depth and paging, the async forms), against a running
`memlane serve` and in-process; and a namespace never reaches outside the store's tenant."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, PutOp, SearchItem

from memlane.integrations.langgraph import MemlaneStore

pytestmark = pytest.mark.e2e

STORE, APP = f"lg-tests-{uuid.uuid4().hex[:8]}", "lg-app"  # a store of its own per run (a shared engine too)


@pytest.fixture()
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture()
def store(clients: tuple[Any, Any], tenant: str) -> MemlaneStore:
    sync, make_async = clients
    return MemlaneStore(STORE, app_id=APP, tenant_id=tenant, client=sync, async_client=make_async)


def test_put_get_update_delete(store: MemlaneStore) -> None:
    ns = ("users", "alice", "prefs")
    assert store.get(ns, "food") is None
    store.put(ns, "food", {"text": "Alice is vegetarian", "since": 2019})
    first = store.get(ns, "food")
    assert isinstance(first, Item)
    assert (first.namespace, first.key, first.value) == (ns, "food", {"text": "Alice is vegetarian", "since": 2019})
    assert first.created_at <= first.updated_at

    store.put(ns, "food", {"text": "Alice is vegan now", "since": 2024})  # update in place, same key
    second = store.get(ns, "food")
    assert second is not None and second.value == {"text": "Alice is vegan now", "since": 2024}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at

    store.put(ns, "food", {"text": "Alice is vegan now", "since": 2024})  # the same again: idempotent
    assert store.get(ns, "food").value == second.value  # type: ignore[union-attr]

    store.delete(ns, "food")
    assert store.get(ns, "food") is None
    store.delete(ns, "food")  # deleting what is gone is not an error
    store.put(ns, "food", {"text": "back again"})  # a deleted key can be written again
    assert store.get(ns, "food").value == {"text": "back again"}  # type: ignore[union-attr]


def test_values_of_any_json_shape_round_trip(store: MemlaneStore) -> None:
    value = {"a key with spaces": {"nested-key": [1, 2.5, {"x": None, "y": True}]}, "ünïcode": "naïve café",
             "deep": {"l1": {"l2": {"l3": {"l4": {"l5": "bottom"}}}}}}
    store.put(("shapes",), "k:1/with?odd#chars", value)
    item = store.get(("shapes",), "k:1/with?odd#chars")
    assert item is not None and item.value == value and item.key == "k:1/with?odd#chars"


def test_keys_are_deterministic_memory_ids(store: MemlaneStore, clients: tuple[Any, Any], tenant: str) -> None:
    again = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, client=clients[0])
    store.put(("ids",), "one", {"text": "first"})
    again.put(("ids",), "one", {"text": "second"})  # another instance, same namespace and key: the same memory
    assert store.get(("ids",), "one").value == {"text": "second"}  # type: ignore[union-attr]
    memories = [m for m in clients[0].memories.list(STORE, {"app_id": APP, "tenant_id": tenant})]
    assert len(memories) == 1 and memories[0].origin == "explicit"


def test_batch_runs_ops_in_order_and_checks_labels(store: MemlaneStore) -> None:
    results = store.batch([PutOp(("b",), "k", {"text": "v"}), GetOp(("b",), "k"), GetOp(("b",), "missing")])
    assert results[0] is None and results[1].value == {"text": "v"} and results[2] is None  # type: ignore[union-attr]
    with pytest.raises(InvalidNamespaceError):  # "a.b" would otherwise address ("a", "b")
        store.batch([GetOp(("a.b",), "k")])


def test_search_by_namespace_prefix(store: MemlaneStore) -> None:
    store.put(("docs", "a"), "1", {"text": "one"})
    store.put(("docs", "b"), "2", {"text": "two"})
    store.put(("docs", "b", "deep"), "3", {"text": "three"})
    store.put(("docsx",), "4", {"text": "four"})
    store.put(("other",), "5", {"text": "five"})

    def keys(prefix: tuple[str, ...], **kw: Any) -> set[str]:
        return {i.key for i in store.search(prefix, limit=50, **kw)}

    assert keys(("docs",)) == {"1", "2", "3"}  # a prefix is whole labels: ("docsx",) is not under ("docs",)
    assert keys(("docs", "b")) == {"2", "3"}
    assert keys(("docs", "b", "deep")) == {"3"}
    assert keys(()) == {"1", "2", "3", "4", "5"}
    assert keys(("nothing",)) == set()
    assert all(isinstance(i, SearchItem) and i.score is None for i in store.search(("docs",)))


def test_search_filters_on_value_fields(store: MemlaneStore) -> None:
    store.put(("reports",), "r1", {"text": "quarterly revenue report", "type": "report", "score": 4.5, "tags": ["q1"]})
    store.put(("reports",), "r2", {"text": "annual revenue report", "type": "report", "score": 3.0})
    store.put(("reports",), "n1", {"text": "meeting note on revenue", "type": "note", "score": 5.0})

    def keys(flt: dict[str, Any], query: str | None = None) -> set[str]:
        return {i.key for i in store.search(("reports",), filter=flt, query=query, limit=10)}

    assert keys({"type": "report"}) == {"r1", "r2"}
    assert keys({"type": {"$eq": "note"}}) == {"n1"}
    assert keys({"type": {"$ne": "note"}}) == {"r1", "r2"}
    assert keys({"score": {"$gt": 4.0}}) == {"r1", "n1"}
    assert keys({"score": {"$gte": 3.0, "$lt": 4.5}}) == {"r2"}
    assert keys({"type": "report", "score": {"$lte": 3.0}}) == {"r2"}
    assert keys({"tags": ["q1"]}) == {"r1"}
    assert keys({"type": "report"}, query="revenue report") == {"r1", "r2"}  # with a query too
    assert keys({"type": "memo"}) == set()


def test_query_ranks_by_meaning_with_scores(store: MemlaneStore) -> None:
    store.put(("kb",), "py", {"text": "Python is a programming language with a large standard library"})
    store.put(("kb",), "cook", {"text": "A recipe for tomato soup with basil and garlic"})
    store.put(("kb",), "trip", {"text": "Flights to Lisbon leave every morning from the main airport"})
    store.put(("elsewhere",), "py2", {"text": "Python programming tutorial"})

    hits = store.search(("kb",), query="python programming", limit=3)
    assert [h.key for h in hits][0] == "py" and "py2" not in {h.key for h in hits}
    scores = [h.score for h in hits]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    assert store.search(("kb",), query="soup recipe", limit=1)[0].key == "cook"
    assert [h.key for h in store.search(("kb",), query="python programming", limit=1, offset=1)] == [hits[1].key]


def test_index_fields_choose_the_searched_text(store: MemlaneStore) -> None:
    store.put(("idx",), "a", {"title": "tomato soup", "body": "airport lounge access"}, index=["title"])
    store.put(("idx",), "b", {"title": "lounge chairs", "body": "garlic bread"}, index=False)
    assert store.search(("idx",), query="soup", limit=1)[0].key == "a"
    # index=False: kept and listed, never found by a query
    assert "b" not in {h.key for h in store.search(("idx",), query="lounge chairs", limit=10)}
    assert {h.key for h in store.search(("idx",))} == {"a", "b"}
    assert store.get(("idx",), "b").value == {"title": "lounge chairs", "body": "garlic bread"}  # type: ignore[union-attr]


def test_search_limit_and_offset_page_through(store: MemlaneStore) -> None:
    for i in range(7):
        store.put(("page",), f"k{i}", {"text": f"item {i}", "i": i})
    pages = [store.search(("page",), limit=3, offset=o) for o in (0, 3, 6)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert sorted(i.key for p in pages for i in p) == [f"k{i}" for i in range(7)]


def test_list_namespaces(store: MemlaneStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"),
               ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"), ("admin", "users", "789")]:
        store.put(ns, "k", {"text": "/".join(ns)})

    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"),
                                                       ("a", "b", "f")]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("users",)) == [("users", "123"), ("users", "456", "settings")]
    everything = store.list_namespaces(limit=100)
    assert len(everything) == 9 and everything == sorted(everything)
    assert store.list_namespaces(limit=3, offset=3) == everything[3:6]
    assert store.list_namespaces(max_depth=1) == [("a",), ("admin",), ("b",), ("users",)]
    store.delete(("users", "123"), "k")
    assert store.list_namespaces(prefix=("users",)) == [("users", "456", "settings")]


def test_async_forms(store: MemlaneStore) -> None:
    async def scenario() -> None:
        ns = ("async", "ns")
        assert await store.aget(ns, "k") is None
        await store.aput(ns, "k", {"text": "Bob prefers window seats", "n": 1})
        await store.aput(ns, "k2", {"text": "Bob's dog is called Rex", "n": 2})
        got = await store.aget(ns, "k")
        assert got is not None and got.value == {"text": "Bob prefers window seats", "n": 1}
        hits = await store.asearch(("async",), query="which seat does Bob like", limit=2)
        assert hits[0].key == "k" and hits[0].score is not None
        assert {i.key for i in await store.asearch(("async",), filter={"n": {"$gt": 1}})} == {"k2"}
        assert await store.alist_namespaces(prefix=("async",)) == [ns]
        await store.adelete(ns, "k")
        assert await store.aget(ns, "k") is None

    asyncio.run(scenario())


def test_a_namespace_never_reaches_another_tenant(clients: tuple[Any, Any]) -> None:
    sync, _ = clients
    alice = MemlaneStore(STORE, app_id=APP, tenant_id=f"alice-{uuid.uuid4().hex[:8]}", client=sync)
    bob = MemlaneStore(STORE, app_id=APP, tenant_id=f"bob-{uuid.uuid4().hex[:8]}", client=sync)
    alice.put(("memories",), "secret", {"text": "Alice's door code is 4711"})
    bob.put(("memories",), "other", {"text": "Bob likes jazz"})

    assert bob.get(("memories",), "secret") is None  # the same namespace and key, another tenant
    assert [h.key for h in bob.search(("memories",), query="door code", limit=10)] == ["other"]
    assert [h.key for h in bob.search((), limit=100)] == ["other"]
    assert bob.list_namespaces() == [("memories",)]
    bob.delete(("memories",), "secret")  # cannot delete Alice's either
    assert alice.get(("memories",), "secret") is not None


def test_two_tenants_put_one_namespace_and_key_and_each_keeps_its_own(clients: tuple[Any, Any]) -> None:
    """Memory ids are unique in a memlane store: the item's id carries the tenant (before, the second tenant's
    put of a key the first had written was refused on OpenSearch, and on the embedded index took the first
    tenant's document out of search)."""
    sync, _ = clients
    alice = MemlaneStore(STORE, app_id=APP, tenant_id=f"alice-{uuid.uuid4().hex[:8]}", client=sync)
    bob = MemlaneStore(STORE, app_id=APP, tenant_id=f"bob-{uuid.uuid4().hex[:8]}", client=sync)
    alice.put(("profile",), "seat", {"text": "Alice prefers the aisle"})
    bob.put(("profile",), "seat", {"text": "Bob prefers the window"})
    assert alice.get(("profile",), "seat").value == {"text": "Alice prefers the aisle"}  # type: ignore[union-attr]
    assert bob.get(("profile",), "seat").value == {"text": "Bob prefers the window"}  # type: ignore[union-attr]
    assert [h.value["text"] for h in alice.search(("profile",), query="seat preference")] == ["Alice prefers the aisle"]
    assert [h.value["text"] for h in bob.search(("profile",), query="seat preference")] == ["Bob prefers the window"]


def test_an_item_written_under_the_id_of_an_earlier_version_is_read_then_replaced(clients: tuple[Any, Any],
                                                                                tenant: str) -> None:
    from memlane.integrations.langgraph import _metadata, legacy_memory_id

    sync, _ = clients
    store = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, client=sync)
    old = legacy_memory_id("langgraph", ("notes",), "k")
    store.put(("other",), "x", {"text": "makes the store"})
    sync.memories.write(STORE, {"app_id": APP, "tenant_id": tenant, "agent_id": "langgraph"}, [
        {"memory_id": old, "text": "old note", "metadata": _metadata(("notes",), "k", {"text": "old note"}, True)}])
    assert store.get(("notes",), "k").value == {"text": "old note"}  # type: ignore[union-attr]
    store.put(("notes",), "k", {"text": "new note"})
    assert store.get(("notes",), "k").value == {"text": "new note"}  # type: ignore[union-attr]
    assert [h.value["text"] for h in store.search(("notes",))] == ["new note"]  # the old id is gone
    store.delete(("notes",), "k")
    assert store.get(("notes",), "k") is None


def test_another_agent_id_is_another_key_space(clients: tuple[Any, Any], tenant: str) -> None:
    sync, _ = clients
    planner = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, agent_id="planner", client=sync)
    booker = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, agent_id="booker", client=sync)
    planner.put(("notes",), "k", {"text": "planner's note"})
    booker.put(("notes",), "k", {"text": "booker's note"})
    assert planner.get(("notes",), "k").value == {"text": "planner's note"}  # type: ignore[union-attr]
    assert [h.value["text"] for h in booker.search(("notes",))] == ["booker's note"]


def test_async_forms_with_only_a_sync_client_use_that_client(clients: tuple[Any, Any], tenant: str) -> None:
    # the async forms must reach the server the given client names (not a default URL)
    store = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, client=clients[0])

    async def scenario() -> Any:
        await store.aput(("only-sync",), "k", {"text": "reached through the given client"})
        return await store.aget(("only-sync",), "k")

    assert asyncio.run(scenario()).value == {"text": "reached through the given client"}
    assert store.get(("only-sync",), "k") is not None


def test_values_without_text_and_empty_keys_are_kept(store: MemlaneStore) -> None:
    store.put(("numbers",), "", {"count": 3})  # no string to search and an empty key: still an item
    store.put(("numbers",), " ", {"text": "   "})
    assert store.get(("numbers",), "").value == {"count": 3}  # type: ignore[union-attr]
    assert store.get(("numbers",), " ").value == {"text": "   "}  # type: ignore[union-attr]
    assert {i.key for i in store.search(("numbers",))} == {"", " "}


def test_a_value_too_large_is_refused_with_its_code_and_nothing_written(store: MemlaneStore) -> None:
    from memlane.sdk import errors

    with pytest.raises(errors.ApiError) as refused:
        store.put(("big",), "k", {"text": "x" * 20_000})
    assert refused.value.status == 413 and refused.value.code == "payload_too_large"
    assert store.get(("big",), "k") is None
    store.put(("big",), "k", {"text": "small"})
    with pytest.raises(errors.ApiError):
        store.put(("big",), "k", {"text": "y" * 20_000})  # an update too large leaves the old value
    assert store.get(("big",), "k").value == {"text": "small"}  # type: ignore[union-attr]


def test_an_item_a_dream_deleted_is_gone_and_its_key_writable(in_process: Any, tenant: str) -> None:
    """A dream DELETE or MERGE, once applied, marks the memory deleted (reversibly): for LangGraph the item
    is gone, and a put of its key writes it again instead of failing on the deleted memory."""
    from memlane.domain.models import MemoryStatus
    from memlane.integrations.langgraph import memory_id
    from memlane.sdk import Memlane

    store = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, client=Memlane("http://memlane.local", transport=in_process))
    store.put(("dreamt",), "k", {"text": "Alice likes tea"})
    repo = in_process.service.deps.repo
    memory = repo.get_memory(STORE, APP, tenant, memory_id(APP, tenant, "langgraph", ("dreamt",), "k"))
    repo.put_memory(STORE, memory.model_copy(update={"status": MemoryStatus.DELETED}))  # what an applied dream action writes

    assert store.get(("dreamt",), "k") is None
    assert store.search(("dreamt",)) == [] and store.list_namespaces(prefix=("dreamt",)) == []
    store.put(("dreamt",), "k", {"text": "Alice likes tea"})  # the same value again: written again
    assert store.get(("dreamt",), "k").value == {"text": "Alice likes tea"}  # type: ignore[union-attr]

    memory = repo.get_memory(STORE, APP, tenant, memory_id(APP, tenant, "langgraph", ("dreamt",), "k"))
    repo.put_memory(STORE, memory.model_copy(update={"status": MemoryStatus.DELETED}))
    store.put(("dreamt",), "k", {"text": "Alice likes coffee"})  # another value
    assert store.get(("dreamt",), "k").value == {"text": "Alice likes coffee"}  # type: ignore[union-attr]


@pytest.mark.parametrize("field", ["app_id", "tenant_id", "agent_id"])
def test_a_bad_or_wildcard_scope_is_refused_when_made(field: str) -> None:
    from memlane.domain.errors import InvalidScope

    ids = {"app_id": APP, "tenant_id": "alice", "agent_id": "langgraph"}
    for bad in ("*", "a#b", ""):
        with pytest.raises(InvalidScope):  # "*" would be every tenant; "#" the key delimiter
            MemlaneStore(STORE, **{**ids, field: bad})


def test_a_search_without_query_stops_listing_once_it_has_enough(in_process: Any, tenant: str) -> None:
    import httpx

    from memlane.sdk import Memlane

    pages: list[str] = []

    class Counting(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "GET" and request.url.path.endswith("/memories"):
                pages.append(str(request.url))
            return in_process.handle_request(request)

    store = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, client=Memlane("http://memlane.local", transport=Counting()))
    for i in range(260):  # more than one page of 200
        store.put(("many",), f"k{i}", {"n": i})
    pages.clear()
    assert len(store.search(("many",), limit=5)) == 5
    assert len(pages) == 1  # one page had enough: the rest is not read
    pages.clear()
    assert len(store.list_namespaces()) == 1 and len(pages) == 2  # namespaces need every page


def test_a_memory_of_the_scope_this_store_did_not_write_is_no_item(clients: tuple[Any, Any], tenant: str) -> None:
    """A trial: another writer of the tenant (its own key, another tool) wrote into the store's scope a memory whose
    `lg_value` did not parse — every search without a query and every list_namespaces raised for the whole store —
    and one imitating an item's metadata, which showed up beside the real item: one key, two items."""
    from memlane.integrations.langgraph import _metadata

    sync, _ = clients
    store = MemlaneStore(STORE, app_id=APP, tenant_id=tenant, client=sync)
    store.put(("notes",), "k", {"text": "the real note"})
    scope = {"app_id": APP, "tenant_id": tenant, "agent_id": "langgraph"}
    sync.memories.write(STORE, scope, [
        {"text": "broken", "metadata": {"lg_ns": "notes", "lg_key": "b", "lg_value": "{not json"}},
        {"text": "forged note", "metadata": _metadata(("notes",), "k", {"text": "forged note"}, True)}])
    assert [(i.key, i.value) for i in store.search(("notes",))] == [("k", {"text": "the real note"})]
    assert [i.value for i in store.search(("notes",), query="note")] == [{"text": "the real note"}]
    assert store.list_namespaces() == [("notes",)]


def test_a_query_search_past_what_memlane_ranks_is_refused_not_answered_short(store: MemlaneStore) -> None:
    store.put(("page",), "k", {"text": "an item"})
    assert len(store.search(("page",), query="item", offset=90, limit=10)) == 0  # within the 100 ranked
    with pytest.raises(ValueError, match="at most 100"):
        store.search(("page",), query="item", offset=95, limit=10)


def test_a_query_past_memlanes_limit_is_searched_by_its_end_not_refused(store: MemlaneStore) -> None:
    """A trial: a query over 4,000 characters (a graph searching with the user's whole message, as LangGraph's docs
    do) was refused by the SDK (400 invalid_input) where LangGraph's own stores answer; it is searched by its end."""
    store.put(("kb",), "cook", {"text": "A recipe for tomato soup with basil and garlic"})
    pasted = " ".join(f"paragraph {i} of a long letter" for i in range(400))  # ~12,000 characters
    hits = store.search(("kb",), query=f"{pasted}\nDo you have a recipe for tomato soup?", limit=1)
    assert [h.key for h in hits] == ["cook"]
