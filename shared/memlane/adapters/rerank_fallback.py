"""A reranker that falls back to another when its first choice fails.

Reranking is the last, optional step of a search: the fused candidates are already in a good order.
So a rerank model that fails (not offered in the Region, model access not granted, throttled past the
retries, an outage) costs a search some ordering quality, not its answer: the fallback (the local
heuristic reranker) orders the same candidates, a warning is logged and `on_fallback` counts it (the
`RerankFallback` metric on AWS).
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from ..domain.deadline import Deadline
from ..domain.errors import MemlaneError
from ..ports import Budgeted, Reranker

log = logging.getLogger("memlane.rerank")


class FallbackReranker:
    def __init__(self, primary: Reranker, fallback: Reranker, *,
                 on_fallback: Callable[[MemlaneError], None] = lambda error: None) -> None:
        self._primary, self._fallback, self._on_fallback = primary, fallback, on_fallback

    def within(self, deadline: Deadline) -> "FallbackReranker":
        """Its first choice bounded by `deadline` (ports.Budgeted) when it can be: a rerank model on AWS was never
        bounded by a request's deadline behind this wrapper (a warm-container trial)."""
        primary = self._primary.within(deadline) if isinstance(self._primary, Budgeted) else self._primary
        return FallbackReranker(primary, self._fallback, on_fallback=self._on_fallback)

    @property
    def name(self) -> str:
        return str(getattr(self._primary, "name", type(self._primary).__name__))

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        try:
            return self._primary.rerank(query, texts)
        except MemlaneError as error:  # adapters raise only domain errors: every one is the model failing
            log.warning("rerank failed; the fallback reranker ordered the candidates",
                        extra={"reranker": self.name, "fallback": type(self._fallback).__name__,
                               "reason": f"{error.code}: {error.message}"})
            self._on_fallback(error)
            return self._fallback.rerank(query, texts)
