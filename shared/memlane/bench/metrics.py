"""Metric functions shared by the benchmarks. Pure functions, no I/O, unit-tested in tests/unit/bench.

Token counting: ``tokens(text) = ceil(1.3 × words)``, words being whitespace-separated runs.
It is the usual rule of thumb for English BPE/WordPiece tokenizers (≈0.75 words per token),
needs no model, and is the same for every method, which is all a comparison needs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

from ..domain.language import MONTHS as _MONTHS

TOKENS_PER_WORD = 1.3

# LoCoMo session times: "1:56 pm on 8 May, 2023" (a few have no comma, or a two-digit hour).
_LOCOMO_TIME = re.compile(
    r"^\s*(?P<h>\d{1,2}):(?P<m>\d{2})\s*(?P<ampm>am|pm)\s+on\s+(?P<d>\d{1,2})\s+(?P<month>[A-Za-z]+),?\s+(?P<y>\d{4})\s*$",
    re.I)
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")


def tokens(text: str) -> int:
    """Approximate LLM tokens of `text`: ceil(1.3 × whitespace words)."""
    words = len(text.split())
    return math.ceil(words * TOKENS_PER_WORD) if words else 0


def parse_locomo_time(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → 2023-05-08 13:56 UTC. ValueError if it does not parse."""
    m = _LOCOMO_TIME.match(value)
    if not m:
        raise ValueError(f"not a LoCoMo session time: {value!r}")
    name = m["month"].lower()
    # A full month name or an abbreviation of one ("Sep", "Sept"), nothing else.
    month = next((n for full, n in _MONTHS.items() if len(name) >= 3 and full.startswith(name)), 0)
    if not month:
        raise ValueError(f"unknown month in {value!r}")
    if not 1 <= int(m["h"]) <= 12 or int(m["m"]) > 59:
        raise ValueError(f"not a 12-hour clock time: {value!r}")
    hour = int(m["h"]) % 12 + (12 if m["ampm"].lower() == "pm" else 0)
    return datetime(int(m["y"]), month, int(m["d"]), hour, int(m["m"]), tzinfo=timezone.utc)


def valid_dia_id(value: object) -> bool:
    return isinstance(value, str) and _DIA_ID.match(value.strip()) is not None


def clean_evidence(evidence: Iterable[object], known: Iterable[str]) -> tuple[list[str], int]:
    """Evidence ids that name a known turn (deduplicated, in order), and how many did not."""
    known_set = set(known)
    good: list[str] = []
    bad = 0
    for e in evidence:
        e2 = e.strip() if isinstance(e, str) else e
        if valid_dia_id(e2) and e2 in known_set:
            if e2 not in good:
                good.append(e2)  # type: ignore[arg-type]
        else:
            bad += 1
    return good, bad


def covered(results: Sequence[Iterable[str]], k: int | None = None) -> set[str]:
    """The turns covered by the first `k` results, each result given as the turns it covers."""
    out: set[str] = set()
    for r in results[:k] if k is not None else results:
        out.update(r)
    return out


def recall_at(results: Sequence[Iterable[str]], evidence: Sequence[str], k: int) -> float:
    """Share of the evidence turns covered by the first k results."""
    if not evidence:
        raise ValueError("recall of a question without evidence is undefined")
    hit = covered(results, k)
    return sum(1 for e in set(evidence) if e in hit) / len(set(evidence))


def all_hit_at(results: Sequence[Iterable[str]], evidence: Sequence[str], k: int) -> float:
    """1.0 when every evidence turn is covered by the first k results, else 0.0."""
    return 1.0 if recall_at(results, evidence, k) >= 1.0 else 0.0


def budget_cut(texts: Sequence[str], budget: int) -> int:
    """How many leading results fit in `budget` tokens of returned text (stops at the first that does not)."""
    return count_cut([tokens(t) for t in texts], budget)


def count_cut(costs: Sequence[int], budget: int) -> int:
    """How many leading results fit in `budget` when each costs what `costs` says (stops at the first
    that does not fit: a reader takes results in order, it does not skip past a long one)."""
    used = 0
    for i, cost in enumerate(costs):
        used += cost
        if used > budget:
            return i
    return len(costs)


def recall_within_counts(results: Sequence[Iterable[str]], counts: Sequence[int], evidence: Sequence[str],
                         budget: int) -> float:
    """Recall of the leading results whose token counts (from any tokenizer) fit in `budget`."""
    return recall_at(results, evidence, count_cut(counts, budget))


def turn_cut(results: Sequence[Sequence[str]], turns: int) -> int:
    """How many leading results fit in `turns` dialog turns returned: a result citing two turns spends
    two (it returns both), one citing none still spends one."""
    return count_cut([max(1, len(r)) for r in results], turns)


def recall_within_turns(results: Sequence[Sequence[str]], evidence: Sequence[str], turns: int) -> float:
    return recall_at(results, evidence, turn_cut(results, turns))


def recall_within_tokens(results: Sequence[Iterable[str]], texts: Sequence[str], evidence: Sequence[str],
                         budget: int) -> float:
    return recall_at(results, evidence, budget_cut(texts, budget))


def map_evidence(memory_evidence: Iterable[str], message_to_turn: Mapping[str, str]) -> list[str]:
    """A memory's evidence message ids → the dialog turn ids they were sent as (unknown ids dropped)."""
    out: list[str] = []
    for mid in memory_evidence:
        turn = message_to_turn.get(mid)
        if turn is not None and turn not in out:
            out.append(turn)
    return out


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile, p in [0, 100]; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass
class Accumulator:
    """Sums of per-question metrics, averaged on demand."""

    n: int = 0
    sums: dict[str, float] | None = None

    def add(self, values: Mapping[str, float]) -> None:
        self.sums = self.sums or {}
        self.n += 1
        for key, value in values.items():
            self.sums[key] = self.sums.get(key, 0.0) + value

    def means(self) -> dict[str, float]:
        return {k: round(v / self.n, 4) for k, v in (self.sums or {}).items()} if self.n else {}


def p50_p95(values: Sequence[float]) -> dict[str, float]:
    """The median and the 95th percentile, rounded to 0.01: how every bench reports a latency."""
    return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2)}
