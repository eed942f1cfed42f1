"""Concurrent embed calls share one model call; a text the model refuses fails only its own caller."""

from __future__ import annotations

import threading
from typing import Sequence

import pytest

from memlane.adapters.embedders.coalescing import CoalescingEmbedder
from memlane.domain.errors import DependencyFailed
from memlane.ports import Embedder


class GatedModel:
    """Records each model call; its first call waits until `waiters` other callers are queued behind it."""
    name, dim = "gated", 2

    def __init__(self, waiters: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.waiters = waiters
        self.outer: CoalescingEmbedder | None = None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.calls and self.outer is not None:
            assert self.outer.wait_for_queued(self.waiters, timeout=10), "callers never queued"
        self.calls.append(list(texts))
        if any("poison" in t for t in texts):
            raise DependencyFailed("the model refused a text", code="embedder_failed")
        return [[float(len(t)), 1.0] for t in texts]


def run_concurrently(embedder: CoalescingEmbedder, inputs: list[list[str]]) -> list[object]:
    results: list[object] = [None] * len(inputs)

    def call(i: int) -> None:
        try:
            results[i] = embedder.embed(inputs[i])
        except Exception as e:  # noqa: BLE001 - the test inspects what each caller got
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    threads[0].start()
    assert embedder.wait_for_busy(timeout=10)  # the first caller holds the model
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(20)
    return results


def test_is_an_embedder_with_the_inner_name_and_dim() -> None:
    embedder = CoalescingEmbedder(GatedModel())
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dim) == ("gated", 2)
    assert embedder.embed([]) == []
    assert embedder.embed(["ab"]) == [[2.0, 1.0]]


def test_callers_queued_behind_a_running_call_share_the_next_one() -> None:
    model = GatedModel(waiters=3)
    embedder = CoalescingEmbedder(model)
    model.outer = embedder
    inputs = [["first"], ["a", "bb"], ["ccc"], ["dddd", "e"]]
    results = run_concurrently(embedder, inputs)
    assert results == [[[float(len(t)), 1.0] for t in texts] for texts in inputs]  # each gets its own, in order
    assert len(model.calls) == 2 and model.calls[0] == ["first"]
    assert sorted(model.calls[1]) == sorted(["a", "bb", "ccc", "dddd", "e"])


def test_a_text_the_model_refuses_fails_only_its_caller() -> None:
    model = GatedModel(waiters=3)
    embedder = CoalescingEmbedder(model)
    model.outer = embedder
    results = run_concurrently(embedder, [["first"], ["a"], ["poison pill"], ["bb"]])
    assert results[0] == [[5.0, 1.0]] and results[1] == [[1.0, 1.0]] and results[3] == [[2.0, 1.0]]
    assert isinstance(results[2], DependencyFailed)


def test_a_batch_never_grows_past_the_cap_but_a_large_call_still_runs() -> None:
    model = GatedModel(waiters=2)
    embedder = CoalescingEmbedder(model, max_texts=3)
    model.outer = embedder
    results = run_concurrently(embedder, [["x"], ["a", "b"], ["c", "d"], ["e"] * 7])
    assert results[3] == [[1.0, 1.0]] * 7
    assert all(len(c) <= 3 for c in model.calls if len(c) != 7)


@pytest.mark.parametrize("size", [0, -1])
def test_a_cap_below_one_is_refused(size: int) -> None:
    with pytest.raises(ValueError):
        CoalescingEmbedder(GatedModel(), max_texts=size)
