"""A failing rerank model degrades a search's order, never the search: the fallback answers, it is logged and counted."""

from __future__ import annotations

import logging
from typing import Sequence

import pytest

from memlane.adapters.local.heuristic_reranker import HeuristicReranker
from memlane.adapters.rerank_fallback import FallbackReranker
from memlane.domain.errors import DependencyFailed, MemlaneError, Retryable

TEXTS = ["Ann prefers to be contacted by email.", "Ann has a dog, a beagle named Max."]


class Failing:
    name = "amazon.rerank-v1:0"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        raise self.error


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("error", [
    DependencyFailed("bedrock rerank failed: AccessDeniedException: no access", code="model_failed"),
    Retryable("bedrock rerank failed: ThrottlingException: slow down", code="model_unavailable"),
])
def test_a_failing_model_is_replaced_by_the_fallback_logged_and_counted(error: MemlaneError) -> None:
    counted: list[MemlaneError] = []
    records = Records()
    logger = logging.getLogger("memlane.rerank")
    logger.addHandler(records)
    try:
        scores = FallbackReranker(Failing(error), HeuristicReranker(), on_fallback=counted.append).rerank(
            "what kind of dog does Ann have?", TEXTS)
    finally:
        logger.removeHandler(records)

    assert scores == HeuristicReranker().rerank("what kind of dog does Ann have?", TEXTS)
    assert scores[1] > scores[0]
    assert counted == [error]
    [record] = records.records
    assert record.levelno == logging.WARNING
    assert record.reranker == "amazon.rerank-v1:0"  # type: ignore[attr-defined]
    assert record.reason == f"{error.code}: {error.message}"  # type: ignore[attr-defined]


def test_a_working_model_answers_and_nothing_is_counted() -> None:
    class Model:
        def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            return [0.9, 0.1]

    counted: list[MemlaneError] = []
    assert FallbackReranker(Model(), HeuristicReranker(), on_fallback=counted.append).rerank("q", TEXTS) == [0.9, 0.1]
    assert counted == []


def test_a_bug_is_not_hidden_by_the_fallback() -> None:
    # Only the model's failures (domain errors, translated by the adapter) fall back; a programming error surfaces.
    with pytest.raises(TypeError):
        FallbackReranker(Failing(TypeError("bug")), HeuristicReranker()).rerank("q", TEXTS)


def test_a_requests_deadline_reaches_the_model_behind_the_fallback() -> None:
    """A warm-container trial: `Deps.within` bounds adapters that are Budgeted, and the wrapper was not, so a Bedrock
    rerank on AWS was never bounded by a sync request's deadline."""
    from memlane.domain.deadline import Deadline
    from memlane.ports import Budgeted

    class Bounded:
        name = "amazon.rerank-v1:0"
        deadline = None

        def within(self, deadline: Deadline) -> "Bounded":
            bounded = Bounded()
            bounded.deadline = deadline
            return bounded

        def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            return [float(len(t)) for t in texts]

    counted: list[MemlaneError] = []
    wrapper = FallbackReranker(Bounded(), HeuristicReranker(), on_fallback=counted.append)
    deadline = Deadline.never()
    assert isinstance(wrapper, Budgeted)
    bounded = wrapper.within(deadline)
    assert bounded._primary.deadline is deadline and wrapper._primary.deadline is None
    assert bounded.rerank("q", TEXTS) == [float(len(t)) for t in TEXTS]
    # a first choice that cannot be bounded is kept as it is
    assert FallbackReranker(Failing(Retryable("x")), HeuristicReranker()).within(deadline)._primary.error.message == "x"
