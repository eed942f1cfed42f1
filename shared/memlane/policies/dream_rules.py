"""Consolidation rules of the deterministic dream engine: pure functions, no I/O.

- **Recency** is when a memory was *said*: its newest evidence message id (message ids start
  with the message time, then its position in the request), else its creation time.
- **Duplicates** need a high embedding similarity *and* agreement on what embeddings blur:
  numbers and names ("Ann is 34" / "Ann is 35" are 0.98 apart under MiniLM and not the same fact).
- **Supersession**: of two statements of one single-valued attribute of one subject, the newer
  wins; the older is superseded, never deleted. A newer statement that reports the change
  ("moved from Boston to Denver") is stronger evidence than a bare contradiction.
- **Expired plans**: a plan whose time has passed (plus a grace period) is retired.

Confidences are calibrated so the store's default threshold (0.8) lets through what the rules
are sure of and leaves for review what they are not (an older memory that says more than the
attribute being replaced; a near-duplicate with extra words).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from ..domain.ids import time_prefix
from ..domain.models import Memory, MemoryType
from .dream_attributes import AttributeFact, normalise

MAX_CLUSTER = 8  # memories one MERGE may fold together
MAX_MERGE_CHARS = 4000  # longer memories are documents, not statements: never merged

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9\-]*|[.!?:]")
_WORD = re.compile(r"[A-Za-z][\w'’\-]*")
_FILLER = frozenset(
    "a an the is are was were be been being am has have had do does did to of in on at for from with by and or but "
    "not no so as that this these those it its it's he she they them their his her him i me my we our you your "
    "very really also just now still currently recently lives live living lived moved move moving works work "
    "working worked s who which will would can could should there here".split())


def recency(memory: Memory) -> str:
    """A sortable key of when the memory was said (its newest evidence message), then when it was written."""
    said = max(memory.evidence) if memory.evidence else time_prefix(memory.created_at)
    return f"{said}|{memory.created_at.isoformat()}"


def content_words(text: str) -> set[str]:
    return {normalise(w) for w in _WORD.findall(text) if w.lower() not in _FILLER} - {""}


def _names_and_words(text: str) -> tuple[set[str], set[str]]:
    """Capitalised words that do not open a sentence (names, places), and all words, lower case."""
    names, words, opening = set(), set(), True
    for token in _TOKEN.findall(text):
        if token in ".!?:":
            opening = True
            continue
        if not opening and token[0].isupper() and token[1:2].islower():
            names.add(token.lower())
        words.add(token.lower())
        opening = False
    return names, words


def compatible_duplicates(a: str, b: str) -> bool:
    """Embeddings blur numbers and names; two statements that differ in one are not the same fact."""
    if set(_NUMBER.findall(a)) != set(_NUMBER.findall(b)):
        return False
    (names_a, words_a), (names_b, words_b) = _names_and_words(a), _names_and_words(b)
    return names_a <= words_b and names_b <= words_a


def mergeable_types(a: MemoryType, b: MemoryType) -> bool:
    loose = {MemoryType.FACT, MemoryType.PREFERENCE}
    return a == b or (a in loose and b in loose)


def merge_confidence(similarity: float, threshold: float, *, same_fact: bool, residual_words: int) -> float:
    """0.80 at the threshold rising to 0.99 at identity; a shared attribute value is 0.9 at least;
    extra words the survivor does not carry cap it at 0.7 (review before folding)."""
    span = max(1e-6, 1.0 - threshold)
    conf = 0.80 + 0.19 * min(1.0, max(0.0, (similarity - threshold) / span))
    if same_fact:
        conf = max(conf, 0.9)
    if residual_words > 3:
        conf = min(conf, 0.7)
    return round(conf, 3)


def update_confidence(newer: AttributeFact, older: AttributeFact, *, covered: bool) -> float:
    """How sure that `newer` replaces `older` (same subject and single-valued attribute, other value)."""
    if newer.old_value and older.value and newer.old_value.split()[:1] == older.value.split()[:1]:
        conf = 0.97  # "moved from Boston to Denver" names the value it replaces
    elif newer.change:
        conf = 0.92  # a statement of change ("moved to", "became")
    else:
        conf = 0.85  # a bare contradiction, resolved by recency
    if not covered:
        conf = min(conf, 0.6)  # the older memory says more than this attribute: a person should look
    return conf


def residual(older: Memory, newer: Memory, facts: list[AttributeFact]) -> set[str]:
    """Content words of `older` that neither `newer` nor the replaced attribute values account for."""
    accounted = content_words(newer.text)
    for f in facts:
        accounted |= set(f.value.split()) | set(normalise(f.value_text).split()) | set(f.subject.split())
    return content_words(older.text) - accounted


def expired_plan(memory: Memory, now: datetime, grace_days: float) -> bool:
    return (memory.memory_type == MemoryType.PLAN and memory.event_time is not None
            and memory.event_time < now - timedelta(days=grace_days))


PLAN_RETIRE_CONFIDENCE = 0.85
PROFILE_CONFIDENCE = 0.9


def skill_confidence(repeats: int) -> float:
    """Two successful runs of a procedure are a hint (0.6); four or more are a habit (0.8, capped at 0.9)."""
    return round(min(0.9, 0.6 + 0.1 * (repeats - 2)), 3)
