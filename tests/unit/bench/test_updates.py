"""The knowledge-update benchmark's data and metric functions (pure; no service)."""

from collections import Counter
from datetime import datetime, timezone

from memlane.bench.updates import DEFAULT_DATA, Case, Hit, Observation, Step, aggregate, load, score

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
T1 = datetime(2025, 2, 1, tzinfo=timezone.utc)


def step(text, at=T0, **kw):
    return Step(at=at, run="r", agent="a", messages=({"role": "user", "content": text},), **kw)


def update_case(**kw):
    return Case(id="c1", kind="residence", expect="update", steps=(step("I live in Boston."),
                step("I moved to Denver.", T1)), question="where?", current="Denver", current_step=1,
                stale_steps=(0,), **kw)


def obs(hits, statuses=(["superseded"], ["active"]), actions=(["ADD"], ["UPDATE"]), **kw):
    return Observation(tenant="c1", hits=hits, step_requests=["r0", "r1"], step_facts=["m0", "m1"],
                       step_statuses=list(statuses),
                       step_actions=list(actions), **kw)


def test_the_data_set_is_big_and_varied_enough():
    cases = load(DEFAULT_DATA)
    assert len(cases) >= 80
    assert len({c.kind for c in cases}) >= 15
    expects = Counter(c.expect for c in cases)
    assert expects["update"] and expects["retract"] and expects["keep"] and expects["same"]
    tags = Counter(t for c in cases for t in c.tags)
    assert tags["cue"] and tags["no-cue"] and tags["old-detail"] and tags["cross-agent"]
    assert sum(c.twin for c in cases) >= 10
    assert any(c.ingest_order for c in cases) and any(s.untimed for c in cases for s in c.steps)
    for c in cases:
        if c.expect in ("update", "retract"):
            assert c.current_step is not None and c.stale_steps and c.current_step not in c.stale_steps


def test_current_first_needs_the_current_turn_and_its_value_on_top():
    case = update_case()
    assert score(case, obs([Hit("r1", "c1", "User moved to Denver."), Hit("r9", "c1", "x")]))["current_first"] == 1
    assert score(case, obs([Hit("r9", "c1", "x"), Hit("r1", "c1", "User moved to Denver.")]))["current_first"] == 0
    assert score(case, obs([Hit("r1", "c1", "User moved.")]))["current_first"] == 0
    assert score(case, obs([]))["current_first"] == 0


def test_stale_hidden_fails_when_any_result_is_the_outdated_fact():
    case = update_case()
    assert score(case, obs([Hit("r1", "c1", "Denver", ("m1",))]))["stale_hidden"] == 1
    assert score(case, obs([Hit("r1", "c1", "Denver", ("m1",)), Hit("r0", "c1", "Boston", ("m0",))]))[
        "stale_hidden"] == 0
    # other chatter of the outdated conversation is not the outdated fact
    assert score(case, obs([Hit("r1", "c1", "Denver", ("m1",)), Hit("r0", "c1", "Anyway.", ("m0b",))]))[
        "stale_hidden"] == 1


def test_false_supersede_counts_a_kept_fact_that_lost_its_active_memory():
    case = Case(id="c1", kind="pets", expect="keep", steps=(step("I have a dog."), step("I have a cat.", T1)),
                question="pets?", keep_steps=(0, 1))
    assert score(case, obs([], statuses=(["active"], ["active"]), actions=(["ADD"], ["ADD"])))["false_supersede"] == 0
    assert score(case, obs([], statuses=(["superseded"], ["active"])))["false_supersede"] == 1
    # dropped as a duplicate: the step added nothing of its own, but it did decide something
    assert score(case, obs([], statuses=(["active"], []), actions=(["ADD"], ["NOOP"])))["false_supersede"] == 1
    # nothing extracted at all is counted apart
    s = score(case, obs([], statuses=(["active"], []), actions=(["ADD"], [])))
    assert s["false_supersede"] == 0 and s["unextracted"] == 1


def test_cross_tenant_counts_foreign_hits_and_changed_twins():
    case = update_case(twin=True)
    clean = obs([Hit("r1", "c1", "Denver")], twin_tenant="c1-twin", twin_hits=[Hit("t0", "c1-twin", "Boston")])
    assert score(case, clean)["cross_tenant"] == 0
    leaked = obs([Hit("r1", "c1", "Denver"), Hit("t0", "c1-twin", "Boston")], twin_tenant="c1-twin")
    assert score(case, leaked)["cross_tenant"] == 1
    touched = obs([Hit("r1", "c1", "Denver")], twin_tenant="c1-twin", twin_changed=1)
    assert score(case, touched)["cross_tenant"] == 1


def test_aggregate_averages_rates_per_kind_and_sums_counts():
    a, b = update_case(), update_case()
    out = aggregate([(a, {"current_first": 1.0, "stale_hidden": 0.0, "cross_tenant": 0.0, "unextracted": 1.0}),
                     (b, {"current_first": 0.0, "stale_hidden": 0.0, "cross_tenant": 2.0, "unextracted": 0.0})])
    assert out["residence"]["current_first"] == 0.5 and out["all"]["cross_tenant"] == 2
    assert out["all"]["unextracted"] == 1 and out["all"]["false_supersede"] is None


def test_the_bench_runs_every_path_side_by_side_and_the_faulty_llm_loses_nothing(tmp_path):
    """End to end on three cases (an update with a twin, a keep, a restatement), hashing embedder."""
    import argparse
    import json

    from memlane.bench.updates import format_report, run

    wanted = {"res-01", "res-06"}
    rows = [json.loads(line) for line in DEFAULT_DATA.read_text().splitlines() if line.strip()]
    keep = next(r for r in rows if r["expect"] == "keep")
    data = tmp_path / "cases.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows if r["id"] in wanted or r is keep) + "\n")
    args = argparse.Namespace(data=data, kinds=None, embedder="hashing", json_out=None, failures=False,
                              paths="rules,scripted,faulty")
    report = run(args)
    paths = report["paths"]
    assert set(paths) == {"rules", "scripted", "faulty"}
    scripted = paths["scripted"]["results"]["all"]
    assert scripted["current_first"] == 1.0 and scripted["stale_hidden"] == 1.0
    assert scripted["false_supersede"] == 0.0 and scripted["single_copy"] == 1.0 and scripted["cross_tenant"] == 0
    assert paths["scripted"]["llm"]["calls"] >= 2 and paths["scripted"]["llm"]["unusable"] == 0
    faulty = paths["faulty"]["results"]["all"]
    assert faulty["non_add"] == 0 and faulty["inactive_steps"] == 0 and faulty["false_supersede"] == 0.0
    assert faulty["cross_tenant"] == 0 and paths["faulty"]["llm"]["unusable"] >= 1
    text = format_report(report)
    assert "rules / scripted LLM" in text and "| all " in text and "not a model's judgement" in text and "fail-safe" in text
