"""The embedded ANN series of `memlane bench scale` (bench/scale.py): what a 10⁶ run needs to fit
the machine and the session — one graph build per size, not two — and what each row reports."""

import io
from pathlib import Path

import pytest

from memlane.adapters.local import index_ann
from memlane.bench import scale
from memlane.bench.common import Progress

pytestmark = pytest.mark.skipif(not index_ann.available(), reason="faiss-cpu (the local extra) is not installed")


def test_a_graph_built_from_empty_is_timed_once_not_built_again(tmp_path: Path, monkeypatch) -> None:
    """At 10⁶ one HNSW build is tens of minutes here: the series must time the build it does
    anyway (the tenant's first) instead of building the same graph a second time to time it."""
    builds = []
    real = index_ann.Graph.build.__func__

    def counted(cls, ids, matrix):
        builds.append(len(ids))
        return real(cls, ids, matrix)

    monkeypatch.setattr(index_ann.Graph, "build", classmethod(counted))
    (row,) = scale.ann_series(tmp_path, [300], queries=4, progress=Progress(0, stream=io.StringIO()))
    assert builds == [300]
    assert row["graph_build_s"] >= 0 and row["graph_mb"] > 0


def test_a_grown_graph_is_timed_by_a_fresh_build_beside_the_catch_up(tmp_path: Path, monkeypatch) -> None:
    builds = []
    real = index_ann.Graph.build.__func__
    monkeypatch.setattr(index_ann.Graph, "build", classmethod(lambda cls, ids, m: builds.append(len(ids)) or real(cls, ids, m)))
    scale.ann_series(tmp_path, [200, 400], queries=3, progress=Progress(0, stream=io.StringIO()))
    assert builds == [200, 400]  # the first size's build, then a fresh one at 400 (the index caught up, not rebuilt)


def test_each_row_reports_disk_and_memory_and_times_the_hybrid_half_on_fewer_queries(tmp_path: Path) -> None:
    (row,) = scale.ann_series(tmp_path, [300], queries=6, progress=Progress(0, stream=io.StringIO()),
                              hybrid_queries=2)
    assert row["hybrid_queries"] == 2 and row["queries"] == 6
    assert row["disk_mb"] > row["graph_mb"] > 0  # the index file and its WAL beside the graph file
    assert row["rss_mb"] > 0 and row["peak_rss_mb"] >= row["rss_mb"]


class CountingModel:
    """Stands in for MiniLM: its cost is whatever it takes; the test counts the calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return [[0.0] * 384 for _ in texts]


def test_the_tenant_series_reports_search_with_the_query_embedding_and_the_footprint(tmp_path: Path) -> None:
    """"p50/p95 before and with the query embedding": the model embeds each timed query once, in the
    same loop as the search it precedes; each row also says what the store weighs on disk and in memory."""
    model = CountingModel()
    rows = scale.tenant_count_series("embedded", tmp_path, [1, 3], per_tenant=40, queries=4,
                                     progress=Progress(0, stream=io.StringIO()), query_model=model)
    assert [r["tenants"] for r in rows] == [1, 3]
    assert len(model.calls) == 2 * 4 and all(len(c) == 1 for c in model.calls)
    for row in rows:
        assert row["memlane_with_embedding_ms"]["p50"] >= row["memlane_ms"]["p50"]
        assert row["memlane_with_embedding_ms"]["p95"] >= row["memlane_ms"]["p95"]
        assert row["disk_mb"] > 0 and row["rss_mb"] > 0
    assert rows[1]["disk_mb"] > rows[0]["disk_mb"]


def test_a_tenant_past_ann_min_rows_is_timed_through_its_graph_built_first(tmp_path: Path, monkeypatch) -> None:
    """Right after a bulk load a large tenant is searched exactly while its graph builds in the background;
    the series times the search a user has once it is built (every timed search walks the graph), and
    reports the build on its own."""
    walks = []
    real = index_ann.Graph.search
    monkeypatch.setattr(index_ann.Graph, "search", lambda self, *a, **kw: walks.append(1) or real(self, *a, **kw))
    monkeypatch.setenv("MEMLANE_ANN_MIN_ROWS", "200")
    (row,) = scale.tenant_size_series("embedded", tmp_path, [300], queries=4, progress=Progress(0, stream=io.StringIO()))
    assert row["graph_build_s"] is not None and row["graph_build_s"] >= 0
    assert len(walks) >= 4 + 4  # the warm-up searches (one per query here) and the 4 timed ones, each through it
