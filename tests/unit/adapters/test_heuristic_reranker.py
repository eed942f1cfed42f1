"""The default local reranker: deterministic term coverage with stemming and phrase/proximity bonuses."""

from __future__ import annotations

import pytest

from memlane.adapters.local.heuristic_reranker import HeuristicReranker, stem


def test_more_of_the_query_ranks_higher() -> None:
    scores = HeuristicReranker().rerank("What food does Alice like?", [
        "Bob likes Italian food", "Alice likes Italian food", "The weather is nice"])
    assert scores[1] > scores[0] > scores[2] == 0.0


def test_inflections_match_through_stemming() -> None:
    scores = HeuristicReranker().rerank("studying running", ["she studied and runs daily", "she sleeps"])
    assert scores[0] >= 0.7 and scores[1] == 0.0  # full coverage; the bonuses need adjacency


def test_the_exact_phrase_and_close_terms_beat_scattered_ones() -> None:
    phrase, scattered = HeuristicReranker().rerank("new york pizza", [
        "the best new york pizza", "york is old and pizza was new there"])
    assert phrase > scattered > 0


def test_rare_terms_count_more_than_common_ones() -> None:
    texts = ["alice tea", "alice coffee", "alice juice", "bob tea"]
    scores = HeuristicReranker().rerank("alice coffee", texts)
    assert scores.index(max(scores)) == 1
    assert scores[1] > scores[0]  # "coffee" (1 of 4) tells more than "alice" (3 of 4)


def test_scores_are_in_unit_range_and_deterministic() -> None:
    texts = ["Alice likes tea", "tea tea tea", "", "Alice", "nothing here"]
    first = HeuristicReranker().rerank("does Alice like tea?", texts)
    assert first == HeuristicReranker().rerank("does Alice like tea?", texts)
    assert all(0.0 <= s <= 1.0 for s in first)
    assert first[0] == pytest.approx(1.0)


def test_degenerate_inputs() -> None:
    reranker = HeuristicReranker()
    assert reranker.rerank("anything", []) == []
    assert reranker.rerank("", ["a", "b"]) == [0.0, 0.0]
    assert reranker.rerank("the", ["the cat", "a dog"])[0] > 0  # only stopwords: keep them


@pytest.mark.parametrize(("a", "b"), [("likes", "liked"), ("liking", "like"), ("studies", "study"),
                                      ("running", "run"), ("happily", "happy"), ("kittens", "kitten")])
def test_stem_conflates_inflections(a: str, b: str) -> None:
    assert stem(a) == stem(b)


def test_a_possessive_in_the_query_does_not_match_contractions() -> None:
    """"the user's employer" has no term "s" for "that's" to match: a closing remark outranked the
    current fact by it (knowledge-update case emp-02)."""
    remark, fact = HeuristicReranker().rerank("Who is the user's employer?", [
        "User: Anyway, that's where things stand.", "User works for PwC."])
    assert remark <= fact
    assert HeuristicReranker().rerank("Caroline's dog", ["that's it, it's done"]) == [0.0]
