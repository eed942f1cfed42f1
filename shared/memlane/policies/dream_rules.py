"""What the deterministic dream adds to the decision module (policies/consolidation.py, which
decides when a fact changed, for write time and dream alike): pure functions, no I/O.

- **Recency** is when a memory was *said*: its message's time (`observed_at`), else its newest
  evidence message id (message ids start with the message time), else its creation time.
- **Merges** of the same fact said more than once: which types fold together, how long a
  statement may be, and a confidence from the embedding similarity and what the survivor would lose.
- **Expired plans**: a plan whose time has passed (plus a grace period) is retired.
- Confidences of skills and profiles.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from ..domain.ids import time_prefix
from ..domain.models import Memory, MemoryType
from ..domain.language import FILLER, stem

MAX_CLUSTER = 8  # memories one MERGE may fold together
MAX_MERGE_CHARS = 4000  # longer memories are documents, not statements: never merged

_WORD = re.compile(r"[A-Za-z][\w'’\-]*")


def recency(memory: Memory) -> str:
    """A sortable key of when the memory was said (its message's time), then when it was written."""
    if memory.observed_at is not None:
        said = time_prefix(memory.observed_at)
    else:
        said = max(memory.evidence) if memory.evidence else time_prefix(memory.created_at)
    return f"{said}|{memory.created_at.isoformat()}"


def content_words(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text) if w.lower() not in FILLER} - {""}


def mergeable_types(a: MemoryType, b: MemoryType) -> bool:
    loose = {MemoryType.FACT, MemoryType.PREFERENCE}
    return a == b or (a in loose and b in loose)


def merge_confidence(similarity: float, threshold: float, *, same_fact: bool, residual_words: int) -> float:
    """0.80 at the threshold rising to 0.99 at identity; one that says nothing the other does not is 0.9 at least;
    extra words the survivor does not carry cap it at 0.7 (review before folding)."""
    span = max(1e-6, 1.0 - threshold)
    conf = 0.80 + 0.19 * min(1.0, max(0.0, (similarity - threshold) / span))
    if same_fact:
        conf = max(conf, 0.9)
    if residual_words > 3:
        conf = min(conf, 0.7)
    return round(conf, 3)


def expired_plan(memory: Memory, now: datetime, grace_days: float) -> bool:
    return (memory.memory_type == MemoryType.PLAN and memory.event_time is not None
            and memory.event_time < now - timedelta(days=grace_days))


PLAN_RETIRE_CONFIDENCE = 0.85
PROFILE_CONFIDENCE = 0.9


def skill_confidence(repeats: int) -> float:
    """Two successful runs of a procedure are a hint (0.6); four or more are a habit (0.8, capped at 0.9)."""
    return round(min(0.9, 0.6 + 0.1 * (repeats - 2)), 3)
