"""An actor's profile as served: the explicit profile merged with the dream's distilled one. Pure.

Explicit wins: a distilled attribute or preference whose name the caller gave is left out of the merged
lists (and listed as `overridden`). Names match regardless of case and of `_`, `-`, `.` or spaces between
words: the dream names facts by their relation ("lives in"), which a caller may write `lives_in`. Lines render in a fixed order — the explicit text, then the facts by
origin (explicit first) and name, then skills — so the same state always gives byte-identical text.
"""

from __future__ import annotations

from ..domain.models import ActorProfile, ExplicitProfile, Profile, ProfileEntry, ProfileFact


def merge(app_id: str, tenant_id: str, agent_id: str | None, explicit: ExplicitProfile | None,
          distilled: Profile | None) -> ActorProfile | None:
    """None when neither exists."""
    if explicit is None and distilled is None:
        return None
    stated = [ProfileFact(name=name, value=value, origin="explicit")
              for name, value in sorted((explicit.attributes if explicit else {}).items())]
    named = {name_key(f.name) for f in stated}
    attributes = _distilled(distilled.attributes) if distilled else []
    preferences = _distilled(distilled.preferences) if distilled else []
    overridden = [f for f in attributes + preferences if name_key(f.name) in named]
    merged = stated + [f for f in attributes if name_key(f.name) not in named]
    kept_preferences = [f for f in preferences if name_key(f.name) not in named]
    skills = list(distilled.skills) if distilled else []
    text = explicit.text.strip() if explicit else ""
    lines = [text] if text else []
    lines += [f"- {f.name}: {f.value}" for f in merged + kept_preferences]
    lines += [f"- skill: {s.title}" for s in skills]
    return ActorProfile(app_id=app_id, tenant_id=tenant_id, agent_id=agent_id, text="\n".join(lines),
                        explicit_text=text, attributes=merged, preferences=kept_preferences, overridden=overridden,
                        skills=skills, explicit=explicit, distilled=distilled)


def _distilled(entries: list[ProfileEntry]) -> list[ProfileFact]:
    return [ProfileFact(name=e.name, value=e.value, origin="distilled", confidence=e.confidence,
                        evidence=list(e.evidence), since=e.since) for e in entries]


def name_key(name: str) -> str:
    """What a profile attribute's name says, whatever its case and its separators ("Lives In" = "lives_in")."""
    return " ".join(name.lower().replace("_", " ").replace("-", " ").replace(".", " ").split())
