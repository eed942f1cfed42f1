"""The deterministic dream engine: what runs when no LLM is configured.

1. **Changed facts** (UPDATE, DELETE): each memory of the tenant, in the order they were said, is
   compared with the nearest older ones — across its agents and runs, as at write time — and decided
   by the write-time decision module (policies/consolidation.py, the one place that says when a fact
   changed), with its calibrated confidence: another value of the same relation or a reported change
   supersedes (UPDATE, keep = the newer statement); a retraction closes what it denies (DELETE, keep =
   the retraction, which is kept). Only memories in the dream's scope are closed. This is what write
   time could not see: memories written with consolidation off, or before it existed.
2. **Merge** (MERGE), per agent (memories of different agents are never folded together, so a search
   narrowed to one agent still finds the fact): the same fact said more than once — a pair
   the decision module calls a restatement, or near-duplicates (embedding similarity above the
   store's threshold that `consolidation.duplicates` does not tell apart) — folds into the most
   informative one.
3. **Retire** (DELETE): plans whose time has passed.

Then **skills** (EMIT_SKILL) from requests solved step by step more than once, and **profiles**
(EMIT_PROFILE) of the tenant and of the agents in scope, from what will remain active.
Each memory is the target of at most one action. A chain of changes (Boston → Denver → Austin)
is proposed in the order it applies: each action keeps the memory the next one closes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from ..domain.models import DreamActionKind, ExtractAction, Memory, MemoryDraft, MemoryType
from ..policies import consolidation, dream_profile, dream_rules, dream_skills
from ..policies.consolidation import Neighbour
from ..ports import Embedder
from .engine import DreamInput, Proposal, draft_of, profile_proposal, same_scope_evidence

SKILL_SIMILARITY = 0.75  # two requests this close ask for the same thing
KNOWN_SKILL_SIMILARITY = 0.85  # a procedure memory this close to a new skill already holds it
NEIGHBOURS = 8  # older memories each one is compared with, the nearest in meaning (as at write time)
_SUPERSEDING = (DreamActionKind.UPDATE, DreamActionKind.MERGE, DreamActionKind.DELETE)


class RulesEngine:
    name = "rules"

    def __init__(self, embedder: Embedder, *, merge_similarity: float = 0.92, plan_grace_days: float = 1.0,
                 duplicate_similarity: float = 0.95):
        self.embedder = embedder
        self.merge_similarity = merge_similarity
        self.duplicate_similarity = duplicate_similarity  # as at write time: this close, same values, one fact
        self.plan_grace_days = plan_grace_days

    def propose(self, data: DreamInput) -> list[Proposal]:
        # In the order they were said: each statement is read against what was said before it.
        s = data.scope  # the tenant's memories only, whatever the input holds
        memories = sorted((m for m in data.memories if m.memory_type != MemoryType.SUMMARY
                           and (m.scope.app_id, m.scope.tenant_id) == (s.app_id, s.tenant_id)), key=dream_rules.recency)
        vectors = self._embed([m.text for m in memories])
        sim = vectors @ vectors.T
        in_scope = [data.scope.covers(m.scope) for m in memories]
        out: list[Proposal] = []
        closed: set[int] = set()
        same: set[tuple[int, int]] = set()  # (newer, older) pairs the decision module calls one fact
        if data.kinds & {DreamActionKind.UPDATE, DreamActionKind.DELETE, DreamActionKind.MERGE}:
            out += _changes(memories, sim, in_scope, data.kinds, closed, same, self.duplicate_similarity)
        if DreamActionKind.MERGE in data.kinds:
            # Merges stay within one agent: a search narrowed to the agent must still find the survivor.
            by_agent: dict[str, list[int]] = defaultdict(list)
            for i, m in enumerate(memories):
                if in_scope[i] and i not in closed:
                    by_agent[m.scope.agent_id].append(i)
            for agent in sorted(by_agent):
                out += _Merges(memories, sim, by_agent[agent], self.merge_similarity, same).run()
        targets = [m for m, covered in zip(memories, in_scope) if covered]
        claimed = {t for p in out for t in p.target_ids}
        if DreamActionKind.DELETE in data.kinds:
            out += self._retire_plans(data, [m for m in targets if m.memory_id not in claimed])
        if DreamActionKind.EMIT_SKILL in data.kinds:
            out += self._skills(data)
        if DreamActionKind.EMIT_PROFILE in data.kinds:
            gone = {t for p in out if p.kind in _SUPERSEDING for t in p.target_ids}
            out += profiles(data, [m for m in data.memories if m.memory_id not in gone], "rules")
        return out

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)

    def _retire_plans(self, data: DreamInput, memories: list[Memory]) -> list[Proposal]:
        return [
            Proposal(DreamActionKind.DELETE, dream_rules.PLAN_RETIRE_CONFIDENCE,
                     f"expired plan: its time ({m.event_time:%Y-%m-%d}) passed more than "
                     f"{self.plan_grace_days:g} day(s) ago", m.scope, target_ids=(m.memory_id,))
            for m in memories if dream_rules.expired_plan(m, data.now, self.plan_grace_days)
        ]

    def _skills(self, data: DreamInput) -> list[Proposal]:
        found = [i for run in data.messages for i in dream_skills.interactions(run)]
        if len(found) < 2:
            return []
        vectors = self._embed([i.request for i in found])
        known = [m for m in data.in_scope() if m.memory_type == MemoryType.PROCEDURE]
        known_vectors = self._embed([m.text for m in known])
        out: list[Proposal] = []
        for agent in sorted({i.message.scope.agent_id for i in found}):
            idx = [k for k, i in enumerate(found) if i.message.scope.agent_id == agent]
            for group in _groups(idx, vectors, SKILL_SIMILARITY):
                if len(group) < 2:
                    continue
                latest = max((found[k] for k in group), key=lambda i: i.message.created_at)
                text = dream_skills.skill_text(latest.request, latest.steps)
                vec = self._embed([text])[0]
                same_agent = [j for j, m in enumerate(known) if m.scope.agent_id == agent]
                if any(float(known_vectors[j] @ vec) >= KNOWN_SKILL_SIMILARITY for j in same_agent):
                    continue
                # Hidden keywords only from the skill's own run: they must go when what they came from goes
                # (a run's deletion deletes its memories, and this one is the latest run's).
                requests = list(dict.fromkeys(found[k].request for k in group
                                              if found[k].message.scope == latest.message.scope))
                draft = MemoryDraft(text=text, memory_type=MemoryType.PROCEDURE, scope=latest.message.scope,
                                    evidence=list(latest.message_ids), keywords=" ".join(requests)[:1000],
                                    importance=0.7, metadata={"skill": True, "repeats": len(group)})
                out.append(Proposal(DreamActionKind.EMIT_SKILL, dream_rules.skill_confidence(len(group)),
                                    f"'{latest.request}' was asked {len(group)} times and solved with these "
                                    "steps, confirmed by the user", latest.message.scope, after=draft))
        return out


def profiles(data: DreamInput, remaining: list[Memory], engine: str) -> list[Proposal]:
    """EMIT_PROFILE for the tenant and for each agent in `data.profile_agents`, where it changed."""
    s = data.scope
    out = []
    subjects: list[str | None] = [None, *data.profile_agents]
    for agent in subjects:
        mine = [m for m in remaining if agent is None or m.scope.agent_id == agent]
        built = dream_profile.build(store=data.store, app_id=s.app_id, tenant_id=s.tenant_id, agent_id=agent,
                                    memories=mine)
        who = "the tenant" if agent is None else f"agent '{agent}'"
        proposal = profile_proposal(data.profiles.get(agent), built,
                                    rationale=f"profile of {who} from {len(mine)} active memories ({engine})")
        if proposal is not None:
            out.append(proposal)
    return out


def _groups(idx: list[int], vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """Greedy single-pass grouping: each item joins the first group whose first item is close enough."""
    groups: list[list[int]] = []
    for k in idx:
        for g in groups:
            if float(vectors[g[0]] @ vectors[k]) >= threshold:
                g.append(k)
                break
        else:
            groups.append([k])
    return groups


def _changes(memories: list[Memory], sim: np.ndarray, in_scope: list[bool], kinds: frozenset[DreamActionKind],
             closed: set[int], same: set[tuple[int, int]], duplicate_similarity: float) -> list[Proposal]:
    """UPDATE / DELETE for each memory that a newer one replaces or retracts, decided by the write-time
    decision module against the nearest older memories of the tenant — across its agents and runs, as
    at write time. `memories` are in the order they were said; only memories in the dream's scope are
    closed. Fills `closed` (indices closed) and `same` ((newer, older) pairs that are one fact)."""
    out = []
    undecided = np.array([m.memory_type in _UNDECIDED for m in memories], dtype=bool)
    for j, memory in enumerate(memories):
        if undecided[j]:
            continue
        row = sim[:j, j].astype(np.float64)
        row[undecided[:j]] = -np.inf
        row[[i for i in closed if i < j]] = -np.inf
        nearest = [int(i) for i in np.argsort(-row, kind="stable")[:NEIGHBOURS] if row[i] > -np.inf]
        # The order is settled (when each was said): every neighbour is read as the older statement.
        decision = consolidation.decide(memory.text, [Neighbour(memories[i], float(sim[i, j])) for i in nearest],
                                        duplicate_similarity=duplicate_similarity, event_time=memory.event_time)
        index = {id(memories[i]): i for i in nearest}
        targets = [index[id(t)] for t in decision.targets]
        if decision.action == ExtractAction.NOOP:
            same.update((j, i) for i in targets)
            continue
        kind = _KIND.get(decision.action)
        targets = [i for i in targets if in_scope[i]]
        if kind is None or kind not in kinds or not targets:
            continue
        closed.update(targets)
        out.append(Proposal(kind, decision.confidence, f"{decision.action} ({decision.evidence}): {decision.reason}",
                            memory.scope, target_ids=tuple(memories[i].memory_id for i in targets),
                            keep_id=memory.memory_id,
                            after=draft_of(memory) if kind == DreamActionKind.UPDATE else None))
    return out


class _Merges:
    """The same fact said more than once among the memories `idx` of one agent: a pair the decision
    module calls one fact, or near-duplicates that `consolidation.duplicates` does not tell apart."""

    def __init__(self, memories: list[Memory], sim: np.ndarray, idx: list[int], threshold: float,
                 same: set[tuple[int, int]]):
        self.m, self.sim, self.idx, self.threshold, self.same = memories, sim, idx, threshold, same

    def run(self) -> list[Proposal]:
        merged: set[int] = set()
        out: list[Proposal] = []
        for cluster in self._clusters():
            out += self._merge(cluster, merged)
        return out

    def _duplicates(self, i: int, j: int) -> bool:
        a, b = self.m[i], self.m[j]
        if (not dream_rules.mergeable_types(a.memory_type, b.memory_type)
                or max(len(a.text), len(b.text)) > dream_rules.MAX_MERGE_CHARS):
            return False
        if (max(i, j), min(i, j)) in self.same:
            return True
        return self.sim[i, j] >= self.threshold and consolidation.duplicates(a.text, b.text)

    def _clusters(self) -> list[list[int]]:
        # Candidates: pairs close enough in meaning, and pairs the decision module called one fact.
        idx = np.array(self.idx)
        close = np.argwhere(np.triu(self.sim[np.ix_(idx, idx)] >= self.threshold, k=1))
        members = set(self.idx)
        pairs = {(int(idx[a]), int(idx[b])) for a, b in close}
        pairs |= {(min(i, j), max(i, j)) for i, j in self.same if i in members and j in members}
        edges = [(float(self.sim[i, j]), i, j) for i, j in sorted(pairs) if self._duplicates(i, j)]
        parent = {i: i for i in self.idx}
        size = {i: 1 for i in self.idx}

        def root(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for _, i, j in sorted(edges, reverse=True):
            ri, rj = root(i), root(j)
            if ri != rj and size[ri] + size[rj] <= dream_rules.MAX_CLUSTER:
                parent[rj] = ri
                size[ri] += size[rj]
        members: dict[int, list[int]] = defaultdict(list)
        for i in self.idx:
            members[root(i)].append(i)
        return [c for c in members.values() if len(c) > 1]

    def _merge(self, cluster: list[int], merged: set[int]) -> list[Proposal]:
        # The most informative member survives (most content words), then the newest.
        keep = max(cluster, key=lambda i: (len(dream_rules.content_words(self.m[i].text)), i))
        folded = [i for i in cluster if i != keep and i not in merged and self._duplicates(i, keep)]
        if not folded or keep in merged:
            return []  # joined through another member only: not close enough to the survivor itself
        sims = [float(self.sim[i, keep]) for i in folded]
        same = all((max(i, keep), min(i, keep)) in self.same for i in folded)
        k = self.m[keep]
        others = [self.m[i] for i in folded]
        residual = set().union(*(dream_rules.content_words(o.text) - dream_rules.content_words(k.text)
                                 for o in others))
        conf = dream_rules.merge_confidence(min(sims), self.threshold, same_fact=same, residual_words=len(residual))
        # A copy of a folded memory (the same words) goes with it, whatever its own pair with the survivor was
        # judged: a copy of one fact is that fact, and adds nothing to the confidence.
        said = {_words(self.m[i].text) for i in folded}
        folded += [i for i in cluster if i != keep and i not in merged and i not in folded
                   and _words(self.m[i].text) in said]
        others = [self.m[i] for i in folded]
        merged.update(folded)
        why = (f"MERGE ({'same' if same else 'similar'}): {len(folded) + 1} memories state the same fact "
               f"(similarity {min(sims):.2f}" + (", one says nothing the other does not" if same else "")
               + "); kept the most informative")
        return [Proposal(DreamActionKind.MERGE, conf, why, k.scope, target_ids=tuple(o.memory_id for o in others),
                         keep_id=k.memory_id, after=draft_of(k, evidence=same_scope_evidence(k, others)))]


def _words(text: str) -> str:
    return " ".join(text.lower().split())


# Summaries and procedures are long by nature: never read as statements of fact.
_UNDECIDED = frozenset({MemoryType.SUMMARY, MemoryType.PROCEDURE})
_KIND = {ExtractAction.UPDATE: DreamActionKind.UPDATE, ExtractAction.DELETE: DreamActionKind.DELETE}
