"""Write-time consolidation: compare a candidate with the nearest memories of its scope.

Deterministic and conservative: a near-duplicate is a NOOP; otherwise the candidate is added.
Superseding (UPDATE) needs to know two statements disagree about the same attribute, which the
LLM decides when one is configured, and dream does later with more context.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.models import ExtractAction, Memory


@dataclass(frozen=True)
class Neighbour:
    memory: Memory
    similarity: float  # cosine of the candidate to this memory


@dataclass(frozen=True)
class Decision:
    action: ExtractAction
    target: Memory | None = None


def decide(neighbours: list[Neighbour], *, duplicate_similarity: float) -> Decision:
    best = max(neighbours, key=lambda n: n.similarity, default=None)
    if best is not None and best.similarity >= duplicate_similarity:
        return Decision(ExtractAction.NOOP, best.memory)
    return Decision(ExtractAction.ADD)
