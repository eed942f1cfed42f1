"""The embedded index's ANN graphs (adapters/local/index_ann.py, docs/adr/0002-ann-index.md).

Tenants here are made "large" by a low `ann_min_rows`, and graphs are built in the caller's thread
(`ann_background=False`), so every search after the first one goes through the graph. faiss-cpu
comes with the `local` extra, which the test install includes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane.adapters.local import index_ann
from memlane.adapters.local.embedded_index import EmbeddedIndex
from memlane.domain.models import Memory
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery

DIM = 32
T0 = datetime(2024, 1, 1, tzinfo=UTC)
KEY = ("s", "app", "t1")


def vectors(n: int, seed: int = 1) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def mem(i: int, agent: str = "a", tenant: str = "t1") -> Memory:
    scope = Scope(app_id="app", tenant_id=tenant, agent_id=agent, run_id="r")
    return Memory(memory_id=f"m{i:05d}", scope=scope, text=f"memory {i}", created_at=T0, updated_at=T0)


def open_index(path: Path, **kw: object) -> EmbeddedIndex:
    idx = EmbeddedIndex(path / "index.db", ann_min_rows=kw.pop("ann_min_rows", 100), ann_background=False, **kw)
    idx.ensure_store("s", DIM)
    return idx


def load(idx: EmbeddedIndex, x: np.ndarray, start: int = 0, agent_of=lambda i: "a") -> None:
    idx.upsert("s", [(mem(start + j, agent_of(start + j)), x[j].tolist()) for j in range(len(x))])


def vector_search(idx: EmbeddedIndex, q: np.ndarray, k: int = 10, **scope: object) -> list[tuple[str, float]]:
    query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1", **scope), text="", vector=q.tolist(), k=k)
    return [(h.memory_id, h.score) for h in idx.search("s", query).vector]


def exact(x: np.ndarray, q: np.ndarray, k: int, rows: np.ndarray | None = None) -> list[str]:
    rows = np.arange(len(x)) if rows is None else rows
    scores = x[rows] @ q
    return [f"m{rows[i]:05d}" for i in np.argsort(-scores)[:k]]



def with_graph(idx: Any, x: Any) -> None:
    """1,000 rows, and a search that builds (and saves) their graph."""
    load(idx, x[:1000])
    vector_search(idx, x[0])


def grown_past_its_graph(tmp_path: Path, rows: int) -> tuple[Any, Any]:
    """An index whose graph holds the first 1,000 of `rows` rows; the rest were written after it."""
    x = vectors(rows)
    idx = open_index(tmp_path)
    with_graph(idx, x)
    load(idx, x[1000:], start=1000)
    return x, idx

def test_large_tenant_is_searched_through_its_graph_with_high_recall(tmp_path: Path) -> None:
    x = vectors(2000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[0])  # exact, and builds the graph
    assert KEY in idx._graphs
    qs = vectors(50, seed=9)
    recall = np.mean([len({m for m, _ in vector_search(idx, q)} & set(exact(x, q, 10))) / 10 for q in qs])
    assert recall >= 0.98
    idx.close()


def spy_walks(idx: Any) -> list[tuple[int, Any]]:
    """(k, allowed) of every walk of the tenant's graph from now on."""
    walks: list[tuple[int, Any]] = []
    search = idx._graphs[KEY].search
    idx._graphs[KEY].search = lambda q, k, allowed=None: walks.append((k, allowed)) or search(q, k, allowed)
    return walks


def test_a_scope_holding_few_of_the_vectors_still_gets_k_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agent b owns 5% of the tenant: even the widest unfiltered walk (WIDEST × k = 160 candidates) holds
    ~8 of them, so the filter must run inside the walk (more allowed ids than EXACT_FRACTION) — never a
    post-filter short of k."""
    monkeypatch.setattr(index_ann, "EXACT_FRACTION", 0.02)  # this share goes into the walk, not the exact path
    x = vectors(3000)
    idx = open_index(tmp_path)
    load(idx, x, agent_of=lambda i: "b" if i % 20 == 0 else "a")
    vector_search(idx, x[3])
    assert KEY in idx._graphs
    walks = spy_walks(idx)
    b_rows = np.flatnonzero(np.arange(3000) % 20 == 0)
    for q in vectors(20, seed=5):
        got = vector_search(idx, q, agent_ids=("b",))
        assert len(got) == 10
        assert all(int(m[1:]) % 20 == 0 for m, _ in got)
        assert len({m for m, _ in got} & set(exact(x, q, 10, b_rows))) >= 9
    assert any(a is not None and len(a) == 150 for _, a in walks)  # the filter went inside the walk


def test_a_filter_letting_a_share_through_widens_the_walk_as_that_share_asks(tmp_path: Path) -> None:
    """Agent b owns 15%: a walk sized for an open filter holds too few of its rows, so the next is
    wider, and the tenant's next search starts at the width its share needs — no read of the allowed
    ids, and the filtered top k as found by the exact scan."""
    x = vectors(3000)
    idx = open_index(tmp_path)
    load(idx, x, agent_of=lambda i: "b" if i % 20 in (0, 1, 2) else "a")
    vector_search(idx, x[3])
    walks = spy_walks(idx)
    b_rows = np.flatnonzero(np.arange(3000) % 20 < 3)
    for q in vectors(20, seed=5):
        got = vector_search(idx, q, agent_ids=("b",))
        assert len({m for m, _ in got} & set(exact(x, q, 10, b_rows))) >= 9
    assert all(a is None for _, a in walks)
    first, *later = [k for k, _ in walks]
    assert first < 40 and max(later) <= 160 and sum(later) / len(later) < 120, walks


def test_an_open_filter_checks_about_k_candidates_of_the_graph(tmp_path: Path) -> None:
    """Every row passes: the walk asks for little more than k (it asked for 4 × k before: a walk
    and a SQL check four times the size, most of a search at 10⁵; docs/benchmarks.md §2)."""
    x = vectors(3000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[3])
    walks = spy_walks(idx)
    for q in vectors(10, seed=5):
        assert len(vector_search(idx, q, k=100)) == 100
    assert [k for k, _ in walks] == [128] * 10


def test_a_tiny_scope_of_a_large_tenant_is_scored_exactly(tmp_path: Path) -> None:
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x, agent_of=lambda i: "b" if i < 7 else "a")
    vector_search(idx, x[100])
    got = vector_search(idx, x[500], agent_ids=("b",))
    assert [m for m, _ in got] == exact(x, x[500], 7, np.arange(7))


def test_deleted_and_replaced_documents_never_come_back(tmp_path: Path) -> None:
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[0])
    assert KEY in idx._graphs
    idx.delete("s", ["m00005"], app_id="app", tenant_id="t1")
    got = vector_search(idx, x[5])
    assert "m00005" not in [m for m, _ in got] and len(got) == 10
    # Replaced: the same memory id with another vector is found by the new one, never by the old.
    idx.upsert("s", [(mem(7), (-x[7]).tolist())])
    assert "m00007" not in [m for m, _ in vector_search(idx, x[7])]
    assert vector_search(idx, -x[7])[0][0] == "m00007"
    assert vector_search(idx, -x[7])[0][1] == pytest.approx(1.0, abs=1e-5)


def test_rows_written_after_the_graph_are_found(tmp_path: Path) -> None:
    x, idx = grown_past_its_graph(tmp_path, 1200)
    assert vector_search(idx, x[1100])[0][0] == "m01100"


def test_graph_survives_reopening(tmp_path: Path) -> None:
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[0])
    idx.close()
    again = open_index(tmp_path)
    assert vector_search(again, x[3])[0][0] == "m00003"
    assert KEY in again._graphs  # loaded from its file, not rebuilt from a matrix
    assert again._cache.get(KEY) is None


def test_a_corrupt_graph_file_is_not_trusted(tmp_path: Path) -> None:
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[0])
    idx.close()
    (graph_file,) = (tmp_path / "index.db.ann").glob("*.faiss")
    data = bytearray(graph_file.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)  # still parses: only the digest tells
    graph_file.write_bytes(bytes(data))
    again = open_index(tmp_path, ann_min_rows=100)
    loaded: list[object] = []
    again._files.read = lambda *a, _r=again._files.read: loaded.append(_r(*a)) or loaded[-1]  # type: ignore[method-assign]
    assert [m for m, _ in vector_search(again, x[3])] == exact(x, x[3], 10)
    assert loaded == [None]


def test_a_stale_graph_file_is_not_trusted(tmp_path: Path) -> None:
    """An older graph file put back in place of the recorded one (a restored backup of the graph
    directory, another process's copy): its digest is not the recorded one, so it is ignored."""
    x = vectors(1200)
    idx = open_index(tmp_path)
    with_graph(idx, x)
    idx.close()
    (old,) = (tmp_path / "index.db.ann").glob("*.faiss")
    old_bytes = old.read_bytes()
    idx = open_index(tmp_path)
    idx.delete("s", [f"m{i:05d}" for i in range(100)], app_id="app", tenant_id="t1")  # few tombstones: the old graph would be kept
    load(idx, x[1000:], start=1000)
    vector_search(idx, x[0])
    idx.close()
    (new,) = (tmp_path / "index.db.ann").glob("*.faiss")
    new.write_bytes(old_bytes)
    again = open_index(tmp_path)
    for q in (x[1100], x[600], x[3]):
        got = [m for m, _ in vector_search(again, q)]
        live = np.arange(100, 1200)
        assert got == exact(x, q, 10, live)


def test_a_crash_leaves_the_graph_behind_the_table_and_reopening_catches_up(tmp_path: Path) -> None:
    x, idx = grown_past_its_graph(tmp_path, 1300)
    idx.delete("s", ["m00002"], app_id="app", tenant_id="t1")
    idx._db.close()  # no close(): the graph file stays at 1,000 rows
    again = open_index(tmp_path)
    assert vector_search(again, x[1250])[0][0] == "m01250"
    assert "m00002" not in [m for m, _ in vector_search(again, x[2])]


def test_dropping_the_store_drops_its_graphs(tmp_path: Path) -> None:
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[0])
    idx.drop_store("s")
    assert not list((tmp_path / "index.db.ann").glob("*.faiss"))
    idx.ensure_store("s", DIM)
    load(idx, x[:10])
    assert [m for m, _ in vector_search(idx, x[4])][:1] == ["m00004"]


def test_dropping_the_store_drops_the_graphs_not_loaded_since_the_start(tmp_path: Path) -> None:
    """A graph saved by an earlier process, its tenant not searched since this one started: its file (every
    vector of the tenant) goes with the store, and a store made again under the name starts without it."""
    x = vectors(1000)
    first = open_index(tmp_path)
    load(first, x)
    vector_search(first, x[0])
    first.close()
    assert list((tmp_path / "index.db.ann").glob("*.faiss"))
    again = open_index(tmp_path)
    again.drop_store("s")
    assert not list((tmp_path / "index.db.ann").glob("*.faiss"))


def test_fallback_without_the_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss → ImportError
    assert not index_ann.available()
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x)
    for q in (x[0], x[400]):
        assert [m for m, _ in vector_search(idx, q)] == exact(x, q, 10)
    assert not idx._graphs and not (tmp_path / "index.db.ann").exists()


def test_kill_9_during_a_bulk_write_loses_nothing_from_search(tmp_path: Path) -> None:
    writer = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_embedded_ann import open_index, load, vectors, vector_search
        from pathlib import Path
        x = vectors(20000)
        idx = open_index(Path({str(tmp_path)!r}))
        load(idx, x[:1000])
        vector_search(idx, x[0])  # the graph is built and saved
        for start in range(1000, 20000, 100):
            load(idx, x[start:start + 100], start=start)
            if start % 300 == 0:
                vector_search(idx, x[start])  # the graph catches up in memory, its file does not
            print(start + 100, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    committed = 0
    for line in proc.stdout:
        committed = int(line)
        if committed >= 3000:
            break
    proc.kill()  # SIGKILL mid-write
    proc.wait()
    assert committed >= 3000
    x = vectors(20000)
    again = open_index(tmp_path)
    # Every acknowledged memory (its batch's upsert returned before its count was printed) is found, first,
    # through the graph: the one on disk (1,000 rows) caught up from the table on reopening.
    lost = [i for i in range(committed) if vector_search(again, x[i], k=1)[0][0] != f"m{i:05d}"]
    assert lost == []
    assert KEY in again._graphs and again._graphs[KEY].size >= committed


def test_candidates_are_checked_by_id_not_by_scanning_the_tenant(tmp_path: Path) -> None:
    """The SQL check of the graph's (or the exact scan's) best rows must look them up by id: going
    through the scope index instead reads every row of the tenant per search, which is the whole
    cost of a search at 10⁵ (docs/benchmarks.md §2)."""
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[0])
    statements: list[str] = []
    idx._db.set_trace_callback(statements.append)
    vector_search(idx, x[1])
    idx._db.set_trace_callback(None)
    (check,) = [s for s in statements if "json_each" in s]
    plan = " | ".join(r[3] for r in idx._db.execute("EXPLAIN QUERY PLAN " + check))
    assert "SEARCH d USING INTEGER PRIMARY KEY" in plan and "docs_scope" not in plan, plan


def test_compaction_leaves_no_deleted_vector_in_a_graph_file(tmp_path: Path) -> None:
    """Erasure compacts the index so no deleted text or vector stays on disk; a graph keeps its
    tombstones' vectors, so compaction must not leave such a graph file behind."""
    x = vectors(1000)
    idx = open_index(tmp_path)
    load(idx, x)
    vector_search(idx, x[0])
    idx.close()
    idx = open_index(tmp_path)
    (secret,) = idx._db.execute("SELECT v.embedding FROM vectors v JOIN docs d ON d.id = v.doc_id "
                                "WHERE d.memory_id = 'm00042'").fetchone()
    assert any(secret in f.read_bytes() for f in (tmp_path / "index.db.ann").glob("*"))
    idx.delete("s", ["m00042"], app_id="app", tenant_id="t1")
    idx.compact()
    idx.close()
    assert not any(secret in f.read_bytes() for f in (tmp_path / "index.db.ann").glob("*"))
    again = open_index(tmp_path)
    assert "m00042" not in [m for m, _ in vector_search(again, x[42])]


def test_a_graph_built_from_before_a_deletion_is_not_written_after_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A trial found deleted vectors in a graph file after a restart: a background build took its snapshot, a
    delete and its compaction ran (no graph to drop yet), and the build then saved its graph, deleted rows and all."""
    import threading

    x = vectors(1000)
    idx = EmbeddedIndex(tmp_path / "index.db", ann_min_rows=100, ann_background=True)
    idx.ensure_store("s", DIM)
    load(idx, x)
    real, started, release = index_ann.Graph.build, threading.Event(), threading.Event()

    def paused(ids: Any, matrix: Any) -> Any:
        started.set()
        release.wait(30)
        return real(ids, matrix)

    monkeypatch.setattr(index_ann.Graph, "build", staticmethod(paused))
    vector_search(idx, x[0])  # exact, and starts the build from a snapshot
    assert started.wait(30)
    (secret,) = idx._db.execute("SELECT v.embedding FROM vectors v JOIN docs d ON d.id = v.doc_id "
                                "WHERE d.memory_id = 'm00042'").fetchone()
    idx.delete("s", ["m00042"], app_id="app", tenant_id="t1")
    idx.compact()
    release.set()
    for _ in range(300):
        with idx._lock:
            if not idx._building:
                break
        threading.Event().wait(0.1)
    idx.close()
    assert not any(secret in f.read_bytes() for f in (tmp_path / "index.db.ann").glob("*"))
    again = open_index(tmp_path)
    assert "m00042" not in [m for m, _ in vector_search(again, x[42])]
    assert [m for m, _ in vector_search(again, x[7])][0] == "m00007"  # the tenant is searched as before


def test_a_search_of_a_large_graph_passes_the_ef_of_its_size_to_faiss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """efSearch grows with the graph (recall@10 0.924 at 10⁶ rows with a fixed 128): both walks — the
    unfiltered one and the one with the scope inside — ask faiss for the ef of the graph's size."""
    import faiss

    # A 3,000-row graph counts as large here; the rule's real steps are 10⁵ rows and more.
    monkeypatch.setattr(index_ann, "EF_SEARCH_BY_ROWS", ((2_000, 64), (10_000, 300)), raising=False)
    monkeypatch.setattr(index_ann, "EXACT_FRACTION", 0.1)  # agent b's 15 % goes into the walk
    asked: list[int] = []
    params = faiss.SearchParametersHNSW
    monkeypatch.setattr(faiss, "SearchParametersHNSW", lambda **kw: asked.append(kw["efSearch"]) or params(**kw))
    x = vectors(3000)
    idx = open_index(tmp_path)
    load(idx, x, agent_of=lambda i: "b" if i % 20 in (0, 1, 2) else "a")
    vector_search(idx, x[3])  # exact, and builds the graph
    assert KEY in idx._graphs
    vector_search(idx, x[4])
    vector_search(idx, x[5], agent_ids=("b",))
    assert len(asked) >= 3 and set(asked) == {300}
    idx.close()


@pytest.mark.parametrize(("rows", "ef"), [(20_000, 128), (100_000, 128), (100_001, 256), (500_000, 256),
                                          (500_001, 512), (1_000_000, 512), (3_000_000, 1024)])
def test_ef_search_grows_with_the_graph_as_measured(rows: int, ef: int) -> None:
    """Each step is the ef that gave recall@10 ≥ 0.98 (with margin) at the largest size of the step
    (bench/results/ann-ef-sweep*.json: 10⁶ rows gave 0.888 at ef 128, 0.978 at 384, 0.994 at 512;
    5×10⁵ rows 0.970 at 128, 0.995 at 256)."""
    assert index_ann.ef_search(rows, 10) == ef


def test_ef_search_is_never_shorter_than_k() -> None:
    assert index_ann.ef_search(20_000, 700) == 700


def test_a_filtered_walk_returns_only_allowed_ids_whatever_their_range() -> None:
    """The filter inside the walk is a bitmap of the allowed doc ids (`index_ann.id_bitmap`): every id the
    graph returns is allowed, ids far past the graph's and none at all are handled, and the answer is the
    exact filtered top k on these well-separated vectors."""
    x = vectors(3000)
    ids = np.arange(1, 3001, dtype=np.int64) * 7  # doc ids are sparse: rows of other tenants between them
    graph = index_ann.Graph.build(ids, x)
    rng = np.random.default_rng(5)
    allowed = np.concatenate([rng.choice(ids, 900, replace=False), [10**7]])  # one id no node has
    for q in x[:20]:
        found, _ = graph.search(q, 10, allowed=allowed)
        member = np.isin(ids, allowed)
        exact = ids[member][np.argsort(-(x[member] @ q))[:10]]
        assert set(found.tolist()) <= set(allowed.tolist()) and len(found) == 10
        assert len(set(found.tolist()) & set(exact.tolist())) >= 9
    found, _ = graph.search(x[0], 10, allowed=np.empty(0, dtype=np.int64))
    assert found.size == 0


def test_the_id_bitmap_holds_exactly_the_ids_it_was_given() -> None:
    ids = np.array([0, 1, 8, 9, 63, 64, 1000], dtype=np.int64)
    bits = index_ann.id_bitmap(ids)
    members = {i for i in range(1100) if i // 8 < bits.size and bits[i // 8] >> (i % 8) & 1}
    assert members == set(ids.tolist())
    assert index_ann.id_bitmap(np.empty(0, dtype=np.int64)).size == 0


def test_concurrent_searches_of_tenants_whose_filters_pass_other_shares_each_get_their_own_answer(tmp_path: Path) -> None:
    """The width of a tenant's first walk and keyword read comes from shared state (the share of candidates
    its last filter let through). Three tenants with graphs, searched at once from eight threads, each with a
    filter passing another share of its rows (all, 1/2 by agent, 1/5 by agent): every answer is the one that
    tenant gets alone, of its own rows only."""
    from concurrent.futures import ThreadPoolExecutor

    idx = open_index(tmp_path)
    shares = {"t1": 1, "t2": 2, "t3": 5}
    for n, tenant in enumerate(shares):
        x = vectors(1200, seed=n + 1)
        start = 10_000 * n  # memory ids are unique in a store: each tenant has its own range
        idx.upsert("s", [(mem(start + i, "ab"[i % shares[tenant] != 0], tenant), x[i].tolist()) for i in range(1200)])
    qs = vectors(8, seed=7)

    def one(job: tuple[str, int]) -> tuple[str, int, list[tuple[str, float]], list[tuple[str, float]]]:
        tenant, q = job
        query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id=tenant, agent_ids=("a",)), text="memory 7",
                           vector=qs[q].tolist(), k=10)
        result = idx.search("s", query)
        return tenant, q, [(h.memory_id, h.score) for h in result.vector], [(h.memory_id, h.score) for h in result.keyword]

    jobs = [(t, q) for t in shares for q in range(len(qs))]
    one(jobs[0]), one(jobs[8]), one(jobs[16])  # builds the three graphs
    assert {k[2] for k in idx._graphs} == set(shares)
    alone = {(t, q): (v, k) for t, q, v, k in map(one, jobs)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(one, jobs * 6))
    for tenant, q, vector, keyword in together:
        assert (vector, keyword) == alone[(tenant, q)]
        assert len(vector) == 10 and keyword
        start = 10_000 * list(shares).index(tenant)  # each hit one of this tenant's agent-a rows
        assert all(start <= int(m[1:]) < start + 1200 and int(m[1:]) % shares[tenant] == 0 for m, _ in vector + keyword)


def test_the_shares_the_index_remembers_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlane.adapters.local import embedded_index

    monkeypatch.setattr(embedded_index, "SHARES_KEPT", 2)
    idx = open_index(tmp_path)
    for i in range(4):
        idx._learn_share(("s", "app", f"t{i}"), 10, 5)
    idx._learn_share(("s", "app", "t2"), 10, 10)
    assert list(idx._shares) == [("s", "app", "t3"), ("s", "app", "t2")] and idx._shares[("s", "app", "t2")] == 1.0
