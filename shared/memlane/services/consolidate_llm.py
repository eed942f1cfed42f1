"""Write-time consolidation decided by the LLM: one call per extraction batch, the candidates with
their nearest memories, a strict response model (prompts/consolidate.py), one repair turn when the
answer names what it was not shown, and ADD for whatever is still undecided (fail-safe: nothing is
superseded on a guess, nothing is lost)."""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from ..domain.errors import DependencyFailed
from ..domain.models import Candidate, ExtractAction
from ..policies.consolidation import Decision, Neighbour, observed
from ..ports import LLM
from ..prompts import consolidate as prompt


def decide(llm: LLM, candidates: Sequence[Candidate], nearest: dict[int, list[Neighbour]],
           times: Sequence[datetime]) -> dict[int, Decision]:
    """A decision per candidate index in `nearest` (the candidates to decide)."""
    order = sorted(nearest)
    shown: dict[int, list[int]] = {}
    memory_of: dict[int, Neighbour] = {}
    lines = []
    for c, i in enumerate(order, start=1):
        lines.append(f"[c{c}] (said {times[i]:%Y-%m-%d %H:%M}) {candidates[i].text}")
        shown[c] = []
        for n in nearest[i]:
            m = len(memory_of) + 1
            memory_of[m] = n
            shown[c].append(m)
            when = observed(n.memory)
            lines.append(f"    [m{m}] (said {when:%Y-%m-%d %H:%M}) {n.memory.text}" if when else
                         f"    [m{m}] {n.memory.text}")
    out = {i: Decision(ExtractAction.ADD) for i in order}
    if not memory_of:
        return out  # nothing to compare with: no call
    request = prompt.TEMPLATE.format(batch="\n".join(lines))
    usable: dict[int, prompt.Decision] = {}
    try:
        answer = llm.generate(system=prompt.SYSTEM, prompt=request, response_model=prompt.ConsolidationResult)
        usable, errors = prompt.resolve(answer, shown)
        if errors:  # one repair turn, then whatever is still not usable stays ADD
            again = llm.generate(system=prompt.SYSTEM, response_model=prompt.ConsolidationResult,
                                 prompt=request + "\n\n" + prompt.REPAIR.format(errors="\n".join(errors)))
            fixed, _ = prompt.resolve(again, shown)
            usable = {**usable, **fixed}
    except DependencyFailed:
        pass  # the model could not answer in the schema: every candidate is added
    for c, d in usable.items():
        i = order[c - 1]
        targets = tuple(memory_of[t].memory for t in d.targets)
        action = ExtractAction(d.action)
        if action == ExtractAction.ADD or not targets:
            continue
        if action == ExtractAction.NOOP:
            out[i] = Decision(action, targets[:1], d.confidence, f"llm: {d.reason}")
            continue
        # Read in the order they were said, whatever the model thought: an older candidate is history.
        newer = [t for t in targets if (observed(t) or times[i]) > times[i]]
        if newer:
            out[i] = Decision(action, (newer[0],), d.confidence, f"llm: {d.reason}; said before the memory",
                              older=True)
        else:
            out[i] = Decision(action, targets, d.confidence, f"llm: {d.reason}")
    return out
