"""Write-time consolidation with an LLM: one call per extraction batch.

The new statements are shown numbered [c1], [c2], ...; under each, its nearest existing memories
numbered [m1], [m2], ... (numbers are global to the call). The model answers with those numbers,
never with ids; `resolve` keeps only a decision that names a candidate once and memories shown
under that candidate, and says what is wrong otherwise (for the one repair turn).
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SYSTEM = """You keep an AI agent's long-term memory about one user true. You receive NEW statements
just extracted from a conversation, numbered [c1], [c2], ..., each followed by the EXISTING memories
closest to it, numbered [m1], [m2], ..., each with the time it was said. For every new statement
decide exactly one action:
- ADD: it says something new, or something that can hold beside the existing memories (a second
  pet, another allergy, another hobby, another person).
- UPDATE: it gives a new value of what an existing memory says (the user moved, changed jobs, a
  changed number, code, name, date or place). `targets`: the memories it replaces.
- DELETE: it retracts an existing memory ("not allergic after all", "no longer vegan", "quit").
  `targets`: the memories it retracts.
- NOOP: an existing memory already says exactly this (same value). `targets`: that one memory.
Rules: a different number, name, code or place is never a NOOP. Statements about different people
are unrelated. Name only memories listed under that statement. Give a short `reason` and an honest
`confidence` (0..1). Answer with JSON only, matching the schema."""

TEMPLATE = """New statements and the existing memories closest to each (number, said at, text):
{batch}

Decide one action per new statement."""

REPAIR = """Your answer could not be used:
{errors}
Answer again for every new statement, naming only the numbers shown."""


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: int = Field(ge=1, description="the new statement's number: 3 for [c3]")
    action: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    targets: list[int] = Field(default_factory=list, max_length=10,
                               description="memory numbers shown under this statement: 2 for [m2]")
    reason: str = Field(default="", max_length=300)
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)


class ConsolidationResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[Decision] = Field(max_length=200)


def resolve(answer: ConsolidationResult, shown: dict[int, list[int]]) -> tuple[dict[int, Decision], list[str]]:
    """The usable decisions by candidate number, and what is wrong with the others.
    `shown`: per candidate number, the memory numbers shown under it."""
    usable: dict[int, Decision] = {}
    errors: list[str] = []
    for d in answer.decisions:
        if d.candidate not in shown:
            errors.append(f"[c{d.candidate}] is not a new statement")
        elif d.candidate in usable:
            errors.append(f"[c{d.candidate}] was decided twice")
        elif any(t not in shown[d.candidate] for t in d.targets):
            errors.append(f"[c{d.candidate}] names memories not shown under it")
        elif d.action in ("UPDATE", "DELETE") and not d.targets:
            errors.append(f"[c{d.candidate}] {d.action} needs targets")
        elif d.action == "NOOP" and len(d.targets) != 1:
            errors.append(f"[c{d.candidate}] NOOP needs exactly one target")
        else:
            usable[d.candidate] = d
    errors += [f"[c{c}] has no decision" for c in shown if c not in usable and not any(
        e.startswith(f"[c{c}]") for e in errors)]
    return usable, errors
