"""Search: embed the query, keyword + vector retrieval under the scope in one index call, fuse,
rerank, and answer with the records loaded from the table (the source of truth).

A search finds memories unless it names other record types (`message`, `summary`): a hit of any type
is a `Memory`-shaped record with its `record_type`. `exact_thread_match` says whether a search made
from one thread stays in it (true) or reaches the tenant's other threads too (false), if the asking
thread's access policy lets it recall at all."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..domain import limits
from ..domain.errors import InvalidInput
from ..domain.models import MemoryStatus, MemoryType, Memory, Message, RecordType
from ..domain.records import message_document
from ..domain.scope import Scope, ScopeFilter, search_scope
from ..domain.validation import check_metadata
from ..policies import conflicts, consolidation
from ..policies.ranking import RECIPES, SearchRecipe, min_max, reciprocal_rank_fusion, similarity_from_cosine
from ..ports import Hit, IndexQuery, IndexResult
from . import embedder_guard, scopes, summaries
from .deps import Deps


@dataclass(frozen=True)
class SearchHit:
    memory: Memory  # the record found: a memory, or a message's or summary's document
    score: float
    similarity: float
    evidence: list[Message] | None = None
    message: Message | None = None  # the message itself, when the record is one

    @property
    def record_type(self) -> RecordType:
        return self.memory.record_type


def search(deps: Deps, store: str, *, query: str, scope: dict[str, Any] | None, top_k: int = limits.DEFAULT_TOP_K,
           min_similarity: float = 0.0, include_evidence: bool = False, filters: dict[str, Any] | None = None,
           memory_types: list[MemoryType] | None = None, include_superseded: bool = False,
           time_from: datetime | None = None, time_to: datetime | None = None,
           recipe: str | None = None, as_of: datetime | None = None,
           record_types: list[RecordType | str] | None = None,
           exact_thread_match: bool | None = None) -> list[SearchHit]:
    """By default only current memories (the head of each supersede chain); `include_superseded`
    adds the history (each with `valid_from` / `valid_to`); `as_of` answers with what held then:
    memories said by that time and not yet superseded at it (messages: said by then).
    `record_types` (default memories only); `exact_thread_match` (None: the scope as given)."""
    where = search_scope(scope)
    types = _record_types(record_types)
    thread = _thread(where, exact_thread_match)
    embedder_guard.ensure(deps, deps.repo.get_store(store))  # unknown store → 404; another model's store → 409
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string", field="query")
    if len(query) > limits.MAX_QUERY_CHARS:
        raise InvalidInput(f"query exceeds {limits.MAX_QUERY_CHARS} characters", field="query")
    if not 1 <= top_k <= limits.MAX_TOP_K:
        raise InvalidInput(f"top_k must be between 1 and {limits.MAX_TOP_K}", field="top_k")
    if not 0.0 <= min_similarity <= 1.0:
        raise InvalidInput("min_similarity must be between 0 and 1", field="min_similarity")
    if as_of is not None and not isinstance(as_of, datetime):
        raise InvalidInput("as_of must be a date-time", field="as_of")
    as_of = as_of.replace(tzinfo=timezone.utc) if as_of is not None and as_of.tzinfo is None else as_of
    plan = _recipe(recipe or deps.settings.default_recipe)
    where = scopes.recall_filter(deps, store, where)
    if where is None:
        return []
    asked_runs = where.run_ids
    if thread is not None and not thread:
        where = where.model_copy(update={"run_ids": None})  # the asking thread recalls: every thread of the tenant

    # The query's vector: for the vector half, and for the similarity a hit reports and min_similarity compares
    # (a keyword-only recipe embeds the query only when a minimum is asked for).
    vector = deps.embedder.embed([query])[0] if plan.vector_weight > 0 or min_similarity > 0 else None
    history = include_superseded or as_of is not None
    statuses = (MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED) if history else (MemoryStatus.ACTIVE,)
    # A read narrowed to some agents or threads may not see what superseded a memory (an update told to
    # another agent or in another thread): it keeps the value it was told, so it fetches the superseded too.
    narrowed_read = where.agent_ids is not None or where.run_ids is not None
    narrowed = not history and narrowed_read
    # ... and so does a narrowed read of a past moment: what had been superseded by then out of its sight.
    narrowed_then = as_of is not None and not include_superseded and narrowed_read
    fetched = (MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED) if narrowed else statuses
    asked = IndexQuery(
        scope=where, text=query, vector=vector if plan.vector_weight > 0 else None, k=plan.candidates,
        memory_types=tuple(memory_types) if memory_types else None, statuses=fetched, record_types=types,
        metadata=check_metadata(filters, "filters") or None, time_from=time_from, time_to=time_to)
    result = deps.index.search(store, asked)
    if set(types) & set(_TURNS):
        result = _without_private_turns(deps, store, asked, result, asked_runs)

    fused = reciprocal_rank_fusion([(plan.keyword_weight, result.keyword), (plan.vector_weight, result.vector)],
                                   plan.rrf_k)
    cosines = {h.memory_id: h.score for h in result.vector}
    # Equal scores are common (one memory tops the keyword list, another the vector list): the one
    # closer in meaning first, then the id, so the order never depends on how ids were drawn.
    ranked = sorted(fused, key=lambda mid: (-fused[mid], -cosines.get(mid, -1.0), mid))
    reranking = plan.rerank and deps.reranker is not None
    depth = max(top_k, plan.rerank_depth if reranking else 0)
    records, messages = _load(deps, store, where, [*result.keyword, *result.vector], ranked[:depth])
    memories = records
    # The table is the truth: drop what the index still holds but the table no longer shows.
    candidates = [mid for mid in ranked[:depth] if mid in memories and memories[mid].status in fetched
                  and where.matches(memories[mid].scope.as_dict())
                  and (as_of is None or _held_at(memories[mid], as_of)
                       or narrowed_then and _said_by(memories[mid], as_of))]
    if narrowed:
        candidates = _current_here(deps, store, where, memories, candidates)
    elif narrowed_then:
        closed = [mid for mid in candidates if as_of is not None and not _held_at(memories[mid], as_of)]
        kept = set(_current_here(deps, store, where, memories, closed, as_of)) if closed else set()
        candidates = [mid for mid in candidates if mid in kept or mid not in closed]
    scores = {mid: fused[mid] for mid in candidates}
    if reranking and len(candidates) > 1:
        # Only the head is reranked, so the first results do not depend on how many were asked for.
        head = candidates[:plan.rerank_depth]
        reranked = _rerank(deps, query, head, memories, scores, plan)
        head.sort(key=lambda mid: (-reranked[mid], -cosines.get(mid, -1.0), mid))
        floor = min(reranked.values(), default=0.0)
        # Below the head, keep the fused order under the lowest head score.
        scores = {**{mid: floor - (i + 1) * 1e-6 for i, mid in enumerate(candidates[len(head):])}, **reranked}
        candidates = head + candidates[len(head):]

    hits: list[SearchHit] = []
    seen = 0
    while len(hits) < top_k and seen < len(candidates):
        batch = candidates[seen:seen + top_k - len(hits)]
        seen += len(batch)
        missing = [mid for mid in batch if mid not in cosines]
        if missing and vector is not None:
            # Hits the vector list did not reach (keyword-only): their cosines, read from the index.
            cosines.update(deps.index.similarities(store, where, vector, missing))
        for mid in batch:
            similarity = similarity_from_cosine(cosines.get(mid, 0.0))
            if similarity >= min_similarity:
                hits.append(SearchHit(memory=memories[mid], score=round(scores[mid], 6),
                                      similarity=round(similarity, 6), message=messages.get(mid)))
    if not history:
        # Two active memories that conflict anyway (written before write-time consolidation, or
        # beyond what it could tell): the newer first. Scores stay as they were.
        # Memories only: a message or summary keeps its place.
        relevance = {h.memory.memory_id: h.similarity for h in hits}
        slots = [i for i, h in enumerate(hits) if h.record_type == RecordType.MEMORY]
        by_id = {h.memory.memory_id: h for h in hits}
        for i, m in zip(slots, conflicts.newer_first([hits[i].memory for i in slots], relevance)):
            hits[i] = by_id[m.memory_id]
    if include_evidence:
        evidence = _evidence(deps, store, where, [h.memory for h in hits], asked_runs)
        hits = [SearchHit(h.memory, h.score, h.similarity, evidence[h.memory.memory_id], h.message) for h in hits]
    return hits


_MAX_RECORD_TYPES = len(RecordType)
_CHAIN_HOPS = 8  # supersede chains are short; a longer one is cut, its memory shown as this read's latest


def _current_here(deps: Deps, store: str, where: ScopeFilter, memories: dict[str, Memory],
                  candidates: list[str], as_of: datetime | None = None) -> list[str]:
    """The candidates without the superseded memories whose successor — or one further down their
    chain — this read can see: a superseded memory stays only where its update is out of sight. `as_of`: the
    chain as it stood then (a successor said later was not there yet)."""
    # Each candidate → the memory its chain has reached (whose `superseded_by` is the next to read).
    pending = {mid: memories[mid] for mid in candidates if memories[mid].status == MemoryStatus.SUPERSEDED}
    hidden: set[str] = set()
    for _ in range(_CHAIN_HOPS):
        pending = {mid: at for mid, at in pending.items() if at.superseded_by}
        if not pending:
            break
        successors = {m.memory_id: m for m in deps.repo.get_memories(
            store, where.app_id, where.tenant_id, sorted({str(at.superseded_by) for at in pending.values()}))}
        later: dict[str, Memory] = {}
        for mid, at in pending.items():
            successor = successors.get(str(at.superseded_by))
            if successor is not None and not consolidation.succeeds(successor, at):
                successor = None  # written under the id after the one that superseded `at` was deleted: gone
            elif successor is not None and as_of is not None and not _said_by(successor, as_of):
                continue  # not said yet then: the chain ended out of sight, and the memory stays
            if successor is not None and not where.matches(successor.scope.as_dict()):
                later[mid] = successor
            else:  # in sight, or gone (hidden as from every read)
                hidden.add(mid)
        pending = later
    return [mid for mid in candidates if mid not in hidden]


_PRIVATE_ROUNDS = 2  # index queries again, each leaving out the private threads found before it; then all of them
# A thread's own records: its turns, and its summary (their words, quoted) — private with them when the thread's
# policy stores nothing in long-term memory, whether it always did or was switched to it after a summary was made.
_TURNS = (RecordType.MESSAGE, RecordType.SUMMARY)


def _without_private_turns(deps: Deps, store: str, query: IndexQuery, result: IndexResult,
                           named: tuple[str, ...] | None) -> IndexResult:
    """`result` without the turns of threads that store nothing in long-term memory (none, recall_only), unless the
    search names them: those turns are their thread's own, never recalled from the tenant's other threads or
    tenant-wide. The threads are found among the hits and the index is asked again leaving them out; a tenant whose
    private threads still fill the hits after _PRIVATE_ROUNDS has every one of them left out, from its registry. So
    however much they say, they hide no other thread's turns."""
    s, apart = query.scope, set(query.messages_apart)
    for asked in range(_PRIVATE_ROUNDS + 1):
        threads = {(h.agent_id, h.run_id) for h in [*result.keyword, *result.vector]
                   if h.record_type in _TURNS and (named is None or h.run_id not in named)} - apart
        found = scopes.storing_nothing(deps, store, s.app_id, s.tenant_id, threads)
        if not found:
            return result
        apart |= found if asked < _PRIVATE_ROUNDS else scopes.private_threads(deps, store, s, named)
        query = query.model_copy(update={"messages_apart": tuple(sorted(apart))})
        result = deps.index.search(store, query)
    return result


def _record_types(asked: list[RecordType | str] | None) -> tuple[RecordType, ...]:
    if asked is None:
        return (RecordType.MEMORY,)
    known = {str(t) for t in RecordType}
    if (not isinstance(asked, (list, tuple)) or not 1 <= len(asked) <= _MAX_RECORD_TYPES
            or not all(isinstance(t, str) and t in known for t in asked)):
        raise InvalidInput(f"record_types must be 1-{_MAX_RECORD_TYPES} of {', '.join(sorted(known))}",
                           code="invalid_record_types", field="record_types")
    return tuple(dict.fromkeys(RecordType(t) for t in asked))


def _thread(where: ScopeFilter, exact: bool | None) -> bool | None:
    """None: the scope's runs as given. True/False: the search is made from one thread (its run_id),
    and stays in it or not."""
    if exact is None:
        return None
    if where.run_ids is None or len(where.run_ids) != 1:
        raise InvalidInput("exact_thread_match needs the thread: one scope.run_id", code="thread_required",
                           field="scope.run_id")
    return bool(exact)


def _load(deps: Deps, store: str, where: ScopeFilter, found: list[Hit],
          ids: list[str]) -> tuple[dict[str, Memory], dict[str, Message]]:
    """The records behind these ids, read from the table: memories by id, messages by their thread
    (the index says which). What the table no longer holds is left out."""
    kind = {h.memory_id: h for h in found}
    by_type: dict[RecordType, list[str]] = {}
    for mid in ids:
        by_type.setdefault(kind[mid].record_type, []).append(mid)
    records = {m.memory_id: m for m in deps.repo.get_memories(store, where.app_id, where.tenant_id,
                                                              by_type.get(RecordType.MEMORY, []))}
    records = {mid: m for mid, m in records.items() if m.record_type == RecordType.MEMORY}
    threads: dict[tuple[str, str], list[str]] = {}
    for mid in by_type.get(RecordType.MESSAGE, []):
        threads.setdefault((kind[mid].agent_id, kind[mid].run_id), []).append(mid)
    messages: dict[str, Message] = {}
    for (agent_id, run_id), message_ids in threads.items():
        thread = Scope(app_id=where.app_id, tenant_id=where.tenant_id, agent_id=agent_id, run_id=run_id)
        messages.update((m.message_id, m) for m in deps.repo.get_messages(store, thread, message_ids))
    records.update((mid, message_document(m)) for mid, m in messages.items())
    summary_ids = by_type.get(RecordType.SUMMARY, [])
    records.update(_summaries(deps, store, where, summary_ids, [(kind[i].agent_id, kind[i].run_id) for i in summary_ids]))
    return records, messages


def _summaries(deps: Deps, store: str, where: ScopeFilter, ids: list[str],
               threads: list[tuple[str, str]]) -> dict[str, Memory]:
    """Summary records behind these ids, read from the table by their threads (a document without its
    record is left out)."""
    if not ids:
        return {}
    return {d.memory_id: d for d in summaries.documents(deps, store, where.app_id, where.tenant_id, ids, threads)}


def _held_at(memory: Memory, when: datetime) -> bool:
    """Said by `when` and not yet superseded at it."""
    end = memory.valid_to or (memory.updated_at if memory.status != MemoryStatus.ACTIVE else None)
    return _said_by(memory, when) and (end is None or when < end)


def _said_by(memory: Memory, when: datetime) -> bool:
    start = consolidation.observed(memory)
    return start is None or start <= when


def _recipe(name: str) -> SearchRecipe:
    if name not in RECIPES:
        raise InvalidInput(f"unknown recipe '{name}'; one of {', '.join(RECIPES)}", field="recipe")
    return RECIPES[name]


def _rerank(deps: Deps, query: str, candidates: list[str], memories: dict[str, Memory], scores: dict[str, float],
            plan: SearchRecipe) -> dict[str, float]:
    assert deps.reranker is not None
    relevance = deps.reranker.rerank(query, [memories[mid].text for mid in candidates])
    fused_norm = min_max([scores[mid] for mid in candidates])
    rerank_norm = min_max(relevance)
    w = plan.rerank_weight
    return {mid: (1 - w) * f + w * r for mid, f, r in zip(candidates, fused_norm, rerank_norm)}


def _evidence(deps: Deps, store: str, where: ScopeFilter, memories: list[Memory],
              named: tuple[str, ...] | None) -> dict[str, list[Message]]:
    """Each memory's evidence turns, but those of threads that store nothing in long-term memory (none, recall_only)
    unless the search names them: a memory extracted before its thread was switched stays, its turns are the
    thread's own (as `_without_private_turns` keeps them out of the hits)."""
    said = {m.memory_id: deps.repo.get_messages(store, m.scope, m.evidence) if m.evidence else [] for m in memories}
    threads = {(t.scope.agent_id, t.scope.run_id) for turns in said.values() for t in turns
               if named is None or t.scope.run_id not in named}
    private = scopes.storing_nothing(deps, store, where.app_id, where.tenant_id, threads) if threads else set()
    return {mid: [t for t in turns if (t.scope.agent_id, t.scope.run_id) not in private] for mid, turns in said.items()}
