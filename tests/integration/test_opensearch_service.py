"""The real ingest → extract → search path on OpenSearch: the embedded table, the OpenSearch index
and the local MiniLM model, nothing mocked. Plus large batches and reindex from the table."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.adapters.opensearch.documents import alias_name
from memlane.domain.models import Memory, MemoryStatus
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery
from memlane.services import ingest, memories, search, stores
from memlane.services.reindex import reindex

pytestmark = pytest.mark.integration

U1 = {"app_id": "app", "tenant_id": "u1"}
U2 = {"app_id": "app", "tenant_id": "u2"}
FACTS = [
    ("r1", "I adopted a beagle named Max last Saturday.", {"topic": "pets"}),
    ("r1", "I work as a nurse at St. Mary's hospital in Denver.", {"topic": "work"}),
    ("r2", "My favourite food is spicy Thai green curry.", {"topic": "food"}),
    ("r2", "I am training for the Boston marathon in April.", {"topic": "sport"}),
]


@pytest.fixture()
def store(os_deps) -> str:  # type: ignore[no-untyped-def]
    name = stores.create(os_deps, name="demo").name
    for run, text, meta in FACTS:
        task = ingest.add(os_deps, name, scope={**U1, "agent_id": "bot", "run_id": run}, metadata=meta,
                          messages=[{"role": "user", "name": "Ann", "content": text}], sync=True)
        assert task.status == "SUCCEEDED" and task.memory_ids
    ingest.add(os_deps, name, scope={**U2, "run_id": "r1"}, sync=True,
               messages=[{"role": "user", "name": "Bob", "content": "I adopted a beagle puppy called Rex."}])
    return name


def texts(hits) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.memory.text for h in hits]


def test_exact_phrase_and_paraphrase_are_both_found(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    exact = search.search(os_deps, store, query="Ann works as a nurse at St. Mary's hospital in Denver",
                          scope=U1, top_k=3)
    assert texts(exact)[0] == "Ann works as a nurse at St. Mary's hospital in Denver."
    # No word shared with any memory: only the vector signal can carry it.
    raw = os_deps.index.search(store, IndexQuery(scope=ScopeFilter(**U1), text="Which cuisine does she enjoy?"))
    assert raw.keyword == []
    paraphrase = search.search(os_deps, store, query="Which cuisine does she enjoy?", scope=U1, top_k=1)
    assert "curry" in paraphrase[0].memory.text
    assert 0.0 <= paraphrase[0].similarity <= 1.0


def test_extraction_reads_its_own_writes(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    # The same fact again, right after it was written: the neighbour lookup must see it (NOOP).
    again = ingest.add(os_deps, store, scope={**U1, "agent_id": "bot", "run_id": "r1"}, sync=True,
                       messages=[{"role": "user", "name": "Ann", "content": "I adopted a beagle named Max last Saturday."}])
    assert [o.action for o in again.outcomes] == ["NOOP"]


def test_tenants_never_see_each_other(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    hits = search.search(os_deps, store, query="Bob adopted a beagle puppy called Rex", scope=U1, top_k=10)
    assert hits and all(h.memory.scope.tenant_id == "u1" for h in hits)
    assert "Rex" not in " ".join(texts(hits))
    theirs = search.search(os_deps, store, query="Bob adopted a beagle puppy called Rex", scope=U2, top_k=10)
    assert texts(theirs) == ["Bob adopted a beagle puppy called Rex."]
    # Also at the index itself, both signals, however wide k is.
    raw = os_deps.index.search(store, IndexQuery(scope=ScopeFilter(**U2), text="Ann nurse beagle curry",
                                                 vector=os_deps.embedder.embed(["Ann nurse"])[0], k=100))
    assert len(raw.keyword) == len(raw.vector) == 1


def test_filters_run_in_the_engine(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    work = search.search(os_deps, store, query="Ann", scope=U1, filters={"topic": "work"}, top_k=10)
    assert texts(work) == ["Ann works as a nurse at St. Mary's hospital in Denver."]
    either = search.search(os_deps, store, query="Ann", scope=U1, filters={"topic": ["food", "sport"]}, top_k=10)
    assert len(either) == 2
    r2 = search.search(os_deps, store, query="Ann", scope={**U1, "run_id": "r2"}, top_k=10)
    assert r2 and all(h.memory.scope.run_id == "r2" for h in r2)


def test_a_message_is_searchable_on_opensearch_as_soon_as_it_is_added(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    thread = {**U1, "agent_id": "bot", "run_id": "r3"}
    task = ingest.add(os_deps, store, scope=thread,
                      messages=[{"role": "user", "name": "Ann", "content": "My locker combination is 4417."}])
    assert task.status == "PENDING"  # not extracted: nothing but the add has run
    [hit] = search.search(os_deps, store, query="locker combination", scope=thread, record_types=["message"],
                          exact_thread_match=True)
    assert hit.memory.memory_id == task.message_ids[0] and hit.message.name == "Ann"
    assert "4417" not in " ".join(texts(search.search(os_deps, store, query="locker combination", scope=U1)))
    assert search.search(os_deps, store, query="locker combination", scope={**U2, "run_id": "*"},
                         record_types=["message"], min_similarity=0.5) == []


def test_deleted_memory_leaves_the_index(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    [hit] = search.search(os_deps, store, query="beagle Max", scope=U1, top_k=1)
    memories.delete(os_deps.for_tenant(store, "app", "u1"), store, app_id="app", tenant_id="u1",
                    memory_id=hit.memory.memory_id)
    raw = os_deps.index.search(store, IndexQuery(scope=ScopeFilter(**U1), text="beagle Max", k=10))
    assert hit.memory.memory_id not in [h.memory_id for h in raw.keyword]


def test_large_batch_is_indexed_and_searchable(os_deps) -> None:  # type: ignore[no-untyped-def]
    name = stores.create(os_deps, name="bulk").name
    n = 3000
    now = datetime.now(UTC)
    docs = [Memory(memory_id=f"b{i:04d}", scope=Scope(app_id="app", tenant_id=f"t{i % 3}"),
                   text=f"Batch note {i}: the customer prefers code{i:04d} for item {i % 97}",
                   created_at=now, updated_at=now) for i in range(n)]
    # Model-sized vectors from the hashing embedder: this test is about indexing, and MiniLM
    # would spend most of a minute embedding 3,000 texts on a laptop.
    vectors = HashingEmbedder(dim=os_deps.embedder.dim).embed([d.text for d in docs])
    started = time.perf_counter()
    os_deps.index.upsert(name, list(zip(docs, vectors)))
    took = time.perf_counter() - started
    alias = alias_name(os_deps.index.prefix, name)
    assert os_deps.index.client.count(index=alias)["count"] == n
    for t in range(3):
        every = os_deps.index.search(name, IndexQuery(scope=ScopeFilter(app_id="app", tenant_id=f"t{t}"),
                                                      text="batch", vector=vectors[t], k=n))
        assert len(every.keyword) == len(every.vector) == n // 3
    for i in range(0, n, 149):
        hits = os_deps.index.search(name, IndexQuery(scope=ScopeFilter(app_id="app", tenant_id=f"t{i % 3}"),
                                                     text=f"code{i:04d}", k=3))
        assert [h.memory_id for h in hits.keyword] == [f"b{i:04d}"]
    print(f"\nbulk-indexed {n} docs ({len(vectors[0])} dims) in {took:.2f}s")


def test_reindex_restores_search_after_the_index_is_dropped(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    # One superseded memory (searchable when asked for) and one deleted (gone, never indexed again).
    now = datetime.now(UTC)
    old = Memory(memory_id="old-fact", scope=Scope(app_id="app", tenant_id="u1", agent_id="bot", run_id="r1"),
                 text="Ann used to live in Chicago.", created_at=now, updated_at=now, status=MemoryStatus.SUPERSEDED)
    os_deps.repo.put_memory(store, old)
    [gone] = search.search(os_deps, store, query="Boston marathon", scope=U1, top_k=1)
    memories.delete(os_deps.for_tenant(store, "app", "u1"), store, app_id="app", tenant_id="u1",
                    memory_id=gone.memory.memory_id)
    before = {q: texts(search.search(os_deps, store, query=q, scope=scope, top_k=3))
              for q, scope in [("beagle", U1), ("Which cuisine does she enjoy?", U1), ("Rex", U2)]}

    os_deps.index.drop_store(store)
    assert search.search(os_deps, store, query="beagle", scope=U1, top_k=3) == []

    lines: list[str] = []
    report = reindex(os_deps, store, progress=lines.append)
    assert (report.tenants, report.indexed, report.skipped) == (2, 5, 0)  # a deleted memory left the table too
    assert lines and "done" in lines[-1]
    after = {q: texts(search.search(os_deps, store, query=q, scope=scope, top_k=3))
             for q, scope in [("beagle", U1), ("Which cuisine does she enjoy?", U1), ("Rex", U2)]}
    assert after == before
    assert "Ann used to live in Chicago." in texts(search.search(os_deps, store, query="Chicago", scope=U1,
                                                                 top_k=3, include_superseded=True))
    raw = os_deps.index.search(store, IndexQuery(scope=ScopeFilter(**U1), text="Boston marathon", k=10,
                                                 statuses=tuple(MemoryStatus)))
    assert gone.memory.memory_id not in [h.memory_id for h in raw.keyword]


def test_cli_reindex_prints_progress(tmp_path: Path, minilm, opensearch_url: str,  # type: ignore[no-untyped-def]
                                     monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`memlane reindex STORE --data-dir DIR` on the adapters the environment configures."""
    import uuid

    from memlane import cli
    from memlane.bootstrap import build
    from memlane.config import Settings

    name = f"it-cli-{uuid.uuid4().hex[:8]}"
    settings = Settings.from_env(env={}, data_dir=tmp_path, opensearch_url=opensearch_url)
    deps = build(settings, embedder=minilm)
    try:
        stores.create(deps, name=name)
        ingest.add(deps, name, scope=U1, text="Ann adopted a beagle named Max.", sync=True)
        deps.index.drop_store(name)
        monkeypatch.setenv("MEMLANE_OPENSEARCH_URL", opensearch_url)
        monkeypatch.setenv("MEMLANE_EMBEDDER", "minilm")
        assert cli.main(["reindex", name, "--data-dir", str(tmp_path)]) == 0
        out = capsys.readouterr()
        assert f"reindexed {name}: 1 memories of 1 tenants" in out.out
        assert "index dropped and re-created" in out.err
        assert texts(search.search(deps, name, query="beagle", scope=U1, top_k=1)) == \
            ["Ann adopted a beagle named Max."]
    finally:
        deps.index.drop_store(name)


def test_explicit_writes_and_thread_deletion_on_opensearch(os_deps) -> None:  # type: ignore[no-untyped-def]
    from memlane.services import explicit, threads

    name = stores.create(os_deps, name="explicit").name
    threads.create(os_deps, name, scope={**U1, "agent_id": "bot"}, thread_id="t-1")
    explicit.write(os_deps, name, scope={**U1, "agent_id": "bot", "run_id": "t-1"},
                   memories=[{"text": "Ann's gate code for the Lisbon flat is 4471.", "memory_id": "gate"}])
    explicit.write(os_deps, name, scope=U1, memories=[{"text": "Ann's loyalty number is TP-448812.",
                                                      "memory_id": "loyalty"}])
    found = search.search(os_deps, name, query="gate code Lisbon flat", scope=U1, top_k=2)  # at once: no job
    assert found[0].memory.memory_id == "gate" and found[0].memory.origin == "explicit"
    assert threads.delete(os_deps, name, app_id="app", tenant_id="u1", thread_id="t-1")["memories"] == 1
    left = search.search(os_deps, name, query="gate code Lisbon flat loyalty number", scope=U1, top_k=5)
    assert [h.memory.memory_id for h in left] == ["loyalty"]
    assert search.search(os_deps, name, query="loyalty number", scope=U2, top_k=5) == []


def test_a_context_card_recalls_over_opensearch_within_the_budget(os_deps, store) -> None:  # type: ignore[no-untyped-def]
    from memlane.services import context

    card = context.build(os_deps.for_tenant(store, "app", "u1"), store, app_id="app", tenant_id="u1",
                         thread_id="r2", query="what pet does Ann have?", budget_tokens=120)

    assert any("beagle" in e.text for e in card.kept["memories"])  # from the other thread, r1
    assert "Rex" not in card.text and card.total <= 120  # never the other tenant's beagle
