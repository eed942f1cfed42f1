"""The dream calibration's judge and tables (pure; no service)."""

from datetime import datetime, timezone

import pytest

from memlane.bench.calibrate import (Judged, at_threshold, by_evidence, evidence_of, judge, reliability, suggest,
                                    wilson_lower)
from memlane.bench.updates import Case, Step

T = [datetime(2025, m, 1, tzinfo=timezone.utc) for m in (1, 2, 3)]


def step(text, at):
    return Step(at=at, run="r", agent="a", messages=({"role": "user", "content": text},))


def case(expect, texts=("I live in Boston.", "I moved to Denver."), **kw):
    return Case(id=f"{expect}-{len(texts)}", kind="residence", expect=expect, question="where?",
                steps=tuple(step(t, T[i]) for i, t in enumerate(texts)), **kw)


UPDATE = case("update", current="Denver", current_step=1, stale_steps=(0,))
CHAIN = case("update", ("I live in Boston.", "I moved to Denver.", "I moved to Austin."), current="Austin",
             current_step=2, stale_steps=(0, 1))
KEEP = case("keep", ("I like jazz.", "I like hiking."), keep_steps=(0, 1))
SAME = case("same", ("I live in Toronto.", "I live in Toronto and work downtown."), current="Toronto")


@pytest.mark.parametrize("c, targets, keep, right", [
    (UPDATE, [0], 1, True),  # the outdated fact, closed by the current one
    (UPDATE, [1], 0, False),  # the current fact closed by the outdated one
    (UPDATE, [0], None, False),  # closed by nothing that holds
    (CHAIN, [0], 1, True),  # Boston by Denver: both outdated, the newer keeps
    (CHAIN, [1], 0, False),  # backwards in time
    (CHAIN, [0, 1], 2, True),
    (KEEP, [0], 1, False),  # a fact that still holds
    (SAME, [0], 1, True), (SAME, [0], 0, False),
    (UPDATE, [], 1, False),
])
def test_judge(c, targets, keep, right):
    assert judge(c, targets, keep) is right


def j(conf, correct, evidence="value", applied=None, case="c", expect="update"):
    return Judged(case, expect, "UPDATE", evidence, conf, correct, conf >= 0.8 if applied is None else applied)


def test_reliability_buckets_count_and_precision():
    rows = {r["bucket"]: r for r in reliability([j(0.85, True), j(0.86, False), j(0.95, True), j(1.0, True),
                                                j(0.5, False)])}
    assert rows["[0.85, 0.90)"] == {"bucket": "[0.85, 0.90)", "proposals": 2, "right": 1, "precision": 0.5}
    assert rows["[0.95, 1.00]"]["proposals"] == 2 and rows["[0.95, 1.00]"]["precision"] == 1.0
    assert rows["[0.50, 0.60)"]["precision"] == 0.0 and rows["[0.60, 0.70)"]["precision"] is None


def test_by_evidence_and_its_lower_bound():
    rows = {r["evidence"]: r for r in by_evidence([j(0.9, True, "value")] * 9 + [j(0.9, False, "value"),
                                                                                  j(0.85, True, "denial")])}
    assert rows["value"]["proposals"] == 10 and rows["value"]["precision"] == 0.9
    assert rows["value"]["lower_bound"] < 0.9 and rows["denial"]["lower_bound"] < rows["value"]["lower_bound"]
    assert wilson_lower(0, 0) == 0.0 and wilson_lower(100, 100) > 0.96 and wilson_lower(1, 1) < 0.25


def test_at_threshold_precision_recall_and_false_supersede():
    cases = [UPDATE, CHAIN, KEEP, SAME]
    judged = [j(0.9, True, case=UPDATE.id), j(0.7, True, case=CHAIN.id),  # the chain's action waits
              j(0.85, False, case=KEEP.id, expect="keep"), j(0.95, True, case=SAME.id, expect="same")]
    got = at_threshold(judged, cases)
    assert got["applied"] == 3 and got["right"] == 2 and got["precision"] == 0.667
    assert got["recall"] == 0.667  # UPDATE and SAME, not CHAIN, of the three that call for an action
    assert got["false_supersede"] == 1.0  # the one non-conflict lost a fact


def test_evidence_is_read_from_the_rationale():
    assert evidence_of("UPDATE (value_cue): same relation ...") == "value_cue"
    assert evidence_of("MERGE (similar): 2 memories ...") == "similar"
    assert evidence_of("expired plan: ...") == "other"


def test_suggest_pools_an_idea_and_counts_real_talk_alarms_as_mistakes():
    judged = [j(0.95, True, "value_cue")] * 19 + [j(0.9, True, "value")] * 19 + [j(0.9, True, "denial")] * 2
    got = suggest(judged, {"value": 1})
    # "another value": 38 right of 39 (one alarm in real talk), with one more mistake 38/40 = 0.95
    assert got["value_cue"] == 0.95 and got["value"] == 0.9  # the weaker form (no cue) 0.05 less
    assert got["denial"] == 0.65  # 2 of 3 with one more mistake: too few cases to pass 0.8
    assert suggest([j(0.9, True, "denial")] * 30)["denial"] == 0.95  # capped
    assert suggest([], {"ended": 2}) == {"ended": 0.0}


def test_a_case_runs_through_ingest_and_the_dream(deps):
    """The calibration drives the update benchmark's ingest (its twin too): a change of that helper's
    signature broke `memlane bench calibrate` with a TypeError before any figure."""
    from dataclasses import replace

    from memlane.bench import updates
    from memlane.bench.calibrate import _run_case
    from memlane.services import stores

    deps.settings = replace(deps.settings, consolidate_on_write=False)
    stores.create(deps, name=updates.STORE)
    twin = Case(**{**UPDATE.__dict__, "id": "twin-case", "twin": True})
    scores, judged = _run_case(deps, twin, dream=True, threshold=0.8)
    assert scores["current_first"] == 1.0 and scores["cross_tenant"] == 0.0
    assert judged and all(j.correct and j.applied for j in judged)
