"""Aggregate memories into a structured profile: stable attributes and preferences, with evidence.

The profile describes the tenant's main subject (the speaker most memories are about). A
single-valued attribute shows its current value (the newest statement) with the earlier ones
under `previous`; a multi-valued one (pets, allergies) one entry per value; a preference one
entry per object, "likes" or "dislikes" by its newest statement. Confidence grows with the
number of memories that say the same thing. Pure: memories in, profile out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from ..domain.models import Memory, MemoryType, Profile, ProfileEntry, ProfileSkill
from .dream_attributes import AttributeFact, parse, same_value
from .dream_rules import recency

MAX_ENTRIES = 100  # per section; the newest win
MAX_SKILLS = 50


def _confidence(support: int) -> float:
    return round(min(0.95, 0.5 + 0.15 * support), 3)


def _said_at(memory: Memory) -> datetime:
    return memory.event_time or memory.created_at


def primary_subject(facts: list[tuple[Memory, AttributeFact]]) -> tuple[str, str] | None:
    """(key, display) of the subject most statements are about; the people around them do not count."""
    counts = Counter(f.subject for _, f in facts if "'" not in f.subject)
    if not counts:
        return None
    key = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    display = next(f.subject_text for _, f in facts if f.subject == key)
    return key, display


def build(*, store: str, app_id: str, tenant_id: str, agent_id: str | None, memories: list[Memory]) -> Profile:
    """The profile that `memories` (the active ones of the tenant, or of one agent) support."""
    ordered = sorted(memories, key=recency)
    facts = [(m, f) for m in ordered for f in parse(m.text)]
    subject = primary_subject(facts)
    attributes: list[ProfileEntry] = []
    preferences: list[ProfileEntry] = []
    if subject is not None:
        mine = [(m, f) for m, f in facts if f.subject == subject[0]]
        groups: dict[str, list[tuple[Memory, AttributeFact]]] = defaultdict(list)
        for m, f in mine:
            groups[f.attribute].append((m, f))
        for attribute, said in groups.items():
            if attribute.startswith("preference:"):
                preferences.append(_preference(said))
            elif said[0][1].single:
                attributes.append(_single(attribute, said))
            else:
                attributes.extend(_multi(attribute, said))
    explained = {m.memory_id for m, _ in facts}
    for m in ordered:
        if m.memory_type == MemoryType.PREFERENCE and m.memory_id not in explained:
            preferences.append(ProfileEntry(name="preference", value=m.text, confidence=0.5,
                                            evidence=[m.memory_id], since=_said_at(m)))
    skills = [ProfileSkill(memory_id=m.memory_id, title=m.text.split(":", 1)[0][:200])
              for m in reversed(ordered) if m.memory_type == MemoryType.PROCEDURE][:MAX_SKILLS]
    attributes = _newest(attributes)
    preferences = _newest(preferences)
    display = subject[1] if subject else ""
    return Profile(store=store, app_id=app_id, tenant_id=tenant_id, agent_id=agent_id, subject=display,
                   attributes=attributes, preferences=preferences, skills=skills,
                   summary=_summary(display, attributes, preferences))


def _single(attribute: str, said: list[tuple[Memory, AttributeFact]]) -> ProfileEntry:
    current_memory, current = said[-1]  # ordered by recency: the newest statement holds
    support = [m for m, f in said if same_value(f.value, current.value)]
    previous: list[str] = []
    for _, f in said:
        if not same_value(f.value, current.value) and f.value_text not in previous:
            previous.append(f.value_text)
    return ProfileEntry(name=attribute, value=current.value_text, confidence=_confidence(len(support)),
                        evidence=[m.memory_id for m in support], since=_said_at(current_memory), previous=previous)


def _multi(attribute: str, said: list[tuple[Memory, AttributeFact]]) -> list[ProfileEntry]:
    values: list[tuple[AttributeFact, list[Memory]]] = []
    for m, f in said:
        for fact, support in values:
            if same_value(fact.value, f.value):
                support.append(m)
                break
        else:
            values.append((f, [m]))
    return [ProfileEntry(name=attribute, value=f.value_text, confidence=_confidence(len(support)),
                         evidence=[m.memory_id for m in support], since=_said_at(support[-1]))
            for f, support in values]


def _preference(said: list[tuple[Memory, AttributeFact]]) -> ProfileEntry:
    latest_memory, latest = said[-1]
    support = [m for m, f in said if f.value == latest.value]
    changed = [f.value for _, f in said if f.value != latest.value]
    return ProfileEntry(name="likes" if latest.value == "like" else "dislikes", value=latest.value_text,
                        confidence=_confidence(len(support)), evidence=[m.memory_id for m in support],
                        since=_said_at(latest_memory),
                        previous=["likes" if v == "like" else "dislikes" for v in dict.fromkeys(changed)])


def _newest(entries: list[ProfileEntry]) -> list[ProfileEntry]:
    kept = sorted(entries, key=lambda e: (e.since is None, e.since), reverse=True)[:MAX_ENTRIES]
    return sorted(kept, key=lambda e: (e.name, e.value.lower()))


def _summary(subject: str, attributes: list[ProfileEntry], preferences: list[ProfileEntry]) -> str:
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
    """Whether any entry or skill of `profile` rests on one of `memory_ids`."""
    return any(set(e.evidence) & memory_ids for e in (*profile.attributes, *profile.preferences)) or \
        any(s.memory_id in memory_ids for s in profile.skills)


def without(profile: Profile, memory_ids: set[str]) -> Profile:
    """A past copy of a profile (a dream action's) with nothing of `memory_ids` left in it: an entry
    any of whose evidence is gone is dropped (its value or earlier values may quote the deleted text),
    and the summary is written again from what is left. The current profile is rebuilt instead (`build`)."""
    if not supported_by(profile, memory_ids):
        return profile
    attributes = [e for e in profile.attributes if not set(e.evidence) & memory_ids]
    preferences = [e for e in profile.preferences if not set(e.evidence) & memory_ids]
    skills = [s for s in profile.skills if s.memory_id not in memory_ids]
    return profile.model_copy(update={"attributes": attributes, "preferences": preferences, "skills": skills,
                                      "summary": _summary(profile.subject, attributes, preferences)})
