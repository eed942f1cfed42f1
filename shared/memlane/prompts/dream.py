"""Dream (consolidation) prompts and their response models.

Memories and messages are shown numbered ([m3], [s2]); the model answers with those numbers,
never with ids, and the engine maps them back and drops anything that does not resolve.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..domain.models import MemoryType

SYSTEM = """You consolidate the long-term memory of an AI agent about one user (the tenant).
You receive the user's current memories, numbered [m1], [m2], ..., each with its type and the
time it was said, and recent conversation turns numbered [s1], [s2], .... Propose actions:
- MERGE: several memories state the same fact. `targets` are all of them, `keep` the one to keep,
  `text` optionally a better single phrasing. The others are kept as superseded, never lost.
- UPDATE: a newer memory replaces older ones about the same attribute (the user moved, changed jobs,
  changed a preference). `targets` are the outdated memories, `keep` the newer one (or give `text`
  for a new statement that replaces them).
- DELETE: a memory is no longer true or useful (e.g. a plan whose date has passed). `targets`.
- ADD: a durable fact the conversation turns state that no memory holds. `text`, `evidence` (turns).
- EMIT_SKILL: a reusable procedure the user has had the agent carry out successfully more than
  once. `text` as "How to <task>: 1. ... 2. ...", `evidence` (turns).
- NOOP: memories that look related but must stay as they are; say why.
Rules: each memory appears in at most one action. Never merge statements about different people,
different values, numbers or dates. Keep `confidence` honest (0..1): 0.9+ only when certain.
Give a short `rationale` for every action. Memories are written in the third person.
Answer with JSON only, matching the schema."""

USER_TEMPLATE = """Current time: {now}
{profile_request}
Memories (number, type, said at, text):
{memories}

Recent conversation turns (number, time, speaker: text):
{messages}

Propose the consolidation actions."""

PROFILE_REQUEST = """Also give `profile`: the stable attributes (residence, occupation, family, ...) and
preferences (likes, dislikes) of the user, each with the memory numbers that support it."""

PROFILE_SYSTEM = """You build a structured profile of one user from the long-term memories an AI agent
keeps about them. Keep only stable attributes (where they live, their work, family, diet, ...) and
preferences (likes, dislikes), each with its current value, the memory numbers that support it, and
a confidence (0..1). When memories disagree, the newest statement holds; list the older values under
`previous`. Write a one-sentence `summary`. Answer with JSON only, matching the schema."""

PROFILE_TEMPLATE = """Current time: {now}
Memories (number, type, said at, text):
{memories}

Build the profile."""


class ProposedAction(BaseModel):
    kind: Literal["ADD", "UPDATE", "DELETE", "MERGE", "NOOP", "EMIT_SKILL"]
    targets: list[int] = Field(default_factory=list, max_length=20)  # memory numbers
    keep: int | None = None  # memory number
    text: str | None = Field(default=None, max_length=2000)
    memory_type: MemoryType | None = None
    evidence: list[int] = Field(default_factory=list, max_length=50)  # conversation turn numbers
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(min_length=1, max_length=1000)


class ProfileFact(BaseModel):
    name: str = Field(min_length=1, max_length=64)  # "residence", "likes", ...
    value: str = Field(min_length=1, max_length=500)
    evidence: list[int] = Field(default_factory=list, max_length=50)  # memory numbers
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    previous: list[str] = Field(default_factory=list, max_length=10)


class ProposedProfile(BaseModel):
    subject: str = Field(default="", max_length=200)
    attributes: list[ProfileFact] = Field(default_factory=list, max_length=100)
    preferences: list[ProfileFact] = Field(default_factory=list, max_length=100)
    summary: str = Field(default="", max_length=2000)


class DreamResult(BaseModel):
    actions: list[ProposedAction] = Field(default_factory=list, max_length=100)
    profile: ProposedProfile | None = None


class ProfileResult(BaseModel):
    profile: ProposedProfile
