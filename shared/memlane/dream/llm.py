"""The LLM dream engine: the model proposes, with a strict output schema; the engine checks.

One call per agent of the scope (its memories, newest first, and its recent turns), one more
for the tenant's profile. Numbers in the answer that do not resolve, actions on a memory an
earlier action already took, and kinds the caller did not ask for are dropped. Expired plans are
retired by rule as well (a date comparison needs no model).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import defaultdict
from datetime import datetime
from typing import Sequence

from ..domain.models import (DreamActionKind, Memory, MemoryDraft, MemoryType, Message, Profile, ProfileEntry,
                             ProfileSkill)
from ..domain import language as lang
from ..domain.scope import DEFAULT, Scope
from ..policies import dream_profile, dream_rules
from ..ports import LLM
from ..prompts import dream as prompt
from .engine import DreamInput, Proposal, draft_of, drawn_from, profile_proposal, same_scope_evidence

MAX_MEMORIES = 150  # per call, newest first
MAX_TURNS = 100
MAX_CHARS = 1000  # of one memory or turn, as shown to the model


class LLMEngine:
    name = "llm"

    def __init__(self, llm: LLM, *, plan_grace_days: float = 1.0):
        self.llm = llm
        self.plan_grace_days = plan_grace_days

    def propose(self, data: DreamInput) -> list[Proposal]:
        in_scope = data.in_scope()
        by_agent: dict[str, list[Memory]] = defaultdict(list)
        for m in in_scope:
            by_agent[m.scope.agent_id].append(m)
        turns: dict[str, list[Message]] = defaultdict(list)
        for run in data.messages:
            for msg in run:
                turns[msg.scope.agent_id].append(msg)
        out: list[Proposal] = []
        claimed: set[str] = set()
        for agent in sorted(set(by_agent) | set(turns)):
            memories = sorted(by_agent[agent], key=dream_rules.recency, reverse=True)[:MAX_MEMORIES]
            messages = sorted(turns[agent], key=lambda m: m.created_at)[-MAX_TURNS:]
            wants_profile = DreamActionKind.EMIT_PROFILE in data.kinds and agent in data.profile_agents
            out += self._agent(data, agent, memories, messages, claimed, wants_profile)
        if DreamActionKind.DELETE in data.kinds:
            for m in in_scope:
                if m.memory_id not in claimed and dream_rules.expired_plan(m, data.now, self.plan_grace_days):
                    claimed.add(m.memory_id)
                    out.append(Proposal(DreamActionKind.DELETE, dream_rules.PLAN_RETIRE_CONFIDENCE,
                                        f"expired plan: its time ({m.event_time:%Y-%m-%d}) has passed", m.scope,
                                        target_ids=(m.memory_id,)))
        if DreamActionKind.EMIT_PROFILE in data.kinds:
            remaining = sorted((m for m in data.memories if m.memory_id not in claimed), key=dream_rules.recency,
                               reverse=True)[:MAX_MEMORIES]
            if remaining:
                answer = self.llm.generate(system=prompt.PROFILE_SYSTEM, prompt=prompt.PROFILE_TEMPLATE.format(
                    now=_time(data.now), memories=_memories(remaining)), response_model=prompt.ProfileResult)
                built = _profile(answer.profile, data, None, remaining)
                proposal = profile_proposal(data.profiles.get(None), built,
                                            rationale=f"profile of the tenant from {len(remaining)} memories (llm)")
                if proposal:
                    out.append(proposal)
        return out

    def _agent(self, data: DreamInput, agent: str, memories: list[Memory], messages: list[Message],
               claimed: set[str], wants_profile: bool) -> list[Proposal]:
        if len(memories) < 2 and not messages and not wants_profile:
            return []
        answer = self.llm.generate(
            system=prompt.SYSTEM,
            prompt=prompt.USER_TEMPLATE.format(now=_time(data.now),
                                               profile_request=prompt.PROFILE_REQUEST if wants_profile else "",
                                               memories=_memories(memories) or "(none)",
                                               messages=_turns(messages) or "(none)"),
            response_model=prompt.DreamResult)
        out: list[Proposal] = []
        for action in answer.actions:
            proposal = _action(action, memories, messages, data, agent)
            if proposal is None or proposal.kind not in data.kinds:
                continue
            touched = {*proposal.target_ids, *([proposal.keep_id] if proposal.keep_id else [])}
            if proposal.kind != DreamActionKind.NOOP and claimed & touched:
                continue
            claimed |= set(proposal.target_ids)
            out.append(proposal)
        if wants_profile and answer.profile is not None:
            built = _profile(answer.profile, data, agent, memories)
            proposal = profile_proposal(data.profiles.get(agent), built,
                                        rationale=f"profile of agent '{agent}' from {len(memories)} memories (llm)")
            if proposal:
                out.append(proposal)
        return out


def _time(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _memories(memories: Sequence[Memory]) -> str:
    return "\n".join(f"[m{i}] ({m.memory_type}, {_time(m.event_time or m.created_at)}) {m.text[:MAX_CHARS]}"
                     for i, m in enumerate(memories, start=1))


def _turns(messages: Sequence[Message]) -> str:
    return "\n".join(f"[s{i}] {_time(m.created_at)} {m.name or m.role}: {m.content[:MAX_CHARS]}"
                     for i, m in enumerate(messages, start=1))


def _pick(numbers: Sequence[int], items: Sequence[object]) -> list:  # type: ignore[type-arg]
    return [items[n - 1] for n in dict.fromkeys(numbers) if 1 <= n <= len(items)]


def _action(a: prompt.ProposedAction, memories: list[Memory], messages: list[Message], data: DreamInput,
            agent: str) -> Proposal | None:
    kind = DreamActionKind(a.kind)
    targets: list[Memory] = _pick(a.targets, memories)
    if len(targets) != len(dict.fromkeys(a.targets)):
        return None  # a number that does not resolve: the answer is not about these memories
    keep: Memory | None = None
    if a.keep is not None:
        if not 1 <= a.keep <= len(memories):
            return None
        keep = memories[a.keep - 1]
    targets = [t for t in targets if keep is None or t.memory_id != keep.memory_id]
    ids = tuple(t.memory_id for t in targets)
    if kind == DreamActionKind.NOOP:
        scope = (keep or (targets[0] if targets else None))
        return Proposal(kind, a.confidence, a.rationale, scope.scope if scope else _default_scope(data, agent),
                        target_ids=())
    if kind == DreamActionKind.DELETE:
        return Proposal(kind, a.confidence, a.rationale, targets[0].scope, target_ids=ids) if targets else None
    if kind in (DreamActionKind.MERGE, DreamActionKind.UPDATE):
        if not targets:
            return None
        if keep is None and kind == DreamActionKind.MERGE:
            keep = max(targets, key=dream_rules.recency)  # no survivor named: keep the newest statement
            targets = [t for t in targets if t.memory_id != keep.memory_id]
            ids = tuple(t.memory_id for t in targets)
            if not targets:
                return None
        if keep is not None:
            draft = draft_of(keep, text=a.text, evidence=same_scope_evidence(keep, targets))
            if draft.text != keep.text:
                sources = [keep, *targets]
                draft = draft.model_copy(update={"drawn_from": drawn_from(
                    keep.scope, [*sources, *_copied(draft.text, sources, [*memories, *messages])])})
            if draft.drawn_from == keep.drawn_from:  # its own words, or only those of runs it carries already
                return Proposal(kind, a.confidence, a.rationale, keep.scope, target_ids=ids, keep_id=keep.memory_id,
                                after=draft)
            # A text with another run's words is a new memory, not the survivor rewritten: deleting that run takes
            # it back and gives the survivor back as it said it (services/erase.py, services/reinstate.py).
            return Proposal(kind, a.confidence, a.rationale, keep.scope, target_ids=(keep.memory_id, *ids),
                            after=draft)
        if not a.text:
            return None
        newest = max(targets, key=dream_rules.recency)
        draft = MemoryDraft(text=a.text, memory_type=a.memory_type or newest.memory_type, scope=newest.scope,
                            evidence=list(dict.fromkeys(e for t in targets if t.scope == newest.scope
                                                        for e in t.evidence)),
                            drawn_from=drawn_from(newest.scope,
                                                  [*targets, *_copied(a.text, targets, [*memories, *messages])]))
        return Proposal(kind, a.confidence, a.rationale, newest.scope, target_ids=ids, after=draft)
    # ADD, EMIT_SKILL: new memories, placed in the run their evidence comes from
    turns: list[Message] = _pick(a.evidence, messages)
    if not a.text or not turns or len(turns) != len(dict.fromkeys(a.evidence)):
        # Standing on no turn shown, nothing could take it back: a run's deletion found no copy of its words in a
        # memory the model wrote with no evidence (a trial of the model boundary).
        return None
    scope = turns[-1].scope
    memory_type = MemoryType.PROCEDURE if kind == DreamActionKind.EMIT_SKILL else (a.memory_type or MemoryType.FACT)
    draft = MemoryDraft(text=a.text, memory_type=memory_type, scope=scope,
                        evidence=[t.message_id for t in turns if t.scope == scope],
                        drawn_from=drawn_from(scope, [*turns, *_copied(a.text, turns, [*memories, *messages])]),
                        metadata={"skill": True} if kind == DreamActionKind.EMIT_SKILL else {})
    return Proposal(kind, a.confidence, a.rationale, scope, after=draft)


def _default_scope(data: DreamInput, agent: str) -> Scope:
    return Scope(app_id=data.scope.app_id, tenant_id=data.scope.tenant_id, agent_id=agent,
                 run_id=data.scope.run_id or DEFAULT)


def _profile(p: prompt.ProposedProfile, data: DreamInput, agent: str | None, memories: list[Memory]) -> Profile:
    """The model's profile, each entry resting on the memories it cites (one citing none, or a memory not shown, is
    left out: a run's deletion rebuilds the profiles resting on its memories, and would never find it) and on those
    whose words its value carries, its subject and line only in words of what the entries rest on (else the line is
    written from the entries)."""
    read: list[Memory] = []

    def entries(facts: list[prompt.ProfileFact]) -> list[ProfileEntry]:
        out = []
        for f in facts:
            support: list[Memory] = _pick(f.evidence, memories)
            if not support or len(support) != len(dict.fromkeys(f.evidence)):
                continue
            read.extend(support)
            # A value may copy words of a memory it does not cite: it rests on that one too, so that memory's
            # deletion takes the entry back as well (only the cited ones date it).
            rests_on = [*support, *_copied(f"{f.name} {f.value}", support, memories)]
            out.append(ProfileEntry(name=f.name, value=f.value, confidence=f.confidence,
                                    evidence=[m.memory_id for m in rests_on], previous=f.previous,
                                    since=max((m.event_time or m.created_at for m in support), default=None)))
        return sorted(out, key=lambda e: (e.name, e.value.lower()))

    skills = [m for m in memories if m.memory_type == MemoryType.PROCEDURE]
    attributes, preferences = entries(p.attributes), entries(p.preferences)
    said = _words(" ".join([*(m.text for m in read), *(f"{e.name} {e.value}" for e in (*attributes, *preferences))]))
    subject = p.subject if _words(p.subject) <= said else ""
    summary = p.summary if p.summary.strip() and _words(p.summary) <= said else \
        dream_profile.summary_of(subject, attributes, preferences)
    return Profile(store=data.store, app_id=data.scope.app_id, tenant_id=data.scope.tenant_id, agent_id=agent,
                   subject=subject, attributes=attributes, preferences=preferences,
                   skills=[ProfileSkill(memory_id=m.memory_id, title=m.text.split(":", 1)[0][:200]) for m in skills],
                   summary=summary)


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    """Its words that say something (stems; not function words, nor the letter an apostrophe leaves: "Ann's")."""
    return frozenset(lang.stem(w) for w in re.findall(r"[a-z0-9]+", text.lower())
                     if w not in lang.STOP_WORDS and not (len(w) == 1 and w.isalpha()))


def _copied(text: str, cited: Sequence[Memory | Message], shown: Sequence[Memory | Message]) -> list[Memory | Message]:
    """What else shown the text copies a mark of (`_marks`) that what it cites does not carry: the text rests on those
    too, so deleting their run takes it back (a model copying another run's secret into a memory citing this one). A
    word in common is no copy: "user", "likes" or "2024" tied a dream's memories to every thread (a regression trial:
    deleting one took back 11 memories drawn from others)."""
    speakers = frozenset(w for s in shown if isinstance(s, Message) and s.name for w in _carried(s.name))
    copies = _carried(text) - speakers - frozenset().union(*(_carried(_said(c)) for c in cited))
    ids = {id(c) for c in cited}
    return [s for s in shown if id(s) not in ids and copies & _marks(_said(s))] if copies else []


_NUMBER = re.compile(r"\d(?:[,.\- ]?\d)*")
_WORD = re.compile(r"[^\W\d_]+")  # a word in any script ("User's": "User" and "s")
_SPEAKERS = frozenset({"user", "assistant"})  # as memories name who said what ("User works ...")
_NOT_NAMES = _SPEAKERS | {"i"} | lang.WHEN_WORDS  # "in March", "on Friday"


def _plain(text: str) -> str:
    """Folded as a copy could be disguised: NFKC (look-alike digits and letters), invisible characters and accents
    dropped ("51\u200b51", "Bramblewíck")."""
    kept = "".join(ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) != "Cf")
    return "".join(ch for ch in unicodedata.normalize("NFKD", kept) if unicodedata.category(ch) != "Mn")


@functools.lru_cache(maxsize=4096)
def _carried(text: str) -> frozenset[str]:
    """Every mark the text could carry: its numbers (digit groups joined: "5,151", "51-51"), its words (stems; two
    neighbours joined too: "Bramble-wick"; letters one by one: "B.r.a.m"), and each run of three content words."""
    plain = _plain(text)
    numbers = {"#" + "".join(str(unicodedata.digit(c)) for c in n if c.isdigit()) for n in _NUMBER.findall(plain)}
    words = [w.casefold() for w in _WORD.findall(plain)]
    joined = [a + b for a, b in zip(words, words[1:])] + ["".join(w) for w in _spelled(words)]
    content = [lang.stem(w) for w in words if w not in lang.STOP_WORDS and w not in _SPEAKERS and len(w) > 1]
    return frozenset(numbers | {"@" + lang.stem(w) for w in words + joined}
                     | {" ".join(g) for g in zip(content, content[1:], content[2:])})


def _spelled(words: list[str]) -> list[list[str]]:
    """Runs of three or more single letters: a word spelled out."""
    runs, run = [], []
    for w in [*words, ""]:
        if len(w) == 1:
            run.append(w)
            continue
        if len(run) >= 3:
            runs.append(run)
        run = []
    return runs


@functools.lru_cache(maxsize=4096)
def _marks(text: str) -> frozenset[str]:
    """What of a text is its own, which a copy of it carries and a text not drawn from it seldom does: a number of
    three digits or more that is no year (a code, an amount), a name (a word written capitalised inside a sentence,
    not a month's or a day's), a run of three content words."""
    plain = _plain(text)
    names = {"@" + lang.stem(m.group().casefold()) for m in _WORD.finditer(plain)
             if m.group()[:1].isupper() and m.group().casefold() not in _NOT_NAMES
             and plain[:m.start()].rstrip()[-1:] not in ("", ".", "!", "?", ":", '"', "(")}
    return frozenset(m for m in _carried(text) if m.startswith("#") and len(m) > 3 and not _YEAR.fullmatch(m[1:])
                     or " " in m) | names


_YEAR = re.compile(r"(?:19|20)\d\d")


def _said(item: Memory | Message) -> str:
    return item.text if isinstance(item, Memory) else item.content
