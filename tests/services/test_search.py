"""Search: hybrid retrieval under scope, filters, similarity, evidence, table-as-truth."""

import pytest

from memlane.domain.errors import InvalidInput, InvalidScope, NotFound
from memlane.services import ingest, memories, search, stores

BASE = {"app_id": "app", "tenant_id": "u1"}


@pytest.fixture()
def store(service, deps):
    name = stores.create(deps, name="demo").name
    facts = [
        ("r1", "I adopted a beagle named Max last Saturday.", {"topic": "pets"}),
        ("r1", "I work as a nurse at St. Mary's hospital in Denver.", {"topic": "work"}),
        ("r2", "My favourite food is spicy Thai green curry.", {"topic": "food"}),
        ("r2", "I am training for the Boston marathon in April.", {"topic": "sport"}),
    ]
    for run, text, meta in facts:
        ingest.add(deps, name, scope={**BASE, "agent_id": "bot", "run_id": run}, metadata=meta,
                   messages=[{"role": "user", "name": "Ann", "content": text}])
    ingest.add(deps, name, scope={"app_id": "app", "tenant_id": "u2", "run_id": "r1"},
               messages=[{"role": "user", "name": "Bob", "content": "I adopted a beagle puppy called Rex."}])
    service.drain()
    return name


def texts(hits):
    return [h.memory.text for h in hits]


def test_keyword_and_paraphrase_both_found(deps, store):
    assert "beagle" in texts(search.search(deps, store, query="beagle", scope=BASE, top_k=1))[0]
    # no shared content word: the vector signal carries it
    top = search.search(deps, store, query="what does Ann like to eat?", scope=BASE, top_k=1)
    assert "curry" in top[0].memory.text


def test_scores_and_similarity_are_bounded_and_ordered(deps, store):
    hits = search.search(deps, store, query="Ann's dog", scope=BASE, top_k=4)
    assert 1 <= len(hits) <= 4
    assert all(0.0 <= h.similarity <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_never_returns_another_tenant(deps, store):
    hits = search.search(deps, store, query="beagle puppy Rex", scope=BASE, top_k=10)
    assert all(h.memory.scope.tenant_id == "u1" for h in hits)
    assert "Rex" not in " ".join(texts(hits))


def test_run_filters(deps, store):
    only_r2 = search.search(deps, store, query="Ann", scope={**BASE, "run_id": "r2"}, top_k=10)
    assert only_r2 and all(h.memory.scope.run_id == "r2" for h in only_r2)
    both = search.search(deps, store, query="Ann", scope={**BASE, "run_id": ["r1", "r2"]}, top_k=10)
    assert {h.memory.scope.run_id for h in both} == {"r1", "r2"}


def test_metadata_and_type_filters(deps, store):
    hits = search.search(deps, store, query="Ann", scope=BASE, filters={"topic": "work"}, top_k=10)
    assert texts(hits) == ["Ann works as a nurse at St. Mary's hospital in Denver."] or \
        all("nurse" in t for t in texts(hits))
    prefs = search.search(deps, store, query="Ann", scope=BASE, memory_types=["preference"], top_k=10)
    assert prefs and all(h.memory.memory_type == "preference" for h in prefs)


def test_min_similarity_drops_weak_hits(deps, store):
    all_hits = search.search(deps, store, query="nurse hospital job", scope=BASE, top_k=10)
    strong = search.search(deps, store, query="nurse hospital job", scope=BASE, top_k=10, min_similarity=0.5)
    assert len(strong) < len(all_hits) and all(h.similarity >= 0.5 for h in strong)


def test_a_keyword_search_compares_min_similarity_with_real_cosines(deps, store):
    """With recipe keyword the query was never embedded: every similarity was 0 and any min_similarity dropped
    every hit."""
    strong = search.search(deps, store, query="nurse hospital", scope=BASE, top_k=10, recipe="keyword",
                           min_similarity=0.1)
    assert strong and all(h.similarity >= 0.1 for h in strong)
    assert any("nurse" in t for t in texts(strong))
    vector = search.search(deps, store, query="nurse hospital", scope=BASE, top_k=10, recipe="hybrid")
    cosine = {h.memory.memory_id: h.similarity for h in vector}
    assert all(h.similarity == cosine[h.memory.memory_id] for h in strong if h.memory.memory_id in cosine)


def test_include_evidence_returns_source_messages(deps, store):
    [hit] = search.search(deps, store, query="beagle", scope=BASE, top_k=1, include_evidence=True)
    assert hit.evidence and hit.evidence[0].content == "I adopted a beagle named Max last Saturday."
    assert hit.evidence[0].name == "Ann"


def test_deleted_memory_disappears(deps, store):
    [hit] = search.search(deps, store, query="beagle", scope=BASE, top_k=1)
    memories.delete(deps, store, app_id="app", tenant_id="u1", memory_id=hit.memory.memory_id)
    assert "beagle" not in " ".join(texts(search.search(deps, store, query="beagle", scope=BASE)))


def test_updated_memory_is_searchable_by_its_new_text(deps, store):
    [hit] = search.search(deps, store, query="marathon", scope=BASE, top_k=1)
    memories.update(deps, store, app_id="app", tenant_id="u1", memory_id=hit.memory.memory_id,
                    text="Ann is training for the Chicago triathlon.")
    assert "triathlon" in search.search(deps, store, query="triathlon", scope=BASE, top_k=1)[0].memory.text


@pytest.mark.parametrize("kwargs, error", [
    ({"query": "x", "scope": {"app_id": "app"}}, InvalidScope),
    ({"query": "x", "scope": {**BASE, "tenant_id": "*"}}, InvalidScope),
    ({"query": "", "scope": BASE}, InvalidInput),
    ({"query": "x", "scope": BASE, "top_k": 0}, InvalidInput),
    ({"query": "x", "scope": BASE, "top_k": 101}, InvalidInput),
    ({"query": "x", "scope": BASE, "min_similarity": 1.5}, InvalidInput),
    ({"query": "x", "scope": BASE, "recipe": "magic"}, InvalidInput),
])
def test_bad_search_refused(deps, store, kwargs, error):
    with pytest.raises(error):
        search.search(deps, store, **kwargs)


def test_unknown_store_is_404(deps):
    with pytest.raises(NotFound):
        search.search(deps, "nope", query="x", scope=BASE)


def test_later_conversation_recalls_earlier_fact(service, deps, store):
    """The product promise: a fact told in one conversation comes back in a later one, with evidence."""
    hits = search.search(deps, store, query="Where does Ann work?", scope={**BASE, "run_id": "*"}, top_k=3,
                         include_evidence=True)
    assert "nurse" in hits[0].memory.text and hits[0].evidence[0].role == "user"


@pytest.mark.parametrize("top_k", [10, 100])
def test_the_index_is_asked_for_what_fusion_takes_whatever_top_k(deps, store, monkeypatch, top_k):
    """The k-NN half is the cost of an OpenSearch search and grows with k (docs/benchmarks.md, "OpenSearch at
    10⁵ and 10⁶"): each signal is asked for the recipe's candidates, no more. A vector k grown with top_k
    (10 × top_k) only bought cosines for hits fusion had found anyway."""
    from memlane.policies.ranking import RECIPES

    asked = []
    real = deps.index.search
    monkeypatch.setattr(deps.index, "search", lambda store_, q: asked.append((q.k, q.keyword_k)) or real(store_, q))
    search.search(deps, store, query="Ann's dog", scope=BASE, top_k=top_k)
    assert asked == [(RECIPES[deps.settings.default_recipe].candidates, None)]


def test_a_hit_past_the_vector_list_has_its_cosine_read_from_the_index(deps, store, monkeypatch):
    """A keyword hit the vector list did not reach still reports its real similarity: the cosine of the
    query with the vector the index holds, read from the index (one more index read), never by running
    the model on its text again (which cost a top_k 10 search ~30-60 ms on 2 cores)."""
    import dataclasses

    from memlane.policies.ranking import RECIPES

    plan = RECIPES[deps.settings.default_recipe]
    monkeypatch.setitem(RECIPES, plan.name, dataclasses.replace(plan, candidates=2, rerank=False))
    embedded, read = [], []
    embed, similarities = deps.embedder.embed, deps.index.similarities
    monkeypatch.setattr(deps.embedder, "embed", lambda texts: embedded.append(list(texts)) or embed(texts))
    monkeypatch.setattr(deps.index, "similarities",
                        lambda *a: read.append(list(a[3])) or similarities(*a))
    query = "Saturday"  # keyword hits: two memories; vector hits: one of them and a third
    hits = search.search(deps, store, query=query, scope=BASE, top_k=3)
    assert embedded == [[query]]  # the query alone
    assert len(hits) == 3 and len(read) == 1 and len(read[0]) == 1
    (qvec,) = embed([query])
    for hit in hits:
        (vec,) = embed([hit.memory.text])
        assert hit.similarity == pytest.approx(max(0.0, sum(a * b for a, b in zip(qvec, vec))), abs=1e-4)
