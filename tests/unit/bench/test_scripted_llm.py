"""The scripted LLMs of `memlane bench updates` (bench/scripted_llm.py): they read the real
consolidation prompt, answer from a case's labels, and — the faulty one — answer wrongly the ways
models do, which the LLM path must turn into ADD (nothing lost, nothing superseded)."""

from datetime import datetime, timedelta, timezone

import pytest

from memlane.bench.scripted_llm import FaultyLLM, Label, ScriptedLLM, Truth, read_prompt, truthful
from memlane.bench.updates import Case, Step
from memlane.domain.errors import DependencyFailed
from memlane.domain.models import Candidate, ExtractAction, Memory
from memlane.domain.scope import Scope
from memlane.policies.consolidation import Neighbour
from memlane.services import consolidate_llm

T0 = datetime(2025, 1, 10, tzinfo=timezone.utc)
SCOPE = Scope(app_id="a", tenant_id="t", agent_id="g", run_id="r")
OLD, NEW, CHAT = "User lives in Boston.", "User moved from Boston to Denver.", "User says hi to everyone."


def memory(text, day=0):
    at = T0 + timedelta(days=day)
    return Memory(memory_id=text[:12], scope=SCOPE, text=text, created_at=at, updated_at=at, observed_at=at)


def case(expect="update", order=()):
    steps = tuple(Step(at=T0 + timedelta(days=30 * i), run=f"conv-{i}", agent="assistant",
                       messages=({"role": "user", "content": t},)) for i, t in enumerate(("I live in Boston.",
                                                                                        "I moved to Denver.")))
    return Case(id="res-x", kind="residence", expect=expect, steps=steps, question="where?", current="Denver",
                current_step=1 if expect in ("update", "retract") else None,
                stale_steps=(0,) if expect in ("update", "retract") else (), keep_steps=(0, 1), ingest_order=order)


class Capture:
    name = "capture"

    def __init__(self):
        self.prompts = []

    def generate(self, *, system, prompt, response_model):
        self.prompts.append(prompt)
        raise DependencyFailed("no answer", code="llm_invalid_output")


def batch(*candidates, neighbours):
    """Candidates said on day 30, each shown the given neighbours."""
    cands = [Candidate(text=t) for t in candidates]
    nearest = {i: [Neighbour(m, 0.8) for m in neighbours] for i in range(len(cands))}
    return cands, nearest, [T0 + timedelta(days=30)] * len(cands)


def truth_for(c, step, labels, now):
    truth = Truth()
    truth.begin(c, step)
    truth.labels.update(labels)
    truth.now.update(now)
    return truth


def test_reads_the_numbered_statements_and_the_memories_under_each_from_the_real_prompt():
    llm = Capture()
    consolidate_llm.decide(llm, *batch(NEW, CHAT, neighbours=[memory(OLD), memory("User has a cat.")]))
    shown = read_prompt(llm.prompts[0])
    assert shown.candidates == {1: NEW, 2: CHAT}
    assert shown.memories == {1: OLD, 2: "User has a cat.", 3: OLD, 4: "User has a cat."}
    assert shown.under == {1: [1, 2], 2: [3, 4]} and not shown.repair


def test_the_labelled_truth_updates_the_stale_fact_and_adds_the_rest():
    c = case()
    shown = read_prompt(_prompt(NEW, CHAT, neighbours=[memory(OLD), memory("User has a cat.")]))
    truth = truth_for(c, 1, {OLD: Label(0, True), "User has a cat.": Label(0, False)},
                      {NEW: Label(1, True), CHAT: Label(1, False)})
    decisions = {d["candidate"]: d for d in truthful(shown, truth)["decisions"]}
    assert decisions[1]["action"] == "UPDATE" and decisions[1]["targets"] == [1]  # the fact, not the chatter
    assert decisions[2]["action"] == "ADD"  # chatter of the new conversation


@pytest.mark.parametrize("expect,action", [("keep", "ADD"), ("same", "NOOP"), ("retract", "DELETE")])
def test_the_labelled_truth_follows_the_case(expect, action):
    shown = read_prompt(_prompt(NEW, neighbours=[memory(OLD)]))
    truth = truth_for(case(expect), 1, {OLD: Label(0, True)}, {NEW: Label(1, True)})
    assert truthful(shown, truth)["decisions"][0]["action"] == action


def test_an_older_statement_imported_after_the_newer_one_is_closed_through_the_real_path():
    # Step 0 (Boston) is added after step 1 (Denver): the answer names the newer memory, and the path
    # keeps the newer one current (the decision is "older").
    c = case(order=(1, 0))
    denver = memory(NEW, day=30)
    truth = truth_for(c, 0, {NEW: Label(1, True)}, {OLD: Label(0, True)})
    cands = [Candidate(text=OLD)]
    out = consolidate_llm.decide(ScriptedLLM(truth), cands, {0: [Neighbour(denver, 0.8)]}, [T0])
    assert out[0].action == ExtractAction.UPDATE and out[0].older and out[0].targets == (denver,)


def test_scripted_answers_go_through_a_strict_parse():
    truth = truth_for(case(), 1, {OLD: Label(0, True)}, {NEW: Label(1, True)})
    llm = ScriptedLLM(truth)
    llm.answer = lambda shown: '{"decisions": [{"candidate": 1, "action": "UPDATE", "targets": [1], "extra": 1}]}'
    with pytest.raises(DependencyFailed):  # extra="forbid" in the response model
        llm.generate(system="", prompt=_prompt(NEW, neighbours=[memory(OLD)]),
                     response_model=consolidate_llm.prompt.ConsolidationResult)
    assert llm.counts.unusable == 1


def test_the_faulty_model_is_failed_safe_in_each_of_its_modes():
    truth = truth_for(case(), 1, {OLD: Label(0, True)}, {NEW: Label(1, True)})
    llm = FaultyLLM(truth)
    for mode in FaultyLLM.MODES:  # one batch each, in turn
        out = consolidate_llm.decide(llm, *batch(NEW, neighbours=[memory(OLD)]))
        assert out[0].action == ExtractAction.ADD and not out[0].targets, mode
    # unshown id: answer + repair (both name m2, not shown); malformed: one unparsable answer;
    # invalid repair: an unshown id, then a repair that does not validate.
    assert (llm.counts.calls, llm.counts.repairs, llm.counts.unusable) == (5, 2, 2)


def _prompt(*candidates, neighbours):
    llm = Capture()
    consolidate_llm.decide(llm, *batch(*candidates, neighbours=neighbours))
    return llm.prompts[0]
