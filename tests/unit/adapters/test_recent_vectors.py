"""The embedder remembers the vectors of recent texts: a live thread's card asks for the vector of the
turn its add embeds (or the other way round), and a repeated query is embedded once."""

from __future__ import annotations

import threading

import pytest

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.adapters.embedders.recent import RecentVectors
from memlane.bootstrap import build
from memlane.config import Settings
from memlane.ports import Embedder


class Counting(HashingEmbedder):
    """The hashing model, counting the texts it is asked to embed."""

    def __init__(self, name: str = "hashing") -> None:
        super().__init__()
        self.name, self.texts = name, []

    def embed(self, texts):
        self.texts += list(texts)
        return super().embed(texts)


def test_the_second_embedding_of_a_text_does_not_call_the_model() -> None:
    model = Counting()
    embedder = RecentVectors(model, size=8)
    first = embedder.embed(["I am vegetarian."])
    again = embedder.embed(["I am vegetarian."])
    assert again == first and model.texts == ["I am vegetarian."]


def test_only_the_texts_not_seen_go_to_the_model_in_order() -> None:
    model = Counting()
    embedder = RecentVectors(model, size=8)
    embedder.embed(["b"])
    got = embedder.embed(["a", "b", "c", "a"])
    assert model.texts == ["b", "a", "c"]  # "a" once, though asked twice in one call
    assert got == HashingEmbedder().embed(["a", "b", "c", "a"])


def test_it_is_bounded_least_recently_used_out() -> None:
    model = Counting()
    embedder = RecentVectors(model, size=2)
    embedder.embed(["a"]), embedder.embed(["b"]), embedder.embed(["a"]), embedder.embed(["c"])  # "b" goes
    model.texts.clear()
    embedder.embed(["a", "c", "b"])
    assert model.texts == ["b"]
    assert len(embedder) == 2


def test_a_caller_changing_a_vector_does_not_change_what_is_remembered() -> None:
    embedder = RecentVectors(Counting(), size=4)
    [v] = embedder.embed(["x"])
    v[0] += 1.0
    assert embedder.embed(["x"]) == HashingEmbedder().embed(["x"])


def test_it_is_the_model_it_wraps_to_everyone_else() -> None:
    embedder = RecentVectors(Counting("titan-v2"), size=4)
    assert isinstance(embedder, Embedder) and (embedder.name, embedder.dim) == ("titan-v2", HashingEmbedder().dim)


def test_a_size_of_zero_remembers_nothing() -> None:
    model = Counting()
    embedder = RecentVectors(model, size=0)
    embedder.embed(["a"]), embedder.embed(["a"])
    assert model.texts == ["a", "a"]


def test_threads_share_it_safely() -> None:
    model = Counting()
    embedder = RecentVectors(model, size=16)
    texts = [f"t{i}" for i in range(32)]
    expected = HashingEmbedder().embed(texts)
    errors: list[AssertionError] = []

    def run() -> None:
        for _ in range(20):
            try:
                assert embedder.embed(texts) == expected
            except AssertionError as e:  # pragma: no cover - the failure is what the test reports
                errors.append(e)

    workers = [threading.Thread(target=run) for _ in range(4)]
    [w.start() for w in workers], [w.join() for w in workers]
    assert not errors and len(embedder) == 16


@pytest.mark.parametrize("size", [0, 64])
def test_the_service_wires_it_from_the_settings(tmp_path, size) -> None:
    model = Counting()
    deps = build(Settings(data_dir=tmp_path, embedder="hashing", embed_cache_size=size), embedder=model,
                 check_schema=False)
    deps.embedder.embed(["a"]), deps.embedder.embed(["a"])
    assert model.texts == (["a"] if size else ["a", "a"])


def test_it_is_off_unless_asked_for(tmp_path) -> None:
    """Shared by every tenant of a process, a remembered vector answers faster: the time of a search
    would tell a tenant whether another embedded the same text a moment ago. Opt-in, for deployments
    that serve one tenant (or accept that)."""
    model = Counting()
    deps = build(Settings(data_dir=tmp_path, embedder="hashing"), embedder=model, check_schema=False)
    deps.embedder.embed(["what did Alice say"]), deps.embedder.embed(["what did Alice say"])
    assert model.texts == ["what did Alice say", "what did Alice say"]
