"""Bootstrap confidence intervals for the benchmarks' recall figures. Pure functions over numpy.

Percentile bootstrap of a mean, seeded so a figure is reproducible from its JSON. Resampling
questions treats them as independent; resampling conversations (``groups``) keeps each conversation's
questions together — LoCoMo questions about one conversation share its memories, so this is the
honest interval when there are few conversations (it is wide: the dev split has six).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

MIN_RESAMPLES = 1000


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


def _draws(values: np.ndarray, groups: Sequence[Hashable] | None, resamples: int, seed: int) -> np.ndarray:
    """`resamples` bootstrap means of `values`: questions drawn with replacement, or whole groups."""
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"at least {MIN_RESAMPLES} resamples")
    rng = np.random.default_rng(seed)
    if groups is None:
        idx = rng.integers(0, len(values), size=(resamples, len(values)))
        return values[idx].mean(axis=1)
    if len(groups) != len(values):
        raise ValueError("one group per value")
    names = list(dict.fromkeys(groups))
    where = {g: i for i, g in enumerate(names)}
    code = np.fromiter((where[g] for g in groups), dtype=np.int64, count=len(groups))
    sums = np.bincount(code, weights=values, minlength=len(names))
    counts = np.bincount(code, minlength=len(names)).astype(float)
    idx = rng.integers(0, len(names), size=(resamples, len(names)))
    # A drawn conversation brings all its questions: the mean over the pooled questions.
    return sums[idx].sum(axis=1) / counts[idx].sum(axis=1)


def _interval(values: np.ndarray, draws: np.ndarray, level: float) -> Interval:
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Interval(round(float(values.mean()), 4), round(float(low), 4), round(float(high), 4))


def bootstrap_mean(values: Sequence[float], *, groups: Sequence[Hashable] | None = None,
                   resamples: int = MIN_RESAMPLES, seed: int = 0, level: float = 0.95) -> Interval:
    """The mean of `values` with its `level` percentile-bootstrap interval."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no values")
    return _interval(arr, _draws(arr, groups, resamples, seed), level)


def paired_difference(a: Sequence[float], b: Sequence[float], *, groups: Sequence[Hashable] | None = None,
                      resamples: int = MIN_RESAMPLES, seed: int = 0, level: float = 0.95) -> Interval:
    """Mean of a − b over the same questions, with its interval: pairing cancels what both share
    (a hard question is hard for both), so it is narrower than two separate intervals suggest."""
    if len(a) != len(b):
        raise ValueError("paired values need the same questions")
    return bootstrap_mean(np.asarray(a, dtype=float) - np.asarray(b, dtype=float), groups=groups,
                          resamples=resamples, seed=seed, level=level)
