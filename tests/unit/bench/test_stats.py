"""Bootstrap confidence intervals: known cases, seeded, resampling questions or whole conversations."""

import numpy as np
import pytest

from memlane.bench import stats


def test_a_constant_has_a_degenerate_interval():
    ci = stats.bootstrap_mean([0.7] * 50, seed=1)
    assert ci == stats.Interval(0.7, 0.7, 0.7)


def test_the_interval_of_a_mean_of_coin_flips_matches_the_normal_approximation():
    values = [0.0, 1.0] * 400  # mean 0.5, standard error sqrt(0.25 / 800) = 0.0177
    ci = stats.bootstrap_mean(values, resamples=4000, seed=7)
    assert ci.mean == 0.5
    assert ci.low == pytest.approx(0.5 - 1.96 * 0.0177, abs=0.006)
    assert ci.high == pytest.approx(0.5 + 1.96 * 0.0177, abs=0.006)


def test_the_same_seed_gives_the_same_interval_and_another_seed_may_not():
    values = list(np.linspace(0, 1, 37))
    assert stats.bootstrap_mean(values, seed=3) == stats.bootstrap_mean(values, seed=3)
    assert stats.bootstrap_mean(values, seed=3) != stats.bootstrap_mean(values, seed=4)


def test_fewer_than_a_thousand_resamples_is_refused():
    with pytest.raises(ValueError):
        stats.bootstrap_mean([0.1, 0.2], resamples=999)


def test_resampling_conversations_keeps_their_questions_together():
    # Two conversations, each internally constant: resampling questions sees 400 independent values
    # (a narrow interval), resampling conversations sees two (the interval spans both means).
    values = [0.2] * 200 + [0.8] * 200
    groups = ["a"] * 200 + ["b"] * 200
    by_question = stats.bootstrap_mean(values, seed=0)
    by_conversation = stats.bootstrap_mean(values, groups=groups, seed=0)
    assert by_question.high - by_question.low < 0.1
    assert by_conversation.low == pytest.approx(0.2) and by_conversation.high == pytest.approx(0.8)
    assert by_conversation.mean == pytest.approx(0.5)


def test_a_paired_difference_cancels_what_both_methods_share():
    rng = np.random.default_rng(0)
    hard = rng.random(500)  # per-question difficulty, shared by both methods
    a = list(hard + 0.1)
    b = list(hard)
    diff = stats.paired_difference(a, b, seed=0)
    assert diff.mean == pytest.approx(0.1)
    assert diff.low == pytest.approx(0.1) and diff.high == pytest.approx(0.1)  # every pair differs by 0.1


def test_paired_difference_needs_equal_lengths():
    with pytest.raises(ValueError):
        stats.paired_difference([0.1, 0.2], [0.1])
