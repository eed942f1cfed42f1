"""The 10⁶ data set's shape (bench/scale_opensearch.py): Zipf tenant sizes that sum to the store, a
smaller store that is a prefix of a larger one, and memories derived from their ids alone."""

import numpy as np

from memlane.bench.scale_opensearch import Data, _shares, zipf_sizes


def test_zipf_sizes_sum_to_the_store_and_fall_with_rank():
    sizes = zipf_sizes(1_000_000)
    assert sizes.sum() == 1_000_000 and len(sizes) == 1000 and sizes.min() >= 1
    assert (np.diff(sizes) <= 0).all() and sizes[0] > 1000 * sizes[-1] / 2


def test_a_store_on_its_way_to_a_larger_one_keeps_every_tenant_within_its_final_size():
    final = zipf_sizes(1_000_000)
    part = _shares(final, 100_000, 1_000_000)
    assert part.sum() == 100_000 and (part <= final).all() and (part >= 1).all()


def test_a_memory_is_the_same_whenever_it_is_made_and_its_vector_has_unit_length():
    rng = np.random.default_rng(0)
    turns = [f"turn {i}" for i in range(20)]
    vectors = rng.standard_normal((20, 384)).astype(np.float32)
    a, b = Data(turns, vectors), Data(turns, vectors)
    text, vec = a.memory(7, 123)
    assert (text, vec.tolist()) == (b.memory(7, 123)[0], b.memory(7, 123)[1].tolist())
    assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5 and text.startswith("turn ")
    assert a.memory(7, 124)[0] != text or not np.allclose(a.memory(7, 124)[1], vec)


def test_the_report_shows_each_vector_k_before_and_after_the_merge():
    from memlane.bench.scale_opensearch import format_report

    def measured(segments: int, p95: float) -> dict:
        row = {"tenant": "t0000", "memories": 13861, "search_ms": {"p50": 1.0, "p95": p95},
               "with_embedding_ms": {"p50": 2.0, "p95": 3.0}, "recall_at_10": 1.0, "foreign_hits": 0}
        return {"disk_mb": 650.0, "heap_used_mb": 1000, "heap_max_mb": 3072, "process_rss_mb": 3400,
                "segments": segments, "tenants_measured": [{**row, "k": 200, "keyword_k": 100},
                                                           {**row, "k": 50, "keyword_k": 50, "plan": "walk"}]}

    report = {"shards": 1, "engine": "lucene", "tenants": 1000, "queries": 5, "model": "m", "blas": "b",
              "points": [{"memories": 100000, "load_s": 10.0, "docs_per_s": 10000.0, "force_merge_s": 5.0,
                          **measured(7, 300.0), "merged": measured(1, 100.0)}]}
    lines = format_report(report).splitlines()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if "t0000" in line]
    assert [(r[1], r[4], r[5], r[7]) for r in rows] == [
        ("loaded", "200/100", "shipped", "300"), ("loaded", "50/50", "walk", "300"),
        ("merged", "200/100", "shipped", "100"), ("merged", "50/50", "walk", "100")]
    assert any("| 7 " in line for line in lines) and any("| 1 " in line for line in lines)  # segments each state


def test_each_vector_plan_is_the_index_with_its_exact_threshold_on_the_same_client():
    from memlane.adapters.opensearch.index import OpenSearchIndex
    from memlane.adapters.opensearch.queries import EXACT_VECTOR_MAX
    from memlane.bench.scale_opensearch import VECTOR_PLANS, plan_index

    client = object()
    idx = OpenSearchIndex(client, index_prefix="osscale", shards=1, replicas=0)  # type: ignore[arg-type]
    limits = {plan: plan_index(idx, plan) for plan in VECTOR_PLANS}
    assert all(i.client is client and i.prefix == "osscale" and (i.shards, i.replicas) == (1, 0) for i in limits.values())
    assert limits["shipped"].exact_vector_max == EXACT_VECTOR_MAX
    assert limits["walk"].exact_vector_max == 0  # any tenant with a document is walked
    assert limits["exact"].exact_vector_max > 10**6  # any tenant is scored exactly


def test_the_vector_plans_take_turns_query_by_query(monkeypatch):
    """Side by side: each plan goes first as often as the others, and each gets its own row."""
    from memlane.bench import scale_opensearch
    from memlane.ports import Hit, IndexResult
    from memlane.domain.models import RecordType

    calls: list[str] = []

    class Fake:
        def __init__(self, plan: str) -> None:
            self.plan = plan

        def search(self, store, query):
            calls.append(self.plan)
            return IndexResult(keyword=[], vector=[Hit("t0003-0000000", 0.9, RecordType.MEMORY, "", "r1")])

    class Model:
        def embed(self, texts):
            return [[0.0] * 4 for _ in texts]

    monkeypatch.setattr(scale_opensearch, "plan_index", lambda idx, plan: Fake(plan))
    vectors = np.eye(4, dtype=np.float32)[:2]
    plans = ("shipped", "walk", "exact")
    questions, qvecs = [f"q{i}" for i in range(12)], np.eye(4, dtype=np.float32)[[0] * 12]
    rows = scale_opensearch.measure_tenant(None, 3, vectors, questions, qvecs, Model(), 10, 10, plans)
    assert [r["plan"] for r in rows] == list(plans)
    measured = calls[10 * len(plans):]  # after the warm-up, three searches per plan and query
    firsts = [measured[i * 9] for i in range(12)]
    assert sorted(firsts) == sorted(plans * 4)
    assert all(r["recall_at_10"] == 0.5 and r["foreign_hits"] == 0 for r in rows)
