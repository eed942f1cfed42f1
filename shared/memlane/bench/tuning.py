"""One procedure for every method's free parameters (BM25 k1/b, RRF k and weights, memlane's rrf_k):
a grid, each point scored by the mean of one objective over the headline questions, the best kept
(on a tie the earlier point, so a default listed first wins ties).

memlane's own rrf_k=10 was picked that way on the whole dev split (docs/benchmarks.md, step 3). Picking
on the same questions that are then reported flatters every method; so the benchmark also
cross-validates: the conversations are split in two halves, each half is scored with the point chosen
on the other, and both halves together give a held-out figure for every question.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Fold:
    tuned_on: tuple[str, ...]
    chosen: str
    scored_on: tuple[str, ...]


@dataclass
class CrossValidation:
    in_sample: str  # the point chosen on every question
    per_question: list[str]  # the point each question is scored with, chosen without it
    folds: list[Fold] = field(default_factory=list)

    @property
    def held_out(self) -> bool:
        return bool(self.folds)


def folds(conversations: Sequence[str]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Two folds over the sorted conversation ids taken alternately: (tune, score) and (score, tune)."""
    ordered = sorted(set(conversations))
    if len(ordered) < 2:
        return []
    first, second = tuple(ordered[0::2]), tuple(ordered[1::2])
    return [(first, second), (second, first)]


def choose(objective: Mapping[str, Sequence[float]], mask: Sequence[bool]) -> str:
    """The grid point with the best mean objective over the questions `mask` lets it see."""
    seen = sum(1 for m in mask if m)
    if not seen:
        raise ValueError("no questions to tune on")
    best, best_mean = "", float("-inf")
    for point, values in objective.items():
        mean = sum(v for v, m in zip(values, mask) if m) / seen
        if mean > best_mean + 1e-12:  # strictly better, so ties keep the earlier point
            best, best_mean = point, mean
    return best


def cross_validate(objective: Mapping[str, Sequence[float]], conversation_of: Sequence[str],
                   headline: Sequence[bool]) -> CrossValidation:
    """The in-sample choice, and for each question the point chosen on the other half of the conversations."""
    in_sample = choose(objective, headline)
    out = CrossValidation(in_sample=in_sample, per_question=[in_sample] * len(conversation_of))
    for tune, score in folds(conversation_of):
        tune_set, score_set = set(tune), set(score)
        chosen = choose(objective, [h and c in tune_set for h, c in zip(headline, conversation_of)])
        out.folds.append(Fold(tune, chosen, score))
        for i, c in enumerate(conversation_of):
            if c in score_set:
                out.per_question[i] = chosen
    return out
