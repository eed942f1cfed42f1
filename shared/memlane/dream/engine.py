"""What a dream engine sees and what it proposes. Engines are pure proposal makers: they read
nothing and write nothing; services/dream.py gathers their input and records their proposals."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, Sequence

from ..domain.ids import derived_id
from ..domain.models import DreamActionKind, DreamScope, Memory, MemoryDraft, Message, Profile
from ..domain.scope import DEFAULT, Scope
from ..policies.dream_rules import PROFILE_CONFIDENCE

ALL_KINDS = frozenset(DreamActionKind)


@dataclass(frozen=True)
class DreamInput:
    store: str
    scope: DreamScope
    now: datetime
    memories: Sequence[Memory]  # the tenant's active memories (bounded, newest first); targets must be in `scope`
    messages: Sequence[Sequence[Message]] = ()  # recent messages in scope, one ordered list per run
    profiles: dict[str | None, Profile | None] = field(default_factory=dict)  # current: None = the tenant's
    profile_agents: Sequence[str] = ()  # agents whose own profile this dream refreshes
    kinds: frozenset[DreamActionKind] = ALL_KINDS

    def in_scope(self) -> list[Memory]:
        return [m for m in self.memories if self.scope.covers(m.scope)]


@dataclass(frozen=True)
class Proposal:
    kind: DreamActionKind
    confidence: float
    rationale: str
    scope: Scope
    target_ids: tuple[str, ...] = ()
    keep_id: str | None = None
    after: MemoryDraft | None = None
    profile: Profile | None = None


class DreamEngine(Protocol):
    name: str

    def propose(self, data: DreamInput) -> list[Proposal]: ...


def action_id(store: str, scope: DreamScope, proposal: Proposal) -> str:
    """Derived from what the action does: the same proposal gets the same id, whichever dream makes it."""
    what = {
        "kind": str(proposal.kind), "targets": sorted(proposal.target_ids), "keep": proposal.keep_id,
        "after": proposal.after.model_dump(mode="json", include={"text", "memory_type", "scope"})
        if proposal.after else None,
        "profile": [proposal.profile.agent_id, proposal.profile.content()] if proposal.profile else None,
    }
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()
    return derived_id(store, scope.app_id, scope.tenant_id, digest)


def draft_of(memory: Memory, *, text: str | None = None, evidence: Sequence[str] = ()) -> MemoryDraft:
    """The survivor's content after an action: its own, with another text or more evidence if given."""
    merged = list(dict.fromkeys([*memory.evidence, *evidence]))
    return MemoryDraft(text=text or memory.text, memory_type=memory.memory_type, scope=memory.scope,
                       evidence=merged, event_time=memory.event_time, keywords=memory.keywords,
                       importance=memory.importance, metadata=memory.metadata, drawn_from=memory.drawn_from)


def drawn_from(scope: Scope, sources: Sequence[Memory | Message]) -> list[Scope]:
    """The runs besides `scope` whose words a text made of `sources` carries, with those each memory of them
    carries already: deleting any of these runs takes the text back (Memory.drawn_from)."""
    runs = (s for m in sources for s in (m.scope, *(m.drawn_from if isinstance(m, Memory) else ())))
    return list(dict.fromkeys(s for s in runs if s != scope))


def same_scope_evidence(keep: Memory, others: Sequence[Memory]) -> list[str]:
    """Evidence of `others` that the survivor can carry: message ids resolve only within one run's scope."""
    return [e for m in others if m.scope == keep.scope for e in m.evidence]


def profile_proposal(current: Profile | None, built: Profile, *, rationale: str,
                     confidence: float = PROFILE_CONFIDENCE) -> Proposal | None:
    """EMIT_PROFILE when the profile the memories support differs from the stored one."""
    if current is not None and current.content() == built.content():
        return None
    if current is None and not (built.attributes or built.preferences or built.skills):
        return None
    scope = Scope(app_id=built.app_id, tenant_id=built.tenant_id, agent_id=built.agent_id or DEFAULT, run_id=DEFAULT)
    return Proposal(DreamActionKind.EMIT_PROFILE, confidence, rationale, scope, profile=built)
