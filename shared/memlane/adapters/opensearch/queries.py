"""The one place a query is built. Every search goes through `search_lines` (and its follow-up,
`similarities_body`), and the lookup
before every by-id write through `tenant_ids_query`: both always carry the store, app and tenant
terms (and are sent with the tenant's routing); nothing else builds a query over memory content.
"""

from __future__ import annotations

from typing import Any

from ...domain.analysis import query_tokens
from ...domain.models import RecordType
from ...domain.scope import ScopeFilter
from ...ports import IndexQuery, keyword_limit, runs_by_agent
from .documents import metadata_filter_terms, routing_key, term_prefix, utc_iso

MAX_K = 10_000  # the k-NN plugin's limit on k, and the default index.max_result_window
# A tenant of at most this many documents has its vector half scored exactly (a script score over its filter)
# instead of walked through lucene's graph: exact, independent of the segments' graphs, and no slower up to here
# (measured side by side, the two cross at ≈ 20,000 documents on one merged segment and later when loaded:
# docs/benchmarks.md "Where scoring a tenant exactly stops paying"). The adapter's default `exact_vector_max`.
EXACT_VECTOR_MAX = 20_000
# Ties are broken by id so that a smaller k is always a prefix of a larger one, on every backend.
_SORT = [{"_score": {"order": "desc"}}, {"memory_id": {"order": "asc"}}]
# What a hit says: its memory id (a document's `_id` is its tenant's: documents.document_id), which kind of
# record it is and where it lives (never any text).
HIT_FIELDS = ["memory_id", "record_type", "agent_id", "run_id"]
# A document written before record types has no `record_type` field: it is a memory.
_IS_MEMORY = {"bool": {"should": [{"term": {"record_type": str(RecordType.MEMORY)}},
                                  {"bool": {"must_not": {"exists": {"field": "record_type"}}}}],
                       "minimum_should_match": 1}}


def query_terms(text: str, app_id: str, tenant_id: str) -> str:
    """The terms the embedded index looks for too (analysis.query_tokens: stop words and possessives out,
    at most 64 words), with the tenant's prefix, for a `match` on `terms` (whitespace-split: no syntax)."""
    prefix = term_prefix(app_id, tenant_id)
    return " ".join(prefix + t for t in query_tokens(text))


def tenant_terms(store: str, app_id: str, tenant_id: str) -> list[dict[str, Any]]:
    """The filter that confines a query to one tenant (the security role's DLS query is the same)."""
    return [{"term": {"store": store}}, {"term": {"app_id": app_id}}, {"term": {"tenant_id": tenant_id}}]


def tenant_ids_query(store: str, app_id: str, tenant_id: str, ids: list[str]) -> dict[str, Any]:
    """The tenant's documents of these memory ids, whatever their `_id`: how a by-id write finds what it
    may touch (a document written before ids carried the tenant too, which the write then replaces)."""
    return {"bool": {"filter": [{"terms": {"memory_id": ids}}, *tenant_terms(store, app_id, tenant_id)]}}


def _scope_filters(store: str, scope: ScopeFilter) -> list[dict[str, Any]]:
    filters = tenant_terms(store, scope.app_id, scope.tenant_id)
    if scope.agent_ids is not None:
        filters.append({"terms": {"agent_id": list(scope.agent_ids)}})
    if scope.run_ids is not None:
        filters.append({"terms": {"run_id": list(scope.run_ids)}})
    return filters


def _filters(store: str, q: IndexQuery) -> list[dict[str, Any]]:
    filters = _scope_filters(store, q.scope)
    filters.append({"terms": {"status": [str(s) for s in q.statuses]}})  # empty: matches nothing, as it should
    filters.append(_record_types(q.record_types))
    if q.messages_apart:  # one clause an agent, its runs one terms query
        filters.append({"bool": {"must_not": [{"bool": {
            "filter": [{"terms": {"record_type": [str(RecordType.MESSAGE), str(RecordType.SUMMARY)]}}],
            "should": [{"bool": {"filter": [{"term": {"agent_id": agent}}, {"terms": {"run_id": runs}}]}}
                       for agent, runs in runs_by_agent(q.messages_apart).items()],
            "minimum_should_match": 1}}]}})
    if q.memory_types is not None:  # narrows memories only: messages and summaries have no type
        filters.append({"bool": {"should": [{"terms": {"memory_type": [str(t) for t in q.memory_types]}},
                                            {"bool": {"must_not": _IS_MEMORY}}], "minimum_should_match": 1}})
    for key, wanted in (q.metadata or {}).items():  # AND across keys, any of the values within one
        filters.append({"terms": {"metadata_terms": metadata_filter_terms(key, wanted)}})
    bounds = {}
    if q.time_from is not None:
        bounds["gte"] = utc_iso(q.time_from)
    if q.time_to is not None:
        bounds["lte"] = utc_iso(q.time_to)
    if bounds:
        filters.append({"range": {"time": bounds}})
    return filters


def _record_types(types: tuple[RecordType, ...]) -> dict[str, Any]:
    others = [str(t) for t in types if t != RecordType.MEMORY]
    wanted: list[dict[str, Any]] = [{"terms": {"record_type": others}}] if others else []
    if RecordType.MEMORY in types:
        wanted.append(_IS_MEMORY)
    if not wanted:
        return {"bool": {"must_not": {"match_all": {}}}}  # no record type asked for: nothing matches
    if len(wanted) == 1:
        return wanted[0]
    return {"bool": {"should": wanted, "minimum_should_match": 1}}


def search_lines(alias: str, store: str, q: IndexQuery, *, k: int, vector: list[float] | None,
                 exact: bool = False, count_up_to: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The `_msearch` body for one hybrid query, and which signal each response answers.

    BM25 over `terms` (text + keywords, analysed and scored as the embedded index does, each word counted
    over the tenant's documents: see memory-index.json and docs/benchmarks.md "Backend parity"), and the
    vector half under the same filters:
    k-NN with the filter inside the knn clause (efficient filtering: the graph search only visits documents
    that pass it, so k results come back whenever k documents match), or, `exact`, every document that
    passes the filter scored (a small tenant: faster than the walk, and the exact top k, as the embedded
    index gives below its ANN threshold). `count_up_to` adds a count of the tenant's documents (exact up to
    that many), which tells the adapter which vector half its next searches take. All routed to the
    tenant's shard.
    """
    filters = _filters(store, q)
    header = {"index": alias, "routing": routing_key(q.scope.app_id, q.scope.tenant_id)}
    common = {"size": k, "_source": HIT_FIELDS, "track_total_hits": False, "sort": _SORT}
    lines: list[dict[str, Any]] = []
    signals: list[str] = []
    words = query_terms(q.text, q.scope.app_id, q.scope.tenant_id)
    if words:
        match = {"match": {"terms": {"query": words}}}
        lines += [header, {**common, "size": keyword_limit(q, k), "query": {"bool": {"must": [match], "filter": filters}}}]
        signals.append("keyword")
    if vector is not None:
        if exact:
            query = {"script_score": {"query": {"bool": {"filter": filters}}, "script": _cosine(vector)}}
        else:
            query = {"knn": {"embedding": {"vector": vector, "k": k, "filter": {"bool": {"filter": filters}}}}}
        lines += [header, {**common, "query": query}]
        signals.append("vector")
    if count_up_to is not None:
        tenant = tenant_terms(store, q.scope.app_id, q.scope.tenant_id)
        lines += [header, {"size": 0, "track_total_hits": count_up_to, "query": {"bool": {"filter": tenant}}}]
        signals.append("tenant_size")
    return lines, signals


def offset_probe(store: str, app_id: str, tenant_id: str) -> dict[str, Any]:
    """A search whose one hit scores 0 — unless the engine adds to every score the client reads: the security
    plugin scores its document-level security clause 1.0 beside the query (a constant-score MUST), so a tenant's
    token reads every cosine and BM25 score 1.0 higher (an AWS-path trial: every similarity read as 1.0, distinct
    facts dropped as near-duplicates). Its hit's score is that constant."""
    return {"size": 1, "_source": False, "track_total_hits": False,
            "query": {"constant_score": {"filter": {"bool": {"filter": tenant_terms(store, app_id, tenant_id)}},
                                         "boost": 0.0}}}


def similarities_body(store: str, scope: ScopeFilter, ids: list[str], vector: list[float]) -> dict[str, Any]:
    """The exact cosine of `vector` with each of these documents of the scope: a script score over
    them alone."""
    return {
        "size": len(ids), "_source": ["memory_id"], "track_total_hits": False,
        "query": {"script_score": {
            "query": {"bool": {"filter": [{"terms": {"memory_id": ids}}, *_scope_filters(store, scope)]}},
            "script": _cosine(vector)}},
    }


def _cosine(vector: list[float]) -> dict[str, Any]:
    """The k-NN plugin's exact score: `knn_score` on cosinesimil scores (1 + cos) / 2, as the k-NN query does."""
    return {"source": "knn_score", "lang": "knn",
            "params": {"field": "embedding", "query_value": vector, "space_type": "cosinesimil"}}
