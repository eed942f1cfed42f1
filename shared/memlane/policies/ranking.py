"""Named search recipes and rank fusion.

A recipe says which signals to use, how to weigh them and whether to rerank, so callers
and benchmarks pick a recipe by name instead of building queries by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..ports import Hit


@dataclass(frozen=True)
class SearchRecipe:
    name: str
    keyword_weight: float = 1.0
    vector_weight: float = 1.0
    # 10, not the textbook 60: a smaller k lets each signal's first hits count for more, which won
    # +0.02 recall@10 on LoCoMo (docs/benchmarks.md; 60 → 30 → 20 → 10 each a little better).
    rrf_k: int = 10
    # Hits per signal, into fusion. A result the vector list did not reach has its cosine read from
    # the index (`Index.similarities`), so the vector k need not grow with top_k.
    candidates: int = 100
    rerank: bool = True
    rerank_depth: int = 30  # how many fused candidates the reranker sees
    rerank_weight: float = 0.5  # blend of reranker score vs fused score, both min-max normalised


RECIPES: dict[str, SearchRecipe] = {
    r.name: r
    for r in (
        SearchRecipe("hybrid"),
        SearchRecipe("hybrid_no_rerank", rerank=False),
        SearchRecipe("keyword", vector_weight=0.0, rerank=False),
        SearchRecipe("vector", keyword_weight=0.0, rerank=False),
    )
}
DEFAULT_RECIPE = "hybrid"


def reciprocal_rank_fusion(lists: Sequence[tuple[float, Sequence[Hit]]], rrf_k: int) -> dict[str, float]:
    """score(d) = Σ weight / (rrf_k + rank(d)), rank starting at 1, over each weighted ranked list."""
    fused: dict[str, float] = {}
    for weight, hits in lists:
        if weight <= 0:
            continue
        for rank, hit in enumerate(hits, start=1):
            fused[hit.memory_id] = fused.get(hit.memory_id, 0.0) + weight / (rrf_k + rank)
    return fused


def min_max(values: Sequence[float]) -> list[float]:
    lo, hi = min(values, default=0.0), max(values, default=0.0)
    if hi - lo < 1e-12:
        return [1.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def similarity_from_cosine(cosine: float) -> float:
    """Cosine mapped into [0, 1]; unrelated or opposite texts are 0."""
    return max(0.0, min(1.0, cosine))

