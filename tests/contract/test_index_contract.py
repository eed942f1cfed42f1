"""Contract of the Index port: every backend (embedded, OpenSearch) must pass all of it.

Vectors come from a small deterministic embedder: words of a fixed toy vocabulary map to
shared "concept" dimensions (so paraphrases land close together), any other word is hashed
into the remaining dimensions with a low weight. That makes the vector signal meaningful
without a model, so a test can tell keyword retrieval from vector retrieval.
"""

from __future__ import annotations

import functools
from array import array
import hashlib
import math
import random
import re
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memlane.domain.errors import Conflict, Forbidden, InvalidInput, NotFound
from memlane.domain.models import Memory, MemoryStatus, MemoryType, RecordType
from memlane.domain.scope import DEFAULT, Scope, ScopeFilter
from memlane.ports import Index, IndexQuery, IndexResult
from tests.contract.index_backends import index  # noqa: F401  (the parametrised fixture)

DIM = 64
T0 = datetime(2024, 1, 1, tzinfo=UTC)

# ---------------------------------------------------------------------------------------------
# A toy embedder
# ---------------------------------------------------------------------------------------------

_CONCEPTS = [
    "car cars automobile automobiles vehicle sedan drive drives driving",
    "dog dogs puppy puppies canine hound",
    "food meal meals cuisine dinner lunch eat eats eating cook cooking",
    "coffee espresso latte cappuccino",
    "tea oolong matcha",
    "travel trip journey flight flights fly flying vacation holiday",
    "music song songs guitar piano melody band",
    "work job office employer career",
    "allergy allergic peanut peanuts",
    "run running runs marathon marathons jog jogging",
]
_VOCAB = {word: dim for dim, group in enumerate(_CONCEPTS) for word in group.split()}
_HASHED = range(len(_CONCEPTS), DIM)


def embed(text: str) -> list[float]:
    return list(_embed(text))


@functools.lru_cache(maxsize=None)
def _embed(text: str) -> tuple[float, ...]:
    vec = [0.0] * DIM
    for word in re.findall(r"\w+", text.lower()):
        if word in _VOCAB:
            vec[_VOCAB[word]] += 1.0
        else:  # md5, not hash(): stable across processes
            h = int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "big")
            vec[_HASHED[h % len(_HASHED)]] += 0.25
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return tuple(v / norm for v in vec)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def mem(memory_id: str, text: str, *, app: str = "app", tenant: str = "t1", agent: str = DEFAULT,
        run: str = DEFAULT, memory_type: MemoryType = MemoryType.FACT,
        status: MemoryStatus = MemoryStatus.ACTIVE, metadata: dict[str, Any] | None = None,
        created: datetime = T0, event_time: datetime | None = None, keywords: str = "",
        record_type: RecordType = RecordType.MEMORY) -> Memory:
    return Memory(
        memory_id=memory_id, scope=Scope(app_id=app, tenant_id=tenant, agent_id=agent, run_id=run),
        memory_type=memory_type, record_type=record_type, text=text, created_at=created, updated_at=created,
        event_time=event_time, status=status, metadata=metadata or {}, keywords=keywords,
    )


def put(index: Index, store: str, *memories: Memory) -> None:
    index.upsert(store, [(m, embed(m.text)) for m in memories])


def search(index: Index, store: str, text: str, *, app: str = "app", tenant: str = "t1",
           agents: tuple[str, ...] | None = None, runs: tuple[str, ...] | None = None,
           k: int = 50, with_vector: bool = True, **filters: Any) -> IndexResult:
    query = IndexQuery(
        scope=ScopeFilter(app_id=app, tenant_id=tenant, agent_ids=agents, run_ids=runs),
        text=text, vector=embed(text) if with_vector else None, k=k, **filters,
    )
    return index.search(store, query)


def ids(hits: list[Any]) -> list[str]:
    return [h.memory_id for h in hits]


def both(result: IndexResult) -> set[str]:
    """The docs a filter let through, seen by both signals.

    Used with a query word every doc contains and k above the doc count, so keyword search
    returns every doc that passes the filter, and vector search (no threshold) does too.
    The two must agree: the filter is applied to both retrieval paths.
    """
    keyword, vector = set(ids(result.keyword)), set(ids(result.vector))
    assert len(result.keyword) == len(keyword) and len(result.vector) == len(vector), "duplicate hits"
    assert keyword == vector, f"keyword {sorted(keyword)} != vector {sorted(vector)}"
    return keyword


def assert_ranked(result: IndexResult) -> None:
    for hits in (result.keyword, result.vector):
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True), "hits must be best-first"
    assert all(h.score > 0 for h in result.keyword), "BM25 scores are positive, higher is better"
    assert all(-1.0 - 1e-5 <= h.score <= 1.0 + 1e-5 for h in result.vector), "cosine is in [-1, 1]"


@pytest.fixture
def ready(index: Index) -> Index:
    for store in ("s1", "s2"):
        index.ensure_store(store, DIM)
    return index


CORPUS = [
    mem("seat", "Prefers window seats on long flights"),
    mem("car", "Alice drives an old automobile to her office"),
    mem("dog", "Bob adopted a puppy last spring"),
    mem("peanut", "Carol is allergic to peanuts"),
    mem("guitar", "Dave plays guitar in a band"),
    mem("marathon", "She was running three marathons this year"),
    mem("coffee", "Drinks espresso every morning before standup"),
]


# ---------------------------------------------------------------------------------------------
# Retrieval
# ---------------------------------------------------------------------------------------------


def test_exact_phrase_is_the_top_keyword_hit(ready: Index) -> None:
    put(ready, "s1", *CORPUS)
    result = search(ready, "s1", "prefers window seats on long flights")
    assert ids(result.keyword)[0] == "seat"
    assert_ranked(result)


def test_keyword_search_is_an_or_of_words(ready: Index) -> None:
    put(ready, "s1", *CORPUS)
    result = search(ready, "s1", "guitar unheardofword", with_vector=False)
    assert ids(result.keyword) == ["guitar"]
    assert result.vector == []


def test_keyword_search_stems_english(ready: Index) -> None:
    put(ready, "s1", *CORPUS)
    assert ids(search(ready, "s1", "run marathon").keyword)[0] == "marathon"
    assert ids(search(ready, "s1", "allergy peanut").keyword)[0] == "peanut"


def test_a_possessive_is_its_word(ready: Index) -> None:
    """OpenSearch's english analyzer reads "user's" as "user": no bare "s" matches "that's"."""
    put(ready, "s1", mem("remark", "Anyway, that's where things stand"), mem("fact", "The user works for PwC"))
    assert ids(search(ready, "s1", "the user's employer", with_vector=False).keyword) == ["fact"]


def test_keyword_search_covers_the_keywords_field(ready: Index) -> None:
    put(ready, "s1", mem("kw", "Met the new manager", keywords="Zoltan 2024-05-03"),
        mem("other", "Met the dentist"))
    assert ids(search(ready, "s1", "zoltan").keyword) == ["kw"]


def test_paraphrase_without_shared_words_is_found_by_vector(ready: Index) -> None:
    put(ready, "s1", *CORPUS)
    result = search(ready, "s1", "what sedan does she own")
    assert "car" not in ids(result.keyword), "no content word is shared: keyword search cannot find it"
    assert ids(result.vector)[0] == "car"
    assert_ranked(result)


def test_vector_score_is_cosine(ready: Index) -> None:
    put(ready, "s1", *CORPUS)
    result = search(ready, "s1", "Bob adopted a puppy last spring")
    assert ids(result.vector)[0] == "dog"
    assert result.vector[0].score == pytest.approx(1.0, abs=1e-3)
    assert result.vector[1].score < 0.9
    assert_ranked(result)


def test_similarities_are_the_cosines_a_vector_search_reports(ready: Index) -> None:
    """What a search reports for a hit its vector list did not reach: the same cosine, read by id."""
    put(ready, "s1", *CORPUS)
    query = "Bob adopted a puppy last spring"
    result = search(ready, "s1", query)
    scope = ScopeFilter(app_id="app", tenant_id="t1")
    got = ready.similarities("s1", scope, embed(query), ids(result.vector))
    assert got == pytest.approx({h.memory_id: h.score for h in result.vector}, abs=1e-4)
    assert ready.similarities("s1", scope, embed(query), []) == {}
    assert ready.similarities("s1", scope, embed(query), ["no-such-id"]) == {}


def test_no_query_vector_means_no_vector_hits(ready: Index) -> None:
    put(ready, "s1", *CORPUS)
    result = search(ready, "s1", "guitar", with_vector=False)
    assert result.vector == [] and ids(result.keyword) == ["guitar"]


@pytest.mark.parametrize("text", ["", "   ", "!!! ??? ...", '""'])
def test_query_without_words_has_no_keyword_hits(ready: Index, text: str) -> None:
    put(ready, "s1", *CORPUS)
    query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text=text, vector=embed("puppy"))
    result = ready.search("s1", query)
    assert result.keyword == []
    assert ids(result.vector)[0] == "dog"


def test_k_bounds_both_lists_and_keeps_the_best(ready: Index) -> None:
    docs = [mem(f"d{i:02d}", "zebra " * (1 + i % 5) + f"filler{i}") for i in range(30)]
    put(ready, "s1", *docs)
    full = search(ready, "s1", "zebra", k=100)
    assert len(full.keyword) == 30 and len(full.vector) == 30
    top = search(ready, "s1", "zebra", k=5)
    assert len(top.keyword) == 5 and len(top.vector) == 5
    assert ids(top.keyword) == ids(full.keyword)[:5]
    assert [h.score for h in top.vector] == pytest.approx([h.score for h in full.vector][:5])
    assert_ranked(top)
    assert search(ready, "s1", "zebra", k=1).keyword[0].memory_id == full.keyword[0].memory_id



def test_keyword_k_bounds_the_keyword_list_alone(ready: Index) -> None:
    """A search fuses `candidates` keyword hits but wants a longer vector list (its cosines): the keyword
    list is cut at keyword_k, the vector list still at k, each keeping its best."""
    docs = [mem(f"d{i:02d}", "zebra " * (1 + i % 5) + f"filler{i}") for i in range(30)]
    put(ready, "s1", *docs)
    full = search(ready, "s1", "zebra", k=100)
    cut = search(ready, "s1", "zebra", k=100, keyword_k=5)
    assert ids(cut.keyword) == ids(full.keyword)[:5]
    assert ids(cut.vector) == ids(full.vector)
    none = search(ready, "s1", "zebra", k=20, keyword_k=0)  # more matches than a first check reads
    assert none.keyword == [] and len(none.vector) == 20

# ---------------------------------------------------------------------------------------------
# Scope: every rule, every wildcard form, every neighbour that must stay invisible
# ---------------------------------------------------------------------------------------------

# (store, app, tenant, agent, run) → memory id. Every doc says "zebra".
PLACES = {
    "t1-def": ("s1", "app", "t1", DEFAULT, DEFAULT),
    "t1-a1-r1": ("s1", "app", "t1", "a1", "r1"),
    "t1-a1-r2": ("s1", "app", "t1", "a1", "r2"),
    "t1-a2-r1": ("s1", "app", "t1", "a2", "r1"),
    "t1-a3-r3": ("s1", "app", "t1", "a3", "r3"),
    "t1-a10-r10": ("s1", "app", "t1", "a10", "r10"),  # a1 / r1 are prefixes of these ids
    "t2-a1-r1": ("s1", "app", "t2", "a1", "r1"),  # another tenant
    "t1x-a1-r1": ("s1", "app", "t1x", "a1", "r1"),  # a tenant id that t1 is a prefix of
    "t-a1-r1": ("s1", "app", "t", "a1", "r1"),  # a tenant id that is a prefix of t1
    "app2-t1-a1-r1": ("s1", "app2", "t1", "a1", "r1"),  # another app, same tenant id
    "ap-t1-a1-r1": ("s1", "ap", "t1", "a1", "r1"),  # an app id that is a prefix of app
    "s2-t1-a1-r1": ("s2", "app", "t1", "a1", "r1"),  # another store, same scope
    "s1x-t1-a1-r1": ("s1x", "app", "t1", "a1", "r1"),  # a store name that s1 is a prefix of
}


@pytest.fixture
def placed(ready: Index) -> Index:
    ready.ensure_store("s1x", DIM)
    for store in {p[0] for p in PLACES.values()}:  # one batch per store: fewer refreshes on OpenSearch
        put(ready, store, *[mem(memory_id, f"zebra note {memory_id}", app=app, tenant=tenant, agent=agent, run=run)
                            for memory_id, (s, app, tenant, agent, run) in PLACES.items() if s == store])
    return ready


T1 = {m for m, p in PLACES.items() if p[:3] == ("s1", "app", "t1")}


@pytest.mark.parametrize(("agents", "runs", "expected"), [
    (None, None, T1),
    (("a1",), None, {"t1-a1-r1", "t1-a1-r2"}),
    (("a1", "a2"), None, {"t1-a1-r1", "t1-a1-r2", "t1-a2-r1"}),
    ((DEFAULT,), None, {"t1-def"}),
    (None, ("r1",), {"t1-a1-r1", "t1-a2-r1"}),
    (None, ("r2", "r3"), {"t1-a1-r2", "t1-a3-r3"}),
    (("a1",), ("r2",), {"t1-a1-r2"}),
    (("a1", "a3"), ("r1", "r3"), {"t1-a1-r1", "t1-a3-r3"}),
    (("a2",), ("r2",), set()),
    (("nobody",), None, set()),
    (None, ("no-run",), set()),
], ids=["any-any", "agent-exact", "agent-list", "agent-default", "run-exact", "run-list",
        "agent-and-run", "lists-both", "empty-intersection", "unknown-agent", "unknown-run"])
def test_scope_selectors(placed: Index, agents: tuple[str, ...] | None, runs: tuple[str, ...] | None,
                         expected: set[str]) -> None:
    assert both(search(placed, "s1", "zebra", agents=agents, runs=runs, k=100)) == expected


@pytest.mark.parametrize("memory_id", sorted(PLACES))
def test_each_tenant_sees_only_its_own_docs(placed: Index, memory_id: str) -> None:
    store, app, tenant, _, _ = PLACES[memory_id]
    own = {m for m, p in PLACES.items() if p[:3] == (store, app, tenant)}
    assert memory_id in own
    assert both(search(placed, store, "zebra", app=app, tenant=tenant, k=100)) == own
    # The neighbour's own unique words do not reach across either.
    probe = f"zebra note {memory_id}"
    for other, (o_store, o_app, o_tenant, _, _) in PLACES.items():
        if (o_store, o_app, o_tenant) != (store, app, tenant):
            assert memory_id not in both(search(placed, o_store, probe, app=o_app, tenant=o_tenant, k=100)), other


def test_unknown_tenant_app_or_store_sees_nothing(placed: Index) -> None:
    assert both(search(placed, "s1", "zebra", tenant="t3", k=100)) == set()
    assert both(search(placed, "s1", "zebra", app="nope", k=100)) == set()
    assert search(placed, "s3", "zebra", k=100) == IndexResult(keyword=[], vector=[])


@pytest.mark.parametrize(("agents", "runs", "expected"), [
    (None, None, T1),
    (("a1",), ("r1",), {"t1-a1-r1"}),
    (("a1",), ("r10",), set()),
])
def test_similarities_are_read_in_the_scope_only(placed: Index, agents: tuple[str, ...] | None,
                                                 runs: tuple[str, ...] | None, expected: set[str]) -> None:
    """Every neighbour's id asked for by name (other tenants, apps, stores, prefix ids): only the scope's answer."""
    scope = ScopeFilter(app_id="app", tenant_id="t1", agent_ids=agents, run_ids=runs)
    got = placed.similarities("s1", scope, embed("zebra"), [*sorted(PLACES), "no-such-id"])
    assert set(got) == expected
    assert all(-1.0 - 1e-5 <= v <= 1.0 + 1e-5 for v in got.values())


def test_a_tenants_delete_naming_every_neighbours_id_removes_only_its_own(placed: Index) -> None:
    placed.delete("s1", sorted(PLACES), app_id="app", tenant_id="t1")  # prefix tenants, apps, stores too
    for memory_id, (store, app, tenant, agent, run) in PLACES.items():
        found = both(search(placed, store, "zebra", app=app, tenant=tenant, k=100))
        assert (memory_id in found) == (memory_id not in T1), memory_id


def test_two_tenants_hold_documents_of_one_id_apart(placed: Index) -> None:
    """A document's identity is (store, app, tenant, id): two tenants choosing one client id each keep a
    document, and neither's write, rewrite or delete reaches the other's. Before, the embedded index refused
    t2's write (ids were unique in its store) and OpenSearch refused it where the two tenants share a shard:
    a tenant could take an id another would use, and learn whether another held it."""
    put(placed, "s1", mem("t1-a1-r1", "zebra mine too", tenant="t2"))
    assert both(search(placed, "s1", "zebra", tenant="t1", k=100)) == T1
    assert ids(search(placed, "s1", "mine", tenant="t1").keyword) == []
    assert both(search(placed, "s1", "zebra", tenant="t2", k=100)) == {"t2-a1-r1", "t1-a1-r1"}
    assert ids(search(placed, "s1", "mine", tenant="t2").keyword) == ["t1-a1-r1"]
    # one batch with both tenants' documents of one id writes both
    put(placed, "s1", mem("both", "zebra apple", tenant="t1"), mem("both", "zebra pear", tenant="t2"))
    assert [ids(search(placed, "s1", word, tenant="t1").keyword) for word in ("apple", "pear")] == [["both"], []]
    assert [ids(search(placed, "s1", word, tenant="t2").keyword) for word in ("apple", "pear")] == [[], ["both"]]
    # each tenant's similarity for the id is its own document's
    t1_cos = placed.similarities("s1", ScopeFilter(app_id="app", tenant_id="t1"), embed("zebra apple"), ["both"])
    t2_cos = placed.similarities("s1", ScopeFilter(app_id="app", tenant_id="t2"), embed("zebra apple"), ["both"])
    assert t1_cos["both"] == pytest.approx(1.0, abs=1e-4) and t2_cos["both"] < 0.9
    # a rewrite and a delete reach the writer's document only
    put(placed, "s1", mem("both", "zebra plum", tenant="t2"))
    assert ids(search(placed, "s1", "apple", tenant="t1").keyword) == ["both"]
    placed.delete("s1", ["t1-a1-r1", "both"], app_id="app", tenant_id="t2")
    assert both(search(placed, "s1", "zebra", tenant="t1", k=100)) == T1 | {"both"}
    assert both(search(placed, "s1", "zebra", tenant="t2", k=100)) == {"t2-a1-r1"}
    placed.delete("s1", ["both"], app_id="app", tenant_id="t1")
    assert both(search(placed, "s1", "zebra", tenant="t1", k=100)) == T1


def test_a_tenant_bound_index_refuses_calls_naming_another_tenant_or_store(placed: Index) -> None:
    t1 = placed.for_tenant("s1", "app", "t1")
    with pytest.raises(Forbidden):
        put(t1, "s1", mem("new", "zebra new", tenant="t1"), mem("t2-a1-r1", "overwrite", tenant="t2"))
    with pytest.raises(Forbidden):
        put(t1, "s2", mem("new", "zebra new", tenant="t1"))
    with pytest.raises(Forbidden):
        search(t1, "s1", "zebra", tenant="t1x")
    with pytest.raises(Forbidden):
        t1.delete("s2", ["s2-t1-a1-r1"], app_id="app", tenant_id="t1")
    with pytest.raises(Forbidden):
        t1.delete("s1", ["t2-a1-r1"], app_id="app", tenant_id="t2")
    with pytest.raises(Forbidden):
        t1.drop_store("s1")
    with pytest.raises(Forbidden):
        t1.similarities("s1", ScopeFilter(app_id="app", tenant_id="t2"), embed("zebra"), ["t2-a1-r1"])
    assert both(search(t1, "s1", "zebra", k=100)) == T1  # its own scope still works
    assert set(t1.similarities("s1", ScopeFilter(app_id="app", tenant_id="t1"), embed("zebra"), sorted(PLACES))) == T1
    assert both(search(placed, "s1", "zebra", tenant="t2", k=100)) == {"t2-a1-r1"}
    assert both(search(placed, "s2", "zebra", k=100)) == {"s2-t1-a1-r1"}
    assert ids(search(placed, "s1", "new").keyword) == []


def test_same_memory_id_in_two_stores_is_two_docs(ready: Index) -> None:
    put(ready, "s1", mem("m1", "zebra lives in store one"))
    put(ready, "s2", mem("m1", "giraffe lives in store two"))
    assert ids(search(ready, "s1", "giraffe").keyword) == []
    assert ids(search(ready, "s2", "giraffe").keyword) == ["m1"]
    ready.delete("s1", ["m1"], app_id="app", tenant_id="t1")
    assert ids(search(ready, "s1", "zebra").keyword) == []
    assert ids(search(ready, "s2", "giraffe").keyword) == ["m1"]


@functools.cache
def _crowd() -> tuple[Memory, ...]:
    """3,000 docs of one tenant: 12 of agent "rare", 288 of agent "mid", the rest "common"."""
    rng = random.Random(7)
    words = [w for group in _CONCEPTS for w in group.split()] + [f"filler{i}" for i in range(200)]
    return tuple(
        mem(f"c{i:04d}", " ".join(rng.choices(words, k=8)), metadata={"bucket": i % 7},
            agent="rare" if i % 250 == 0 else "mid" if i % 10 == 0 else "common")
        for i in range(3000)
    )


def crowd() -> list[Memory]:
    return list(_crowd())


def brute_force(docs: list[Memory], text: str, keep: Any) -> list[tuple[str, float]]:
    q = embed(text)
    scored = [(m.memory_id, sum(a * b for a, b in zip(q, embed(m.text)))) for m in docs if keep(m)]
    return sorted(scored, key=lambda x: -x[1])


def test_selective_filter_does_not_starve_vector_hits(ready: Index) -> None:
    # 12 of 3,000 docs pass the filter. Filtering the overall top hits afterwards would
    # leave the list short; the filter must hold during the kNN, so all k slots fill.
    docs = crowd()
    ready.upsert("s1", [(m, embed(m.text)) for m in docs])
    expected = brute_force(docs, "puppy dog canine", lambda m: m.scope.agent_id == "rare")
    few = search(ready, "s1", "puppy dog canine", agents=("rare",), k=5)
    assert len(few.vector) == 5 and set(ids(few.vector)) <= {m for m, _ in expected}
    assert few.vector[0].score == pytest.approx(expected[0][1], abs=1e-4)
    assert set(ids(search(ready, "s1", "puppy dog canine", agents=("rare",), k=50).vector)) == {m for m, _ in expected}


# ---------------------------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def tagged(ready: Index) -> Index:
    put(ready, "s1",
        mem("food-en", "zebra one", metadata={"topic": "food", "lang": "en", "priority": 2}),
        mem("food-de", "zebra two", metadata={"topic": "food", "lang": "de", "priority": 1, "pinned": True}),
        mem("travel", "zebra three", metadata={"topic": "travel", "tags": ["beach", "summer"]}),
        mem("bare", "zebra four"),
        mem("other-tenant", "zebra five", tenant="t2", metadata={"topic": "food"}))
    return ready


@pytest.mark.parametrize(("metadata", "expected"), [
    ({"topic": "food"}, {"food-en", "food-de"}),
    ({"topic": ["food", "travel"]}, {"food-en", "food-de", "travel"}),
    ({"topic": "food", "lang": "de"}, {"food-de"}),
    ({"topic": ["travel"], "lang": "en"}, set()),
    ({"priority": 2}, {"food-en"}),
    ({"priority": [1, 2]}, {"food-en", "food-de"}),
    ({"pinned": True}, {"food-de"}),
    ({"tags": "beach"}, {"travel"}),
    ({"tags": ["winter", "summer"]}, {"travel"}),
    ({"topic": "Food"}, set()),
    ({"missing": "x"}, set()),
    ({}, {"food-en", "food-de", "travel", "bare"}),
], ids=["equal", "any-of", "and-across-keys", "and-no-match", "number", "number-any-of", "bool",
        "array-field-contains", "array-field-any-of", "case-sensitive", "absent-key", "empty-filter"])
def test_metadata_filter(tagged: Index, metadata: dict[str, Any], expected: set[str]) -> None:
    assert both(search(tagged, "s1", "zebra", metadata=metadata, k=100)) == expected


def test_memory_type_filter(ready: Index) -> None:
    put(ready, "s1",
        mem("f", "zebra fact", memory_type=MemoryType.FACT),
        mem("p", "zebra preference", memory_type=MemoryType.PREFERENCE),
        mem("e", "zebra event", memory_type=MemoryType.EVENT))
    assert both(search(ready, "s1", "zebra")) == {"f", "p", "e"}
    assert both(search(ready, "s1", "zebra", memory_types=(MemoryType.PREFERENCE,))) == {"p"}
    assert both(search(ready, "s1", "zebra", memory_types=(MemoryType.FACT, MemoryType.EVENT))) == {"f", "e"}
    assert both(search(ready, "s1", "zebra", memory_types=(MemoryType.PLAN,))) == set()


# ---------------------------------------------------------------------------------------------
# Record types: memories, messages and summaries share the index; memories unless asked
# ---------------------------------------------------------------------------------------------

MESSAGE, SUMMARY = RecordType.MESSAGE, RecordType.SUMMARY


@pytest.fixture
def records(ready: Index) -> Index:
    put(ready, "s1",
        mem("m-fact", "zebra fact", agent="a1", run="r1"),
        mem("m-pref", "zebra preference", memory_type=MemoryType.PREFERENCE, agent="a1", run="r2"),
        mem("msg-1", "zebra said in thread one", agent="a1", run="r1", record_type=MESSAGE),
        mem("msg-2", "zebra said in thread two", agent="a2", run="r2", record_type=MESSAGE),
        mem("sum-1", "zebra summary of thread one", agent="a1", run="r1", record_type=SUMMARY),
        mem("msg-t2", "zebra said by another tenant", tenant="t2", agent="a1", run="r1", record_type=MESSAGE))
    return ready


@pytest.mark.parametrize(("record_types", "expected"), [
    (None, {"m-fact", "m-pref"}),  # the default: memories only
    ((MESSAGE,), {"msg-1", "msg-2"}),
    ((SUMMARY,), {"sum-1"}),
    ((RecordType.MEMORY, MESSAGE), {"m-fact", "m-pref", "msg-1", "msg-2"}),
    ((RecordType.MEMORY, MESSAGE, SUMMARY), {"m-fact", "m-pref", "msg-1", "msg-2", "sum-1"}),
    ((), set()),
], ids=["default", "messages", "summaries", "memories-and-messages", "all", "none"])
def test_record_type_filter(records: Index, record_types: tuple[RecordType, ...] | None,
                            expected: set[str]) -> None:
    asked = {} if record_types is None else {"record_types": record_types}
    assert both(search(records, "s1", "zebra", **asked)) == expected


def test_hits_say_their_record_type_and_where_they_live(records: Index) -> None:
    result = search(records, "s1", "zebra said thread", record_types=(RecordType.MEMORY, MESSAGE, SUMMARY))
    for hits in (result.keyword, result.vector):
        where = {h.memory_id: (h.record_type, h.agent_id, h.run_id) for h in hits}
        assert where["msg-2"] == (MESSAGE, "a2", "r2")
        assert where["sum-1"] == (SUMMARY, "a1", "r1")
        assert where["m-pref"] == (RecordType.MEMORY, "a1", "r2")


def test_memory_types_narrow_memories_only(records: Index) -> None:
    """Messages and summaries have no memory type: a memory-type filter leaves them alone."""
    found = both(search(records, "s1", "zebra", record_types=(RecordType.MEMORY, MESSAGE),
                        memory_types=(MemoryType.PREFERENCE,)))
    assert found == {"m-pref", "msg-1", "msg-2"}


@pytest.mark.parametrize(("runs", "expected"), [
    (("r1",), {"m-fact", "msg-1", "sum-1"}),  # exactly one thread
    (None, {"m-fact", "m-pref", "msg-1", "msg-2", "sum-1"}),  # the tenant's other threads too
])
def test_record_types_combine_with_the_thread_filter(records: Index, runs: tuple[str, ...] | None,
                                                     expected: set[str]) -> None:
    every = (RecordType.MEMORY, MESSAGE, SUMMARY)
    assert both(search(records, "s1", "zebra", runs=runs, record_types=every)) == expected


def test_a_tenant_bound_index_confines_messages_like_memories(records: Index) -> None:
    t1 = records.for_tenant("s1", "app", "t1")
    with pytest.raises(Forbidden):
        put(t1, "s1", mem("msg-t2", "overwrite", tenant="t2", record_type=MESSAGE))
    with pytest.raises(Forbidden):
        t1.delete("s1", ["msg-t2"], app_id="app", tenant_id="t2")
    t1.delete("s1", ["msg-1", "msg-t2"], app_id="app", tenant_id="t1")  # the other tenant's message id is left alone
    assert both(search(records, "s1", "zebra", record_types=(MESSAGE,))) == {"msg-2"}
    assert both(search(records, "s1", "zebra", tenant="t2", record_types=(MESSAGE,))) == {"msg-t2"}


def test_reupsert_can_change_the_record_type(ready: Index) -> None:
    put(ready, "s1", mem("x", "zebra", record_type=MESSAGE))
    put(ready, "s1", mem("x", "zebra"))
    assert both(search(ready, "s1", "zebra")) == {"x"}
    assert both(search(ready, "s1", "zebra", record_types=(MESSAGE,))) == set()


def test_status_filter_hides_superseded_and_deleted_by_default(ready: Index) -> None:
    put(ready, "s1",
        mem("new", "zebra lives in Berlin"),
        mem("old", "zebra lives in Paris", status=MemoryStatus.SUPERSEDED),
        mem("gone", "zebra lives in Rome", status=MemoryStatus.DELETED))
    assert both(search(ready, "s1", "zebra")) == {"new"}
    assert both(search(ready, "s1", "zebra",
                       statuses=(MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED))) == {"new", "old"}
    assert both(search(ready, "s1", "zebra", statuses=(MemoryStatus.SUPERSEDED,))) == {"old"}
    assert ids(search(ready, "s1", "paris").keyword) == []


def test_time_range_uses_event_time_then_created_at(ready: Index) -> None:
    put(ready, "s1",
        mem("jan-event", "zebra a", created=datetime(2024, 5, 1, tzinfo=UTC),
            event_time=datetime(2024, 1, 10, tzinfo=UTC)),
        mem("mar-created", "zebra b", created=datetime(2024, 3, 1, tzinfo=UTC)),
        # created in range but the event is not: the event time decides
        mem("jun-event", "zebra c", created=datetime(2024, 3, 2, tzinfo=UTC),
            event_time=datetime(2024, 6, 1, tzinfo=UTC)),
        # 2024-03-01T00:30+02:00 is 2024-02-29T22:30Z: compared as instants, not as text
        mem("tz", "zebra d", created=datetime(2024, 1, 1, tzinfo=UTC),
            event_time=datetime(2024, 3, 1, 0, 30, tzinfo=timezone(timedelta(hours=2)))))
    feb, apr = datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 4, 1, tzinfo=UTC)
    assert both(search(ready, "s1", "zebra", time_from=feb, time_to=apr)) == {"mar-created", "tz"}
    assert both(search(ready, "s1", "zebra", time_from=datetime(2024, 3, 1, tzinfo=UTC))) == {"mar-created", "jun-event"}
    assert both(search(ready, "s1", "zebra", time_to=feb)) == {"jan-event"}
    # Both bounds are inclusive.
    exact = datetime(2024, 3, 1, tzinfo=UTC)
    assert both(search(ready, "s1", "zebra", time_from=exact, time_to=exact)) == {"mar-created"}


def test_filters_combine_with_scope(ready: Index) -> None:
    put(ready, "s1",
        mem("hit", "zebra x", agent="a1", memory_type=MemoryType.PLAN, metadata={"topic": "food"}),
        mem("wrong-agent", "zebra y", agent="a2", memory_type=MemoryType.PLAN, metadata={"topic": "food"}),
        mem("wrong-type", "zebra z", agent="a1", memory_type=MemoryType.FACT, metadata={"topic": "food"}),
        mem("wrong-meta", "zebra w", agent="a1", memory_type=MemoryType.PLAN, metadata={"topic": "art"}))
    result = search(ready, "s1", "zebra", agents=("a1",), memory_types=(MemoryType.PLAN,),
                    metadata={"topic": "food"})
    assert both(result) == {"hit"}


# ---------------------------------------------------------------------------------------------
# Writes
# ---------------------------------------------------------------------------------------------


def test_reupsert_replaces_text_vector_and_status(ready: Index) -> None:
    put(ready, "s1", mem("m", "Likes oolong tea in the afternoon"), mem("other", "Plays guitar"))
    assert ids(search(ready, "s1", "oolong").keyword) == ["m"]  # also warms any cache
    before = {h.memory_id: h.score for h in search(ready, "s1", "matcha").vector}
    assert before["m"] > 0.5

    put(ready, "s1", mem("m", "Switched to espresso coffee"))
    assert ids(search(ready, "s1", "oolong").keyword) == []
    assert ids(search(ready, "s1", "espresso").keyword) == ["m"]
    assert ids(search(ready, "s1", "latte").vector)[0] == "m"
    after = {h.memory_id: h.score for h in search(ready, "s1", "matcha").vector}
    assert after["m"] < 0.1, "the old vector is gone"
    assert both(search(ready, "s1", "espresso guitar")) == {"m", "other"}  # replaced, not duplicated

    put(ready, "s1", mem("m", "Switched to espresso coffee", status=MemoryStatus.SUPERSEDED))
    assert both(search(ready, "s1", "espresso guitar")) == {"other"}


def test_duplicate_ids_in_one_batch_keep_the_last(ready: Index) -> None:
    put(ready, "s1", mem("m", "zebra first version"), mem("m", "zebra second version"))
    result = search(ready, "s1", "zebra first second")
    assert ids(result.keyword) == ["m"] and ids(result.vector) == ["m"]
    assert ids(search(ready, "s1", "first").keyword) == []


def test_delete_removes_from_both_signals(ready: Index) -> None:
    put(ready, "s1", *CORPUS)
    assert ids(search(ready, "s1", "puppy").vector)[0] == "dog"
    tenant = ready.for_tenant("s1", "app", "t1")
    tenant.delete("s1", ["dog", "car"], app_id="app", tenant_id="t1")
    result = search(ready, "s1", "Bob adopted a puppy last spring", k=100)
    assert "dog" not in ids(result.keyword) and "dog" not in ids(result.vector)
    assert "car" not in ids(result.vector)
    assert len(result.vector) == len(CORPUS) - 2
    tenant.delete("s1", ["dog", "never-existed"], app_id="app", tenant_id="t1")  # idempotent, unknown ids are fine
    tenant.delete("s1", [], app_id="app", tenant_id="t1")
    assert ids(search(ready, "s1", "guitar").keyword) == ["guitar"]


def test_large_batch_is_fully_searchable(ready: Index) -> None:
    n = 2000
    put(ready, "s1", *[mem(f"b{i:04d}", f"batch item token{i:04d} about something") for i in range(n)])
    every = search(ready, "s1", "batch", k=n + 500)
    assert len(every.keyword) == n and len(every.vector) == n
    assert set(ids(every.keyword)) == {f"b{i:04d}" for i in range(n)}
    for i in range(0, n, 7):
        assert ids(search(ready, "s1", f"token{i:04d}", k=3, with_vector=False).keyword) == [f"b{i:04d}"]


def test_dimension_mismatch_is_refused_and_writes_nothing(ready: Index) -> None:
    good, bad = mem("good", "zebra good"), mem("bad", "zebra bad")
    with pytest.raises(InvalidInput):
        ready.upsert("s1", [(good, embed(good.text)), (bad, embed(bad.text)[:-1])])
    with pytest.raises(InvalidInput):
        ready.upsert("s1", [(bad, embed(bad.text) + [0.0])])
    assert both(search(ready, "s1", "zebra")) == set()
    with pytest.raises(InvalidInput):
        ready.search("s1", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="zebra",
                                      vector=[1.0] * (DIM - 1)))


def test_ensure_store_is_idempotent_and_keeps_its_dimension(ready: Index) -> None:
    put(ready, "s1", mem("m", "zebra"))
    ready.ensure_store("s1", DIM)
    assert both(search(ready, "s1", "zebra")) == {"m"}
    with pytest.raises(Conflict):
        ready.ensure_store("s1", DIM * 2)


def test_upsert_into_unknown_store_is_refused(ready: Index) -> None:
    with pytest.raises(NotFound):
        put(ready, "s3", mem("m", "zebra"))


def test_drop_store_removes_only_that_store(ready: Index) -> None:
    put(ready, "s1", mem("a", "zebra in one"))
    put(ready, "s2", mem("b", "zebra in two"))
    ready.drop_store("s1")
    ready.drop_store("s1")  # idempotent
    ready.drop_store("s3")  # never ensured: nothing to do, no error
    assert search(ready, "s1", "zebra") == IndexResult(keyword=[], vector=[])
    assert both(search(ready, "s2", "zebra")) == {"b"}
    ready.ensure_store("s1", 8)  # a dropped store can come back with another model
    with pytest.raises(InvalidInput):
        put(ready, "s1", mem("a", "zebra"))  # 64-dim vector into an 8-dim store


# ---------------------------------------------------------------------------------------------
# Hostile query text
# ---------------------------------------------------------------------------------------------

HOSTILE = [
    '"', '""', '"zebra', 'zebra"', "'", "*", "zebra*", "^zebra", "NEAR(zebra giraffe)",
    "NEAR/2", "zebra NEAR giraffe", "OR", "zebra OR", "AND", "NOT", "NOT zebra", "zebra AND NOT giraffe",
    "(", ")", "(zebra", "zebra)", "-zebra", "zebra - giraffe", "+zebra", "text:zebra",
    "keywords:zebra", "{text keywords}: zebra", "docs_fts:zebra", "rank:1", "zebra:", ":",
    "a' OR '1'='1", "'; DROP TABLE docs; --", "\\", "\x00zebra", "zebra\u200bgiraffe", "🦓 zebra",
    "ZEBRA", "z" * 5000, "zebra " * 2000, "{}[]<>!@#$%&|~`=?,;", "\\u0022 zebra",
]


@pytest.mark.parametrize("text", HOSTILE, ids=[f"q{i}" for i in range(len(HOSTILE))])
def test_hostile_query_text_never_breaks_or_widens_the_search(ready: Index, text: str) -> None:
    put(ready, "s1", mem("mine", "zebra giraffe note"), mem("theirs", "zebra giraffe note", tenant="t2"))
    result = search(ready, "s1", text)
    assert set(ids(result.keyword)) <= {"mine"} and set(ids(result.vector)) <= {"mine"}
    assert_ranked(result)
    # Nothing was altered: the doc is still there and the other tenant still unreachable.
    assert both(search(ready, "s1", "zebra")) == {"mine"}


@pytest.mark.parametrize("text", ["text:zebra", "NEAR(zebra giraffe)", "zebra*", "-zebra", '"zebra',
                                  "(zebra)", "zebra OR", "ZEBRA"])
def test_operator_characters_are_stripped_not_obeyed(ready: Index, text: str) -> None:
    put(ready, "s1", mem("z", "zebra stripes"), mem("zz", "zebras in herds"))
    # The word still counts as a word (so the doc is found) ...
    assert "z" in ids(search(ready, "s1", text, with_vector=False).keyword)
    # ... and "*" is not a prefix operator: "zeb*" does not match "zebra".
    assert search(ready, "s1", "zeb*", with_vector=False).keyword == []


# ---------------------------------------------------------------------------------------------
# Embedded backend only: persistence, concurrency, its vector cache and its MATCH builder
# ---------------------------------------------------------------------------------------------


def test_embedded_persists_across_reopen(tmp_path: Path) -> None:
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    first = EmbeddedIndex(tmp_path / "i.sqlite3")
    first.ensure_store("s1", DIM)
    put(first, "s1", *CORPUS)
    first.close()
    again = EmbeddedIndex(tmp_path / "i.sqlite3")
    assert again.count("s1") == len(CORPUS)
    assert ids(search(again, "s1", "what sedan does she own").vector)[0] == "car"
    with pytest.raises(InvalidInput):  # the dimension was persisted too
        again.upsert("s1", [(mem("x", "x"), [1.0] * 3)])
    again.close()


# The tables of a version-2 file, as that version wrote them: keyword search read an FTS5 table kept by triggers,
# with a tenant token column.
_SCHEMA_2 = """
CREATE TABLE stores (store TEXT PRIMARY KEY, dim INTEGER NOT NULL);
CREATE TABLE docs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, store TEXT NOT NULL, memory_id TEXT NOT NULL, app_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL, memory_type TEXT NOT NULL,
    status TEXT NOT NULL, created_at TEXT NOT NULL, event_time TEXT, time TEXT NOT NULL, metadata TEXT NOT NULL,
    importance REAL NOT NULL, text TEXT NOT NULL, keywords TEXT NOT NULL, tkey TEXT NOT NULL,
    record_type TEXT NOT NULL DEFAULT 'memory', UNIQUE (store, memory_id));
CREATE TABLE vectors (doc_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL);
CREATE VIRTUAL TABLE docs_fts USING fts5(text, keywords, tkey, content='docs', content_rowid='id',
                                         tokenize='porter unicode61');
CREATE TRIGGER docs_ai AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts (rowid, text, keywords, tkey) VALUES (new.id, new.text, new.keywords, new.tkey);
END;
CREATE TRIGGER docs_ad AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, text, keywords, tkey) VALUES ('delete', old.id, old.text, old.keywords, old.tkey);
    DELETE FROM vectors WHERE doc_id = old.id;
END;
CREATE INDEX docs_scope ON docs (store, app_id, tenant_id, status, record_type, agent_id, run_id);
PRAGMA user_version = 2;
"""


def _old_index_file(path: Path, version: int) -> None:
    """An index file of CORPUS in store s1 as `version` (1, 2 or 3) wrote it; an earlier document, deleted,
    had taken the largest id."""
    import sqlite3

    db = sqlite3.connect(path)
    db.executescript(_SCHEMA_2)
    db.execute("INSERT INTO stores VALUES ('s1', ?)", (DIM,))
    for m in CORPUS:
        db.execute("INSERT INTO docs (store, memory_id, app_id, tenant_id, agent_id, run_id, memory_type, status, "
                   "created_at, time, metadata, importance, text, keywords, tkey) "
                   "VALUES ('s1', ?, ?, ?, ?, ?, ?, ?, '2024-01-01T00:00:00.000000Z', '2024-01-01T00:00:00.000000Z', "
                   "'{}', 0.5, ?, ?, '12345')",
                   (m.memory_id, m.scope.app_id, m.scope.tenant_id, m.scope.agent_id, m.scope.run_id,
                    str(m.memory_type), str(m.status), m.text, m.keywords))
        db.execute("INSERT INTO vectors SELECT id, ? FROM docs WHERE memory_id = ?",
                   (array("f", embed(m.text)).tobytes(), m.memory_id))
    db.execute("INSERT INTO docs (id, store, memory_id, app_id, tenant_id, agent_id, run_id, memory_type, status, "
               "created_at, time, metadata, importance, text, keywords, tkey) VALUES (1000, 's1', 'gone', 'app', "
               "'t1', '', '', 'fact', 'active', '', '', '{}', 0.5, 'gone', '', '1')")
    db.execute("DELETE FROM docs WHERE id = 1000")
    if version == 3:  # before ids were per tenant
        db.executescript("DROP TRIGGER docs_ai; DROP TRIGGER docs_ad; DROP TABLE docs_fts; "
                         "ALTER TABLE docs DROP COLUMN tkey; CREATE TRIGGER docs_vectors_ad AFTER DELETE ON docs "
                         "BEGIN DELETE FROM vectors WHERE doc_id = old.id; END; PRAGMA user_version = 3;")
    if version == 1:  # before record types
        db.executescript("DROP INDEX docs_scope; ALTER TABLE docs DROP COLUMN record_type; "
                         "CREATE INDEX docs_scope ON docs (store, app_id, tenant_id, status, agent_id, run_id); "
                         "PRAGMA user_version = 1;")
    db.commit()
    db.close()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_embedded_index_of_an_older_schema_is_migrated_in_place(tmp_path: Path, version: int) -> None:
    """Its documents stay findable both ways (a version-1 file's are memories, and messages can join them);
    the FTS5 table, its triggers and the tenant token go; ids become unique per tenant, no docs.id is used
    again, and a deletion still takes the vector with it."""
    import sqlite3

    from memlane.adapters.local.embedded_index import EmbeddedIndex

    _old_index_file(tmp_path / "i.sqlite3", version)
    again = EmbeddedIndex(tmp_path / "i.sqlite3")
    assert ids(search(again, "s1", "what sedan does she own").vector)[0] == "car"
    assert ids(search(again, "s1", "automobile").keyword) == ["car"]
    put(again, "s1", mem("said", "my sedan is red", record_type=MESSAGE))
    assert ids(search(again, "s1", "sedan", record_types=(MESSAGE,)).keyword) == ["said"]
    default = search(again, "s1", "sedan")
    assert "said" not in ids(default.keyword) + ids(default.vector)
    assert {d.record_type for d in again.documents("s1")} == {"memory", "message"}
    put(again, "s1", mem("car", "my bicycle is blue", tenant="t2"))  # t1's id, for t2: a document of its own
    assert ids(search(again, "s1", "bicycle", tenant="t2").keyword) == ["car"]
    assert ids(search(again, "s1", "automobile").keyword) == ["car"]
    again.delete("s1", ["car"], app_id="app", tenant_id="t1")
    assert ids(search(again, "s1", "bicycle", tenant="t2").keyword) == ["car"]
    again.close()
    db = sqlite3.connect(tmp_path / "i.sqlite3")
    names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert not any("fts" in n for n in names) and not {"docs_ai", "docs_ad"} & names
    assert "tkey" not in {c[1] for c in db.execute("PRAGMA table_info(docs)")}
    assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == len(CORPUS) + 1  # -car +said +t2's car
    assert db.execute("SELECT min(id) FROM docs WHERE memory_id IN ('said', 'car')").fetchone()[0] > 1000
    assert db.execute("PRAGMA user_version").fetchone()[0] == 4
    db.close()


def test_an_index_opened_while_another_process_migrates_it_waits_and_migrates_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server and a worker started together after an upgrade open one file: the second waits for the
    first's migration past its 5 s busy timeout (a file of 10⁶ documents takes about 8 s), then reads the
    version that migration wrote. Before, it failed with "database is locked"; and it had read the version
    before waiting, so it would have run the migration again."""
    import time

    from memlane.adapters.local import index_schema
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    path = tmp_path / "i.sqlite3"
    _old_index_file(path, 3)
    statements = index_schema._statements

    def slow_for_the_first(script: str) -> list[str]:
        if threading.current_thread().name == "first" and script is index_schema._MIGRATE_3:
            time.sleep(6)  # past the other connection's busy timeout, inside the migration's transaction
        return statements(script)

    monkeypatch.setattr(index_schema, "_statements", slow_for_the_first)
    opened: list[EmbeddedIndex] = []
    first = threading.Thread(target=lambda: opened.append(EmbeddedIndex(path)), name="first")
    first.start()
    time.sleep(0.5)
    second = EmbeddedIndex(path)
    first.join()
    assert len(opened) == 1
    assert ids(search(second, "s1", "automobile").keyword) == ["car"] == ids(search(opened[0], "s1", "automobile").keyword)
    second.close(), opened[0].close()


def test_embedded_sees_writes_of_another_connection(tmp_path: Path) -> None:
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    reader, writer = EmbeddedIndex(tmp_path / "i.sqlite3"), EmbeddedIndex(tmp_path / "i.sqlite3")
    reader.ensure_store("s1", DIM)
    put(reader, "s1", mem("dog", "Bob adopted a puppy"))
    assert ids(search(reader, "s1", "canine").vector) == ["dog"]  # the reader's cache is warm now
    put(writer, "s1", mem("car", "Alice drives an automobile"))
    writer.delete("s1", ["dog"], app_id="app", tenant_id="t1")
    assert ids(search(reader, "s1", "sedan").vector) == ["car"]
    reader.close(), writer.close()


def test_embedded_is_safe_under_concurrent_use(tmp_path: Path) -> None:
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    idx = EmbeddedIndex(tmp_path / "i.sqlite3")
    idx.ensure_store("s1", DIM)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(40):
                put(idx, "s1", mem(f"w{t}-{i}", f"zebra worker{t} item{i}", tenant=f"t{t % 3}"))
                result = search(idx, "s1", f"worker{t} item{i}", tenant=f"t{t % 3}")
                assert f"w{t}-{i}" in ids(result.keyword) and f"w{t}-{i}" in ids(result.vector)
                if i % 4 == 0:
                    idx.delete("s1", [f"w{t}-{i}"], app_id="app", tenant_id=f"t{t % 3}")
        except BaseException as exc:  # surfaced below: threads swallow exceptions
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert idx.count("s1") == 8 * 30
    assert sum(len(both(search(idx, "s1", "zebra", tenant=f"t{t}", k=1000))) for t in range(3)) == 8 * 30
    idx.close()


def test_embedded_metadata_keys_are_literal(tmp_path: Path) -> None:
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    idx = EmbeddedIndex(tmp_path / "i.sqlite3")
    idx.ensure_store("s1", DIM)
    put(idx, "s1", mem("dot", "zebra", metadata={"a.b": "x", "a": {"b": "x"}, 'q"': "y"}))
    assert both(search(idx, "s1", "zebra", metadata={"a.b": "x"})) == {"dot"}
    assert both(search(idx, "s1", "zebra", metadata={'q"': "y"})) == {"dot"}
    assert both(search(idx, "s1", "zebra", metadata={"$.a": "x", "') OR 1=1 --": "x"})) == set()
    with pytest.raises(InvalidInput):
        search(idx, "s1", "zebra", metadata={"a": {"b": "x"}})
    idx.close()


@pytest.mark.parametrize(("text", "expected"), [
    ("hello world", ["hello", "world"]),
    ('text:foo NEAR("bar" baz)*', ["text", "foo", "near", "bar", "baz"]),
    ("Hello hello HELLO", ["hello"]),
    ("the cat is on the mat", ["cat", "mat"]),  # English stop words, as OpenSearch's analyzer
    ("to be or not to be", []),
    # A possessive is its word, as OpenSearch's english_possessive_stemmer reads it: no bare "s" to
    # match every "that's" and "it's" (a closing remark outranked the current fact by it).
    ("Who is the user's employer?", ["who", "user", "employ"]),
    ("Caroline’s dog", ["carolin", "dog"]),
    ("running runs", ["run", "run"]),  # two words of one stem count twice, as in FTS5's and OpenSearch's OR
    ("  -- ** ()", []),
    ("", []),
])
def test_embedded_query_terms(text: str, expected: list[str]) -> None:
    """The stems the keyword half looks for (hashes of them): the search words, stemmed."""
    from memlane.adapters.local.index_terms import query_terms

    assert query_terms(text) == [hash(t) for t in expected]


def test_a_query_keeps_its_first_64_tokens_however_its_words_join_them() -> None:
    """One word of many tokens ("w0_w1_...": an underscore joins a word, not a token) is cut too: the cap
    bounds the terms a search scores under the index's lock."""
    from memlane.domain.analysis import query_tokens

    assert query_tokens("_".join(f"w{i}" for i in range(1000))) == [f"w{i}" for i in range(64)]
    assert len(query_tokens(" ".join(f"a{i}_b{i}" for i in range(100)))) == 64


@pytest.mark.parametrize(("agents", "metadata"), [
    (None, None), (("mid",), None), (("rare",), None), (None, {"bucket": 3}), (("mid", "rare"), {"bucket": [0, 5]}),
])
@pytest.mark.parametrize("k", [1, 10, 40])
def test_embedded_vector_search_is_exact(tmp_path: Path, agents: tuple[str, ...] | None,
                                         metadata: dict[str, Any] | None, k: int) -> None:
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    idx = EmbeddedIndex(tmp_path / "i.sqlite3")
    idx.ensure_store("s1", DIM)
    docs = crowd()
    idx.upsert("s1", [(m, embed(m.text)) for m in docs])

    def keep(m: Memory) -> bool:
        bucket = (metadata or {}).get("bucket")
        return ((agents is None or m.scope.agent_id in agents)
                and (bucket is None or m.metadata["bucket"] in (bucket if isinstance(bucket, list) else [bucket])))

    for text in ("puppy dog canine", "guitar song filler3", "espresso flight"):
        expected = brute_force(docs, text, keep)[:k]
        got = search(idx, "s1", text, agents=agents, metadata=metadata, k=k).vector
        # Same scores in the same order (ids may swap only among equal scores).
        assert [h.score for h in got] == pytest.approx([s for _, s in expected], abs=1e-4)
        exact = dict(brute_force(docs, text, keep))
        assert all(h.score == pytest.approx(exact[h.memory_id], abs=1e-4) for h in got)
    idx.close()


# ---------------------------------------------------------------------------------------------
# Keyword ranking: one formula on every backend (docs/benchmarks.md, "Backend parity")
# ---------------------------------------------------------------------------------------------

# Words chosen so that no two share a stem: the reference below needs no stemmer.
RANKED = [
    mem("kw-twice", "Met someone new", keywords="alpha alpha"),
    mem("text-once", "Talked about alpha"),
    mem("split", "Alpha plans with the team", keywords="beta"),
    mem("long", "alpha and the rest of it was a very long story about beta and then some more"),
    mem("g1", "gamma here", keywords="delta"),
    mem("g2", "gamma there too"),
    mem("g3", "gamma gamma everywhere", keywords="beta"),
    mem("g4", "quiet gamma"),
    mem("g5", "nothing but gamma", keywords="alpha"),
]


def fts5_bm25(docs: list[Memory], query: str) -> list[tuple[str, float]]:
    """SQLite FTS5's bm25 (k1 1.2, b 0.75, idf log((N - n + 0.5) / (n + 0.5)) floored at 1e-6) over one
    row of text + keywords, whose length also counts the tenant token each embedded row carries;
    query words OR-ed, English stop words dropped. Best first, ties by id."""
    from memlane.domain.language import LUCENE_STOP_WORDS

    def tokens(text: str) -> list[str]:
        return re.findall(r"[^\W_]+", text.lower())

    rows = {d.memory_id: tokens(d.text) + tokens(d.keywords) for d in docs}
    lengths = {mid: len(t) + 1 for mid, t in rows.items()}
    avgdl = sum(lengths.values()) / len(rows)
    words = [w for w in dict.fromkeys(tokens(query)) if w not in LUCENE_STOP_WORDS]
    scores: dict[str, float] = {}
    for word in words:
        n = sum(word in t for t in rows.values())
        idf = max(math.log((len(rows) - n + 0.5) / (n + 0.5)), 1e-6)
        for mid, t in rows.items():
            f = t.count(word)
            if f:
                norm = f + 1.2 * (1 - 0.75 + 0.75 * lengths[mid] / avgdl)
                scores[mid] = scores.get(mid, 0.0) + idf * f * 2.2 / norm
    return sorted(scores.items(), key=lambda s: (-s[1], s[0]))


@pytest.mark.parametrize("query", ["alpha", "alpha beta", "gamma alpha", "the beta and gamma", "delta everywhere"])
def test_keyword_ranking_is_fts5_bm25_over_text_and_keywords(index: Index, query: str) -> None:
    """Both backends score a keyword hit the same way: the keywords field counts like the text (not
    text^2, not the best of the two fields), a word in most documents weighs almost nothing (FTS5's
    idf), stop words count in a document's length — so the same documents come back in the same
    order with the same scores, whichever index holds them."""
    index.ensure_store("s3", DIM)
    put(index, "s3", *RANKED)
    expected = fts5_bm25(RANKED, query)
    found = [(h.memory_id, h.score) for h in search(index, "s3", query, with_vector=False).keyword]
    assert [mid for mid, _ in found] == [mid for mid, _ in expected]
    assert [s for _, s in found] == pytest.approx([s for _, s in expected], rel=1e-4)


def test_messages_apart_leave_out_those_threads_messages_and_summary_only(records: Index) -> None:
    """A thread that stores nothing in long-term memory keeps its turns to itself: its messages — and its summary,
    which quotes them (a trial found a thread switched to `none` recalled through it) — are left out of a search
    made elsewhere; that agent's thread of that id only; its memories are not."""
    every = (RecordType.MEMORY, MESSAGE, SUMMARY)
    assert both(search(records, "s1", "zebra", record_types=every, messages_apart=(("a1", "r1"),))) == {
        "m-fact", "m-pref", "msg-2"}
    assert both(search(records, "s1", "zebra", record_types=every, messages_apart=(("a2", "r1"), ("a1", "r2")))) == {
        "m-fact", "m-pref", "msg-1", "msg-2", "sum-1"}  # other agents' threads of those ids: none of these
    assert both(search(records, "s1", "zebra", record_types=every, messages_apart=(("a1", "r1"), ("a2", "r2")))) == {
        "m-fact", "m-pref"}
