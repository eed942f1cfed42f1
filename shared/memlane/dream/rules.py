"""The deterministic dream engine: what runs when no LLM is configured.

Per agent of the scope (memories of different agents are never folded together):

1. **Supersede** (UPDATE): statements of one single-valued attribute of one subject that
   disagree (policies/dream_attributes): the newest holds, the older ones are superseded by it.
2. **Merge** (MERGE): near-duplicates — embedding similarity above the store's threshold with
   the same numbers and names, or the same attribute value — fold into the most informative one.
3. **Retire** (DELETE): plans whose time has passed.

Then **skills** (EMIT_SKILL) from requests solved step by step more than once, and **profiles**
(EMIT_PROFILE) of the tenant and of the agents in scope, from what will remain active.
Each memory is the target of at most one action, so the actions apply in any order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from ..domain.models import DreamActionKind, Memory, MemoryDraft, MemoryType
from ..policies import dream_profile, dream_rules, dream_skills
from ..policies.dream_attributes import AttributeFact, parse, same_value
from ..ports import Embedder
from .engine import DreamInput, Proposal, draft_of, profile_proposal, same_scope_evidence

SKILL_SIMILARITY = 0.75  # two requests this close ask for the same thing
KNOWN_SKILL_SIMILARITY = 0.85  # a procedure memory this close to a new skill already holds it
_SUPERSEDING = (DreamActionKind.UPDATE, DreamActionKind.MERGE, DreamActionKind.DELETE)


class RulesEngine:
    name = "rules"

    def __init__(self, embedder: Embedder, *, merge_similarity: float = 0.92, plan_grace_days: float = 1.0):
        self.embedder = embedder
        self.merge_similarity = merge_similarity
        self.plan_grace_days = plan_grace_days

    def propose(self, data: DreamInput) -> list[Proposal]:
        targets = [m for m in data.in_scope() if m.memory_type != MemoryType.SUMMARY]
        vectors = self._embed([m.text for m in targets])
        by_agent: dict[str, list[int]] = defaultdict(list)
        for i, m in enumerate(targets):
            by_agent[m.scope.agent_id].append(i)
        out: list[Proposal] = []
        for agent in sorted(by_agent):
            idx = by_agent[agent]
            out += _Consolidation([targets[i] for i in idx], vectors[idx], self.merge_similarity, data.kinds).run()
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
                requests = list(dict.fromkeys(found[k].request for k in group))
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


class _Consolidation:
    """Supersessions and merges among the memories of one agent."""

    def __init__(self, memories: list[Memory], vectors: np.ndarray, threshold: float,
                 kinds: frozenset[DreamActionKind]):
        self.m = memories
        self.sim = vectors @ vectors.T if len(memories) else np.zeros((0, 0))
        self.threshold = threshold
        self.kinds = kinds
        self.facts = [parse(m.text) for m in memories]
        self.rank = [dream_rules.recency(m) for m in memories]

    def run(self) -> list[Proposal]:
        clusters = self._clusters()
        cluster_of = {i: c for c in clusters for i in c}
        survivors = {id(c): self._survivor(c) for c in clusters}
        claimed: set[int] = set()
        consumed: set[int] = set()  # clusters folded into an UPDATE instead of merged
        out: list[Proposal] = []
        if DreamActionKind.UPDATE in self.kinds:
            for newest, old, conf, why in self._supersessions():
                keep = survivors[id(cluster_of[newest])] if newest in cluster_of else newest
                old_cluster = cluster_of.get(old)
                group = sorted(old_cluster) if old_cluster else [old]
                if old_cluster and newest in old_cluster or keep in group or claimed & set(group):
                    continue
                claimed |= set(group)
                if old_cluster:
                    consumed.add(id(old_cluster))
                k = self.m[keep]
                out.append(Proposal(DreamActionKind.UPDATE, conf, why, k.scope,
                                    target_ids=tuple(self.m[i].memory_id for i in group), keep_id=k.memory_id,
                                    after=draft_of(k)))
        if DreamActionKind.MERGE in self.kinds:
            for c in clusters:
                if id(c) in consumed:
                    continue
                out += self._merge(c, survivors[id(c)], claimed)
        return out

    # -- duplicates ------------------------------------------------------------------------
    def _conflict(self, i: int, j: int) -> bool:
        """Both state one single-valued attribute of one subject, with different values."""
        return any(a.key == b.key and a.single and not same_value(a.value, b.value)
                   for a in self.facts[i] for b in self.facts[j])

    def _subsumes(self, big: int, small: int) -> bool:
        """Every attribute statement of `small` is made by `big` too."""
        return bool(self.facts[small]) and all(
            any(a.key == b.key and same_value(a.value, b.value) for b in self.facts[big]) for a in self.facts[small])

    def _duplicates(self, i: int, j: int) -> tuple[bool, bool]:
        """(are they one fact said twice, is it because they state the same attribute value)."""
        a, b = self.m[i], self.m[j]
        if (not dream_rules.mergeable_types(a.memory_type, b.memory_type) or self._conflict(i, j)
                or max(len(a.text), len(b.text)) > dream_rules.MAX_MERGE_CHARS):
            return False, False
        same_fact = self._subsumes(i, j) or self._subsumes(j, i)
        similar = self.sim[i, j] >= self.threshold and dream_rules.compatible_duplicates(a.text, b.text)
        return similar or same_fact, same_fact

    def _clusters(self) -> list[list[int]]:
        n = len(self.m)
        edges = []
        for i in range(n):
            for j in range(i + 1, n):
                dup, same_fact = self._duplicates(i, j)
                if dup:
                    edges.append((same_fact, float(self.sim[i, j]), i, j))
        parent = list(range(n))
        size = [1] * n

        def root(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for _, _, i, j in sorted(edges, reverse=True):
            ri, rj = root(i), root(j)
            if ri != rj and size[ri] + size[rj] <= dream_rules.MAX_CLUSTER:
                parent[rj] = ri
                size[ri] += size[rj]
        members: dict[int, list[int]] = defaultdict(list)
        for i in range(n):
            members[root(i)].append(i)
        return [c for c in members.values() if len(c) > 1]

    def _survivor(self, cluster: list[int]) -> int:
        """The most informative member: most attribute statements, most content words, then the newest."""
        return max(cluster, key=lambda i: (len(self.facts[i]), len(dream_rules.content_words(self.m[i].text)),
                                           self.rank[i]))

    def _merge(self, cluster: list[int], keep: int, claimed: set[int]) -> list[Proposal]:
        folded, sims, same = [], [], True
        for i in cluster:
            if i == keep or i in claimed:
                continue
            dup, same_fact = self._duplicates(i, keep)
            if not dup:
                continue  # joined through another member only: not close enough to the survivor itself
            folded.append(i)
            sims.append(float(self.sim[i, keep]))
            same = same and same_fact
        if not folded or keep in claimed:
            return []
        k = self.m[keep]
        others = [self.m[i] for i in folded]
        residual = set().union(*(dream_rules.content_words(o.text) - dream_rules.content_words(k.text)
                                 for o in others))
        conf = dream_rules.merge_confidence(min(sims), self.threshold, same_fact=same, residual_words=len(residual))
        claimed |= set(folded)
        why = (f"{len(folded) + 1} memories state the same fact (similarity {min(sims):.2f}"
               + (", same attribute value" if same else "") + "); kept the most informative")
        return [Proposal(DreamActionKind.MERGE, conf, why, k.scope, target_ids=tuple(o.memory_id for o in others),
                         keep_id=k.memory_id, after=draft_of(k, evidence=same_scope_evidence(k, others)))]

    # -- supersession ----------------------------------------------------------------------
    def _supersessions(self) -> list[tuple[int, int, float, str]]:
        """(newest, older, confidence, rationale) for each outdated single-valued statement, surest first."""
        groups: dict[tuple[str, str], list[tuple[int, AttributeFact]]] = defaultdict(list)
        for i, facts in enumerate(self.facts):
            for f in facts:
                if f.single:
                    groups[f.key].append((i, f))
        found = []
        for (subject, attribute), said in groups.items():
            newest, current = max(said, key=lambda x: self.rank[x[0]])
            for i, f in said:
                if same_value(f.value, current.value) or self.rank[i] >= self.rank[newest]:
                    continue
                covered = self._covered(i, newest, attribute)
                conf = dream_rules.update_confidence(current, f, covered=covered)
                what = attribute.replace("_", " ")
                why = (f"newer statement of {current.subject_text}'s {what}: '{current.value_text}' replaces "
                       f"'{f.value_text}'" + ("" if covered else "; the older memory says more, review it"))
                found.append((newest, i, conf, why))
        return sorted(found, key=lambda x: -x[2])

    def _covered(self, old: int, newest: int, attribute: str) -> bool:
        """The older memory holds nothing that is lost when it is superseded: each of its other
        statements is made elsewhere, and its other words are accounted for."""
        for f in self.facts[old]:
            if f.attribute == attribute:
                continue
            if not any(g.key == f.key and same_value(g.value, f.value)
                       for j, facts in enumerate(self.facts) if j != old for g in facts):
                return False
        leftover = dream_rules.residual(self.m[old], self.m[newest], self.facts[old])
        return len(leftover) <= 2
