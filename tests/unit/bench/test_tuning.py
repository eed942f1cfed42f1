"""Choosing a method's free parameters: the same grid procedure for every method, tuned on one half of
the conversations and scored on the other."""

import pytest

from memlane.bench import tuning


def test_folds_split_conversations_in_two_halves_that_swap_roles():
    folds = tuning.folds(["c3", "c1", "c2", "c4", "c5"])
    assert folds == [(("c1", "c3", "c5"), ("c2", "c4")), (("c2", "c4"), ("c1", "c3", "c5"))]
    assert tuning.folds(["only"]) == []  # one conversation cannot be split: in-sample only


def test_choose_takes_the_best_mean_on_the_questions_it_may_see_and_keeps_the_earlier_on_a_tie():
    objective = {"default": [0.5, 0.5, 0.0], "other": [1.0, 0.0, 1.0], "same": [0.5, 0.5, 0.0]}
    assert tuning.choose(objective, [True, True, False]) == "default"  # 0.5 each; the first in grid order
    assert tuning.choose(objective, [True, False, True]) == "other"
    with pytest.raises(ValueError):
        tuning.choose(objective, [False, False, False])


def test_cross_validation_scores_each_half_with_what_the_other_half_chose():
    conv = ["a", "a", "b", "b"]
    objective = {"p1": [1.0, 1.0, 0.0, 0.0],   # best on a
                 "p2": [0.0, 0.0, 1.0, 1.0]}   # best on b
    cv = tuning.cross_validate(objective, conv, [True] * 4)
    assert cv.in_sample == "p1"  # a tie over all questions: the first
    assert cv.per_question == ["p2", "p2", "p1", "p1"]  # a is scored with b's choice and b with a's
    assert [(f.tuned_on, f.chosen, f.scored_on) for f in cv.folds] == [(("a",), "p1", ("b",)), (("b",), "p2", ("a",))]


def test_without_two_conversations_the_in_sample_choice_is_used_and_said():
    cv = tuning.cross_validate({"p1": [0.2], "p2": [0.4]}, ["a"], [True])
    assert cv.per_question == ["p2"] and cv.folds == [] and not cv.held_out
