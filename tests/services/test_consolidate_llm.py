"""Write-time consolidation with an LLM: one call per batch, numbers only, one repair turn, fail-safe ADD.

The LLM is a scripted fake implementing the LLM port: it reads the numbered statements and memories
from the prompt the way a model following the schema would, and records every call.
"""

import re
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.errors import DependencyFailed
from memlane.domain.models import ExtractAction, MemoryStatus
from memlane.prompts import consolidate as prompt
from memlane.services import ingest, stores

APP, TENANT = "app", "u1"
T0 = datetime(2025, 1, 10, 9, 0, tzinfo=timezone.utc)


class ScriptedLLM:
    name = "scripted"

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def generate(self, *, system, prompt, response_model):
        assert response_model is prompt_model
        self.calls.append(prompt)
        statements = dict(re.findall(r"^\[c(\d+)\] \([^)]*\) (.*)$", prompt, re.M))
        memories = dict(re.findall(r"^    \[m(\d+)\] \([^)]*\) (.*)$", prompt, re.M))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return response_model.model_validate(answer(statements, memories))


prompt_model = prompt.ConsolidationResult


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def say(deps, store, *texts, day, run):
    return ingest.add(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "a", "run_id": run},
                      sync=True, messages=[{"role": "user", "content": t, "created_at": T0 + timedelta(days=day)}
                                           for t in texts])


def number(found, fragment):
    return int(next(n for n, text in found.items() if fragment in text))


def status(deps, store, memory_id):
    return deps.repo.get_memory(store, APP, TENANT, memory_id).status


def test_one_call_decides_the_batch_by_numbers(deps, store):
    old = say(deps, store, "I live in Boston.", day=0, run="r1")
    deps.llm = ScriptedLLM(lambda s, m: {"decisions": [
        {"candidate": number(s, "Denver"), "action": "UPDATE", "targets": [number(m, "Boston")],
         "reason": "moved", "confidence": 0.95},
        {"candidate": number(s, "cat"), "action": "ADD"}]})
    task = say(deps, store, "I moved to Denver in March.", "I have a cat named Miso.", day=60, run="r2")
    assert len(deps.llm.calls) == 1 and "[c1]" in deps.llm.calls[0] and "[c2]" in deps.llm.calls[0]
    assert old.outcomes[0].memory_id not in deps.llm.calls[0]  # ids are never shown, only numbers
    move, cat = task.outcomes
    assert move.action == ExtractAction.UPDATE and move.target_id == old.outcomes[0].memory_id
    assert move.reason.startswith("llm:") and move.action_id
    assert cat.action == ExtractAction.ADD
    assert status(deps, store, old.outcomes[0].memory_id) == MemoryStatus.SUPERSEDED


def test_an_answer_naming_what_it_was_not_shown_gets_one_repair_turn(deps, store):
    old = say(deps, store, "My phone number is 555-0142.", day=0, run="r1")
    deps.llm = ScriptedLLM(lambda s, m: {"decisions": [{"candidate": 1, "action": "UPDATE", "targets": [99]}]},
                           lambda s, m: {"decisions": [{"candidate": 1, "action": "UPDATE", "targets": [1]}]})
    task = say(deps, store, "My phone number is 555-0199.", day=9, run="r2")
    assert len(deps.llm.calls) == 2 and "could not be used" in deps.llm.calls[1] and "[c1]" in deps.llm.calls[1]
    assert task.outcomes[0].action == ExtractAction.UPDATE
    assert status(deps, store, old.outcomes[0].memory_id) == MemoryStatus.SUPERSEDED


@pytest.mark.parametrize("answers", [
    (lambda s, m: {"decisions": [{"candidate": 7, "action": "NOOP", "targets": [1]}]},
     lambda s, m: {"decisions": [{"candidate": 1, "action": "DELETE"}]}),  # unusable twice
    (DependencyFailed("the model answered outside the schema"),),
])
def test_what_stays_undecided_is_added_and_nothing_is_superseded(deps, store, answers):
    old = say(deps, store, "My phone number is 555-0142.", day=0, run="r1")
    deps.llm = ScriptedLLM(*answers)
    task = say(deps, store, "My phone number is 555-0199.", day=9, run="r2")
    assert [o.action for o in task.outcomes] == [ExtractAction.ADD]
    assert status(deps, store, old.outcomes[0].memory_id) == MemoryStatus.ACTIVE


def test_an_older_statement_stays_history_whatever_the_model_says(deps, store):
    new = say(deps, store, "My phone number is 555-0199.", day=30, run="r2")
    deps.llm = ScriptedLLM(lambda s, m: {"decisions": [{"candidate": 1, "action": "UPDATE", "targets": [1]}]})
    old = say(deps, store, "My phone number is 555-0142.", day=0, run="r1")
    (outcome,) = old.outcomes
    assert outcome.superseded and outcome.target_id == new.outcomes[0].memory_id
    assert status(deps, store, new.outcomes[0].memory_id) == MemoryStatus.ACTIVE
    assert status(deps, store, outcome.memory_id) == MemoryStatus.SUPERSEDED


def test_the_response_model_is_strict():
    with pytest.raises(ValueError):
        prompt.ConsolidationResult.model_validate({"decisions": [{"candidate": 1, "action": "MERGE"}]})
    with pytest.raises(ValueError):
        prompt.ConsolidationResult.model_validate({"decisions": [{"candidate": 1, "action": "ADD", "id": "x"}]})


def test_no_call_when_there_is_nothing_to_compare_with(deps, store):
    deps.llm = ScriptedLLM()
    task = say(deps, store, "I live in Boston.", day=0, run="r1")
    assert deps.llm.calls == [] and [o.action for o in task.outcomes] == [ExtractAction.ADD]
