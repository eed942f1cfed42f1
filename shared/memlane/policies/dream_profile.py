"""Aggregate memories into a structured profile: stable attributes and preferences, with evidence.

No table of attributes: each statement of the tenant's main subject (the speaker most memories are
about) is read as a relation and a value ("Ann lives in | Boston", "Ann works as | a nurse", "Ann's
favourite colour is | blue"). Whether a newer statement changes an entry is decided by the decision
module every consolidation uses (policies/consolidation.py `relate`): an UPDATE moves the entry to the
new value and keeps the old one under `previous` ("lives in: Denver", previous Boston, after "moved
from Boston to Denver"); a retraction drops it; a restatement adds support. Likes and dislikes are one
entry per object, by their newest statement. Confidence grows with the number of memories that say
the same thing. Pure: memories in, profile out.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from ..domain.models import ExtractAction, Memory, MemoryType, Profile, ProfileEntry, ProfileSkill
from ..domain import language as lang
from .consolidation import Statement, relate
from .dream_rules import recency

MAX_ENTRIES = 100  # per section; the newest win
MAX_SKILLS = 50
MAX_WORDS = 25  # longer memories are passages, not attributes

# What the profile calls a like or a dislike (the relation of a preference statement).
LIKES = frozenset("like likes love loves enjoy enjoys adore adores prefer prefers".split())
DISLIKES = frozenset("dislike dislikes hate hates detest detests avoid avoids".split())
_WORD = re.compile(r"[\w.+\-@]+(?:['’][\w]+)?")


@dataclass(frozen=True)
class Claim:
    """A statement read as `name` (the relation) and `value`, of its subject."""

    memory: Memory
    statement: Statement
    name: str
    value: str


def claim(memory: Memory) -> Claim | None:
    st = Statement(memory.text)
    if not st.subject or not st.factual or st.sentences > 1 or len(st.words) > MAX_WORDS:
        return None
    words = _WORD.findall(re.split(r"[,;:!?]|\.(?:\s|$)", st.text, maxsplit=1)[0])
    at = next((i for i, w in enumerate(words[:4]) if _unpossessed(w).lower() == st.subject), None)
    if at is None:
        return None
    rest = [w for w in words[at + 1:] if w.lower() not in lang.TIME_ADVERBS]
    if not rest:
        return None  # the subject alone ("Alice.", "User likes"…cut off): no relation to read
    if st.owner:  # "Ann's favourite colour is blue": the owned thing is the relation
        cut = next((i for i, w in enumerate(rest) if w.lower() in lang.COPULAS), None)
        if cut is None:
            return None  # "Ann's sister lives in Paris": a statement about someone else
        name_words, rest = rest[:cut], rest[cut + 1:]
        while rest and rest[0].lower() in lang.RELATION_LEADS:
            rest = rest[1:]
    else:
        n, leads = 1, lang.RELATION_LEADS
        while n < len(rest) and (rest[n].lower() in leads or _auxiliary(rest[n - 1]) and rest[n].isalpha()
                                 and rest[n].islower()
                                 and (_negative(rest[n - 1]) or n + 1 < len(rest) and rest[n + 1].lower() in leads)):
            n += 1
        name_words, rest = rest[:n], rest[n:]
        lowered = [w.lower() for w in rest]
        if name_words[0].lower() in lang.CHANGE_CUES and "to" in lowered:
            # "moved from Boston to Denver": what holds now is where it went
            name_words, rest = [name_words[0], "to"], rest[len(lowered) - lowered[::-1].index("to"):]
    value = []
    for w in rest:
        if value and w.lower() in lang.VALUE_ENDS:
            break
        value.append(w)
    while value and value[0].lower() in lang.ARTICLES:
        value = value[1:]
    name = " ".join(w.lower() for w in name_words if w.lower() not in lang.ARTICLES)
    text = " ".join(value).strip(" .")
    if not name or not text:
        return None
    return Claim(memory, st, name, text)


def _unpossessed(word: str) -> str:
    return re.sub(r"['’]s$", "", word)


def _negative(word: str) -> bool:
    return word.lower().endswith(("n't", "n’t")) or word.lower() == "cannot"


def _auxiliary(word: str) -> bool:
    return word.lower() in lang.AUXILIARIES or _negative(word)


def _confidence(support: int) -> float:
    return round(min(0.95, 0.5 + 0.15 * support), 3)


def _said_at(memory: Memory) -> datetime:
    return memory.event_time or memory.observed_at or memory.created_at


def _polarity(c: Claim) -> str | None:
    """"likes" or "dislikes" for a preference statement ("loves", "can't stand", "doesn't like")."""
    words = set(c.name.split())
    negative = any(_negative(w) for w in words)
    if words & DISLIKES or "stand" in words and negative:
        return "dislikes"
    if words & LIKES:
        return "dislikes" if negative else "likes"
    return None


@dataclass
class _Entry:
    name: str
    latest: Claim
    support: list[Memory] = field(default_factory=list)
    previous: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)  # ids of the memories behind `previous`


def build(*, store: str, app_id: str, tenant_id: str, agent_id: str | None, memories: list[Memory]) -> Profile:
    """The profile that `memories` (the active ones of the tenant, or of one agent) support."""
    ordered = sorted(memories, key=recency)
    claims = [c for c in (claim(m) for m in ordered if m.memory_type in _STATED) if c is not None]
    counts = Counter(c.statement.subject for c in claims)
    subject = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if counts else None
    mine = [c for c in claims if c.statement.subject == subject]
    entries: list[_Entry] = []
    likes: dict[str, _Entry] = {}
    for c in mine:
        polarity = _polarity(c)
        if polarity is not None:
            key = " ".join(lang.stem(w) for w in c.value.lower().split())
            e = likes.get(key)
            if e is None or e.name != polarity:
                likes[key] = _Entry(polarity, c, [c.memory], (e.previous + [e.name]) if e else [])
            else:
                e.support.append(c.memory)
                e.latest = c
            continue
        if not c.statement.negated:
            _place(entries, c)
    # A retraction ("Ann is not vegetarian anymore", "Ann quit smoking") drops what it denies.
    said = [Statement(m.text) for m in ordered if m.memory_type in _STATED]
    attributes = [_out(e) for e in entries if not any(_retracts(d, e.latest.statement) for d in said)]
    preferences = [_out(e) for e in likes.values()]
    explained = {m.memory_id for e in [*entries, *likes.values()] for m in e.support}
    for m in ordered:
        if m.memory_type == MemoryType.PREFERENCE and m.memory_id not in explained:
            preferences.append(ProfileEntry(name="preference", value=m.text, confidence=0.5,
                                            evidence=[m.memory_id], since=_said_at(m)))
    skills = [ProfileSkill(memory_id=m.memory_id, title=m.text.split(":", 1)[0][:200])
              for m in reversed(ordered) if m.memory_type == MemoryType.PROCEDURE][:MAX_SKILLS]
    attributes = _newest(attributes)
    preferences = _newest(preferences)
    display = _display(mine[0]) if mine else ""
    return Profile(store=store, app_id=app_id, tenant_id=tenant_id, agent_id=agent_id, subject=display,
                   attributes=attributes, preferences=preferences, skills=skills,
                   summary=summary_of(display, attributes, preferences))


_STATED = frozenset({MemoryType.FACT, MemoryType.PREFERENCE})


def _place(entries: list[_Entry], c: Claim) -> None:
    """Join `c` to the entry it restates or changes (newest statement wins), else start one."""
    for e in entries:
        if e.name == c.name and _same(e.latest.value, c.value):
            e.support.append(c.memory)
            e.latest = c
            return
    for e in entries:
        r = relate(c.statement, e.latest.statement, 0.0)
        if r is None or r.action == ExtractAction.DELETE:
            continue
        if r.action == ExtractAction.NOOP or _same(e.latest.value, c.value):
            e.support.append(c.memory)
            return
        if e.latest.value not in e.previous:
            e.previous.append(e.latest.value)
        e.earlier += [m.memory_id for m in e.support if m.memory_id not in e.earlier]
        e.latest = Claim(c.memory, c.statement, e.name, c.value)
        e.support = [c.memory]
        return
    entries.append(_Entry(c.name, c, [c.memory]))


def _retracts(newer: Statement, older: Statement) -> bool:
    r = relate(newer, older, 0.0)
    return r is not None and r.action == ExtractAction.DELETE


def _same(a: str, b: str) -> bool:
    return [lang.stem(w) for w in a.lower().split()] == [lang.stem(w) for w in b.lower().split()]


def _out(e: _Entry) -> ProfileEntry:
    return ProfileEntry(name=e.name, value=e.latest.value, confidence=_confidence(len(e.support)),
                        evidence=[m.memory_id for m in e.support], since=_said_at(e.latest.memory),
                        previous=e.previous, previous_evidence=e.earlier)


def _display(c: Claim) -> str:
    """The subject as written ("Ann", "User")."""
    for w in _WORD.findall(c.statement.text):
        base = _unpossessed(w)
        if base.lower() == c.statement.subject:
            return base
    return c.statement.subject


def _newest(entries: list[ProfileEntry]) -> list[ProfileEntry]:
    kept = sorted(entries, key=lambda e: (e.since is None, e.since), reverse=True)[:MAX_ENTRIES]
    return sorted(kept, key=lambda e: (e.name, e.value.lower()))


def summary_of(subject: str, attributes: list[ProfileEntry], preferences: list[ProfileEntry]) -> str:
    """A profile's one line, written from its entries: every word of it rests on a memory an entry cites."""
    parts = [f"{e.name.replace('_', ' ')}: {e.value}" for e in attributes]
    likes = [e.value for e in preferences if e.name == "likes"]
    dislikes = [e.value for e in preferences if e.name == "dislikes"]
    if likes:
        parts.append("likes " + ", ".join(likes))
    if dislikes:
        parts.append("dislikes " + ", ".join(dislikes))
    if not parts:
        return ""
    return (f"{subject}: " if subject else "") + "; ".join(parts) + "."


def supported_by(profile: Profile, memory_ids: set[str]) -> bool:
    """Whether any entry (its value or an earlier one) or skill of `profile` rests on one of `memory_ids`."""
    return any(_rests_on(e, memory_ids) for e in (*profile.attributes, *profile.preferences)) or \
        any(s.memory_id in memory_ids for s in profile.skills)


def _rests_on(entry: ProfileEntry, memory_ids: set[str]) -> bool:
    return not memory_ids.isdisjoint(entry.evidence) or not memory_ids.isdisjoint(entry.previous_evidence)


def without(profile: Profile, memory_ids: set[str]) -> Profile:
    """A past copy of a profile (a dream action's) with nothing of `memory_ids` left in it: an entry
    any of whose evidence is gone is dropped (its value or earlier values may quote the deleted text),
    and the summary is written again from what is left. The current profile is rebuilt instead (`build`)."""
    if not supported_by(profile, memory_ids):
        return profile
    attributes = [e for e in profile.attributes if not _rests_on(e, memory_ids)]
    preferences = [e for e in profile.preferences if not _rests_on(e, memory_ids)]
    skills = [s for s in profile.skills if s.memory_id not in memory_ids]
    # The subject's name was read off the statements, and which ones named it the copy does not say: it goes with
    # any of them (a regression trial: the only entry left, "Window seats on long flights.", named no one).
    return profile.model_copy(update={"subject": "", "attributes": attributes, "preferences": preferences,
                                      "skills": skills, "summary": summary_of("", attributes, preferences)})
