"""The benchmark's metric functions: small cases worked out by hand."""

from datetime import datetime, timezone

import pytest

from memlane.bench import metrics


def test_recall_at_k_counts_distinct_evidence_covered_by_the_first_k_results():
    results = [("D1:1",), ("D1:2", "D1:3"), ("D2:1",)]
    assert metrics.recall_at(results, ["D1:3", "D2:1"], 1) == 0.0
    assert metrics.recall_at(results, ["D1:3", "D2:1"], 2) == 0.5
    assert metrics.recall_at(results, ["D1:3", "D2:1"], 3) == 1.0
    assert metrics.recall_at(results, ["D1:3", "D1:3"], 2) == 1.0  # duplicated evidence counts once
    assert metrics.recall_at([], ["D1:1"], 10) == 0.0


def test_recall_of_a_question_without_evidence_is_an_error_not_a_zero():
    with pytest.raises(ValueError):
        metrics.recall_at([("D1:1",)], [], 5)


def test_all_hit_needs_every_evidence_turn():
    results = [("D1:1",), ("D3:4",)]
    assert metrics.all_hit_at(results, ["D1:1", "D3:4"], 10) == 1.0
    assert metrics.all_hit_at(results, ["D1:1", "D3:4"], 1) == 0.0
    assert metrics.all_hit_at(results, ["D1:1", "D9:9"], 10) == 0.0


def test_tokens_are_ceil_of_1_3_per_word():
    assert metrics.tokens("") == 0
    assert metrics.tokens("one") == 2  # ceil(1.3)
    assert metrics.tokens("a b c d e f g h i j") == 13
    assert metrics.tokens("  spaced   out\nwords ") == 4  # ceil(3.9)


def test_budget_cut_keeps_the_leading_results_that_fit_and_stops_at_the_first_that_does_not():
    texts = ["w " * 10, "w " * 10, "w " * 10]  # 13 tokens each
    assert metrics.budget_cut(texts, 26) == 2  # exactly at the budget still fits
    assert metrics.budget_cut(texts, 25) == 1
    assert metrics.budget_cut(texts, 12) == 0
    assert metrics.budget_cut(["w " * 100, "w"], 50) == 0  # no skipping past a long one
    assert metrics.budget_cut([], 10) == 0


def test_recall_within_tokens_uses_only_what_fits():
    results = [("D1:1",), ("D1:2",)]
    texts = ["w " * 10, "w " * 10]
    assert metrics.recall_within_tokens(results, texts, ["D1:2"], 13) == 0.0
    assert metrics.recall_within_tokens(results, texts, ["D1:2"], 26) == 1.0


def test_map_evidence_turns_message_ids_into_dialog_ids_in_order_without_unknowns_or_repeats():
    turn_of = {"m1": "D1:1", "m2": "D1:2", "m3": "D1:2"}
    assert metrics.map_evidence(["m2", "zz", "m1", "m3"], turn_of) == ["D1:2", "D1:1"]
    assert metrics.map_evidence([], turn_of) == []


def test_clean_evidence_skips_and_counts_what_names_no_turn():
    known = ["D1:1", "D8:6", "D9:17", "D11:26"]
    good, bad = metrics.clean_evidence(["D1:1", "D8:6; D9:17", "D", "D:11:26", "D1:1", "D7:7", None], known)
    assert good == ["D1:1"]
    assert bad == 5  # the joined pair, 'D', the malformed one, an unknown turn, None
    assert metrics.clean_evidence([" D8:6 "], known) == (["D8:6"], 0)


@pytest.mark.parametrize("text, expected", [
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)),
    ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)),
    ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=timezone.utc)),
    ("12:48 pm on 1 January 2024", datetime(2024, 1, 1, 12, 48, tzinfo=timezone.utc)),
    ("7:00 PM on 3 Sept, 2022", datetime(2022, 9, 3, 19, 0, tzinfo=timezone.utc)),
])
def test_locomo_session_times_parse_to_utc(text, expected):
    assert metrics.parse_locomo_time(text) == expected


@pytest.mark.parametrize("text", ["", "8 May 2023", "25:00 pm on 8 May, 2023", "1:56 pm on 8 Mayo, 2023"])
def test_unparseable_session_times_are_refused(text):
    with pytest.raises(ValueError):
        metrics.parse_locomo_time(text)


def test_percentile_interpolates():
    assert metrics.percentile([], 50) == 0.0
    assert metrics.percentile([5.0], 95) == 5.0
    assert metrics.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert metrics.percentile(list(range(101)), 95) == 95


def test_turn_budget_charges_a_result_for_every_turn_it_cites():
    results = [("D1:1", "D1:2"), ("D1:3",), ("D1:4",)]
    assert metrics.turn_cut(results, 1) == 0  # the first result spends two turns: it does not fit in one
    assert metrics.turn_cut(results, 2) == 1
    assert metrics.turn_cut(results, 3) == 2
    assert metrics.turn_cut([(), ("D1:1",)], 1) == 1  # a result citing nothing still spends one
    assert metrics.recall_within_turns(results, ["D1:3"], 2) == 0.0
    assert metrics.recall_within_turns(results, ["D1:3"], 3) == 1.0
    assert metrics.recall_within_turns(results, ["D1:2", "D1:4"], 4) == 1.0


def test_count_budget_cut_takes_token_counts_from_any_tokenizer():
    assert metrics.count_cut([10, 10, 10], 20) == 2
    assert metrics.count_cut([10, 10, 10], 19) == 1
    assert metrics.count_cut([30, 1], 20) == 0  # no skipping past a long one
    results = [("D1:1",), ("D1:2",)]
    assert metrics.recall_within_counts(results, [12, 12], ["D1:2"], 23) == 0.0
    assert metrics.recall_within_counts(results, [12, 12], ["D1:2"], 24) == 1.0
