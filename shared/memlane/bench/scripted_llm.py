"""Scripted LLMs for `memlane bench updates`: the LLM port answered from a case's labels.

They measure the LLM consolidation path's plumbing — the real prompt (prompts/consolidate.py, built by
services/consolidate_llm.py), a strict parse of a JSON answer, validation of the ids it names, the
repair turn, the fail-safe, applying the decision and searching after it — not a model's judgement.

- `ScriptedLLM` reads the numbered new statements [cN] and the memories [mN] shown under each from
  the prompt, and answers as the case's labels say: a later statement of the fact the case is about
  replaces (UPDATE) or retracts (DELETE) an earlier one, a restatement is a NOOP, everything else ADD.
- `FaultyLLM` answers wrongly the ways models do, in turn: it names a memory it was not shown (and
  again in the repair turn), it answers malformed JSON, or it names an unshown memory and then
  repairs with an answer that does not validate. Every candidate must then be ADDed: nothing lost,
  nothing superseded on a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from ..adapters.structured_output import describe_validation_error
from ..domain.errors import DependencyFailed
from ..domain.models import Candidate, Message
from ..prompts import consolidate as consolidation_prompt

T = TypeVar("T", bound=BaseModel)

_CANDIDATE = re.compile(r"^\[c(\d+)\] \(said [^)]*\) (.*)$")
_MEMORY = re.compile(r"^\s+\[m(\d+)\](?: \(said [^)]*\))? (.*)$")
_REPAIR_HEAD = consolidation_prompt.REPAIR.split("\n", 1)[0]


@dataclass(frozen=True)
class Shown:
    """What one consolidation prompt shows: the new statements, the memories, which are under which."""

    candidates: dict[int, str]
    memories: dict[int, str]
    under: dict[int, list[int]]
    repair: bool = False  # the prompt is a repair turn


def read_prompt(text: str) -> Shown:
    candidates: dict[int, str] = {}
    memories: dict[int, str] = {}
    under: dict[int, list[int]] = {}
    current = None
    for line in text.splitlines():
        if m := _CANDIDATE.match(line):
            current = int(m[1])
            candidates[current] = m[2]
            under[current] = []
        elif (m := _MEMORY.match(line)) and current is not None:
            memories[int(m[1])] = m[2]
            under[current].append(int(m[1]))
    return Shown(candidates, memories, under, repair=_REPAIR_HEAD in text)


# -- the labels: which step, and which message of it, each statement comes from ------------------
@dataclass(frozen=True)
class Label:
    step: int
    fact: bool  # from the step's first message: the fact the case is about (else chatter around it)


@dataclass
class Truth:
    """What the scripted model knows: the case, the step being added, and a label per statement text
    (set by `LabellingExtractor` as the statements are extracted)."""

    case: Any = None
    step: int = -1
    labels: dict[str, Label] = field(default_factory=dict)  # the first step that said each text
    now: dict[str, Label] = field(default_factory=dict)  # the step being added: its own statements

    def begin(self, case: Any, step: int) -> None:
        if case is not self.case:
            self.labels.clear()
        self.case, self.step = case, step
        self.now.clear()

    def label(self, candidate: Candidate, messages: Sequence[Message]) -> None:
        fact_text = self.case.steps[self.step].messages[0]["content"]
        fact = any(m.content == fact_text for m in messages if m.message_id in candidate.evidence)
        self.now[candidate.text] = Label(self.step, fact)
        self.labels.setdefault(candidate.text, self.now[candidate.text])


class LabellingExtractor:
    """The real extractor, with each candidate labelled for the scripted model on the way out."""

    def __init__(self, inner: Any, truth: Truth) -> None:
        self.inner, self.truth = inner, truth

    def extract(self, messages: Sequence[Message], **kwargs: Any) -> list[Candidate]:
        candidates = self.inner.extract(messages, **kwargs)
        for c in candidates:
            self.truth.label(c, messages)
        return candidates


def truthful(shown: Shown, truth: Truth) -> dict[str, Any]:
    """The answer the case's labels give, as the JSON object a model would send."""
    case = truth.case
    chain = [*case.stale_steps, *([case.current_step] if case.current_step is not None else [])]
    decisions = []
    for c, text in shown.candidates.items():
        decision: dict[str, Any] = {"candidate": c, "action": "ADD", "reason": "new", "confidence": 0.9}
        decisions.append(decision)
        mine = truth.now.get(text)
        if mine is None or not mine.fact:  # chatter around the fact, or a statement it was not told about
            continue
        labelled = [(m, truth.labels.get(shown.memories[m])) for m in shown.under[c]]
        facts = [(m, lab) for m, lab in labelled if lab is not None and lab.fact and lab.step != mine.step]
        if facts:
            if case.expect == "same":
                decision.update(action="NOOP", targets=[facts[0][0]], reason="same value")
            elif case.expect in ("update", "retract") and mine.step in chain:
                related = [(m, lab) for m, lab in facts if lab.step in chain]
                if related:
                    # The later of two statements holds; said in order or not, the answer names the pair.
                    later = max([mine.step, *(lab.step for _, lab in related)], key=lambda s: case.steps[s].at)
                    retracts = case.expect == "retract" and later == case.current_step
                    decision.update(action="DELETE" if retracts else "UPDATE", targets=[m for m, _ in related],
                                    reason="the later statement holds")
    return {"decisions": decisions}


def strict_parse(text: str, response_model: type[T]) -> T:
    """What the adapters do with a model's answer: validate it against the schema, or fail."""
    try:
        return response_model.model_validate_json(text)
    except ValidationError as e:
        raise DependencyFailed(f"scripted model gave no valid {response_model.__name__}: "
                               f"{describe_validation_error(e)}", code="llm_invalid_output") from e


@dataclass
class Counts:
    calls: int = 0
    repairs: int = 0  # repair turns asked for
    unusable: int = 0  # answers that did not parse or validate


class ScriptedLLM:
    """The LLM port, answered from the labels (see the module docstring)."""

    name = "scripted"

    def __init__(self, truth: Truth) -> None:
        self.truth = truth
        self.counts = Counts()

    def generate(self, *, system: str, prompt: str, response_model: type[T]) -> T:
        if response_model is not consolidation_prompt.ConsolidationResult:
            raise DependencyFailed(f"the scripted model answers consolidation only, not {response_model.__name__}",
                                   code="llm_invalid_output")
        shown = read_prompt(prompt)
        self.counts.calls += 1
        self.counts.repairs += shown.repair
        try:
            return strict_parse(self.answer(shown), response_model)
        except DependencyFailed:
            self.counts.unusable += 1
            raise

    def answer(self, shown: Shown) -> str:
        return json.dumps(truthful(shown, self.truth))


class FaultyLLM(ScriptedLLM):
    """Answers wrongly, one failure mode per batch in turn (see the module docstring)."""

    name = "scripted-faulty"
    MODES = ("unshown_id", "malformed_json", "invalid_repair")

    def __init__(self, truth: Truth) -> None:
        super().__init__(truth)
        self.batches = 0

    def answer(self, shown: Shown) -> str:
        if not shown.repair:
            self.batches += 1
        mode = self.MODES[(self.batches - 1) % len(self.MODES)]
        if mode == "malformed_json":
            return json.dumps(truthful(shown, self.truth))[:-7]  # cut off mid-answer
        if shown.repair and mode == "invalid_repair":
            return json.dumps({"decisions": [{"candidate": c, "action": "REPLACE", "targets": []}
                                             for c in shown.candidates]})
        # A memory not shown under the statement: one past the last number of the prompt.
        beyond = max(shown.memories, default=0) + 1
        return json.dumps({"decisions": [{"candidate": c, "action": "UPDATE", "targets": [beyond],
                                          "reason": "it changed", "confidence": 0.9} for c in shown.candidates]})
