"""What narrows an embedded-index search, as SQL: the store + scope conditions every search
carries, and the query's own filters.

Everything user-given is bound as a parameter or quoted here; `EmbeddedIndex._select` is the only
caller, and it cannot leave the scope conditions out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from ...domain.errors import InvalidInput
from ...domain.models import RecordType
from ...domain.records import utc_iso
from ...domain.scope import ScopeFilter
from ...ports import IndexQuery, runs_by_agent


_MESSAGE = str(RecordType.MESSAGE)
# A thread's own records, kept to it when it stores nothing in long-term memory: its turns, and its summary (their words).
_TURNS = (_MESSAGE, str(RecordType.SUMMARY))


@dataclass(frozen=True)
class Filter:
    """Everything that narrows a search, in the form `where` turns into SQL."""

    scope: ScopeFilter
    statuses: tuple[str, ...] | None = None  # None = any
    record_types: tuple[str, ...] | None = None  # None = any
    memory_types: tuple[str, ...] | None = None  # narrows memories only: messages and summaries have no type
    metadata: dict[str, Any] | None = None
    time_from: str | None = None
    time_to: str | None = None
    messages_apart: frozenset[tuple[str, str]] = frozenset()  # (agent_id, run_id) whose messages are left out

    @classmethod
    def of(cls, q: IndexQuery) -> Filter:
        return cls(
            scope=q.scope,
            statuses=tuple(str(s) for s in q.statuses),
            record_types=tuple(str(r) for r in q.record_types),
            memory_types=None if q.memory_types is None else tuple(str(t) for t in q.memory_types),
            metadata=q.metadata,
            time_from=None if q.time_from is None else utc_iso(q.time_from),
            time_to=None if q.time_to is None else utc_iso(q.time_to),
            messages_apart=frozenset(q.messages_apart),
        )

    @property
    def on_facts(self) -> bool:
        """Whether `admits` decides it: it narrows by nothing but scope, status and record type (what a
        tenant's term index holds of each row), not by memory type, metadata or time."""
        return self.memory_types is None and not self.metadata and self.time_from is None and self.time_to is None

    def admits(self, record_type: str, agent_id: str, run_id: str, status: str) -> bool:
        """`where`'s conditions beyond store and tenant, on one row of the tenant (a filter `on_facts`)."""
        s = self.scope
        return ((s.agent_ids is None or agent_id in s.agent_ids) and (s.run_ids is None or run_id in s.run_ids)
                and (self.statuses is None or status in self.statuses)
                and (self.record_types is None or record_type in self.record_types)
                and not (record_type in _TURNS and (agent_id, run_id) in self.messages_apart))


def where(store: str, f: Filter) -> tuple[list[str], list[Any]]:
    """The conditions on `docs` (alias d) of one search: store and tenant always, then the rest."""
    clauses = ["d.store = ?", "d.app_id = ?", "d.tenant_id = ?"]
    params: list[Any] = [store, f.scope.app_id, f.scope.tenant_id]

    def add(clause: tuple[str, list[Any]]) -> None:
        clauses.append(clause[0])
        params.extend(clause[1])

    if f.scope.agent_ids is not None:
        add(_in("d.agent_id", f.scope.agent_ids))
    if f.scope.run_ids is not None:
        add(_in("d.run_id", f.scope.run_ids))
    if f.statuses is not None:
        add(_in("d.status", f.statuses))
    if f.record_types is not None:
        add(_in("d.record_type", f.record_types))
    if f.messages_apart:  # one clause an agent, its runs one parameter
        grouped = runs_by_agent(f.messages_apart)
        threads = " OR ".join("(d.agent_id = ? AND d.run_id IN (SELECT value FROM json_each(?)))" for _ in grouped)
        add((f"NOT (d.record_type IN (?, ?) AND ({threads}))",
             [*_TURNS, *(v for agent, runs in grouped.items() for v in (agent, json.dumps(runs)))]))
    if f.memory_types is not None:
        typed, values = _in("d.memory_type", f.memory_types)
        add((f"(d.record_type != ? OR {typed})", [str(RecordType.MEMORY), *values]))
    for key, wanted in (f.metadata or {}).items():
        add(_metadata_clause(key, wanted))
    if f.time_from is not None:
        add(("d.time >= ?", [f.time_from]))
    if f.time_to is not None:
        add(("d.time <= ?", [f.time_to]))
    return clauses, params


def candidates(doc_ids: list[int]) -> tuple[str, list[Any]]:
    """The FROM of a read of candidate doc ids (one JSON parameter: no variable limit), each found
    by its rowid; the filter's conditions then apply to those rows only."""
    return "json_each(?) AS c CROSS JOIN docs AS d ON d.id = c.value", [json.dumps(doc_ids)]


def named_documents(memory_ids: list[str]) -> tuple[str, list[Any]]:
    """The FROM of a read of documents by their memory ids, each found through the unique
    (store, app_id, tenant_id, memory_id) index, as the filter names the store and tenant; the filter's
    other conditions then apply to those rows only."""
    return "json_each(?) AS c CROSS JOIN docs AS d ON d.memory_id = c.value", [json.dumps(memory_ids)]


def _in(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    # An empty selector selects nothing (SQLite accepts "IN ()").
    return f"{column} IN ({', '.join('?' * len(values))})", list(values)


def _json_value_is(alias: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """`alias` (a json_each row) equals one of `values`, comparing JSON type as well as value."""
    terms: list[str] = []
    params: list[Any] = []
    for v in values:
        if v is None:
            terms.append(f"{alias}.type = 'null'")
        elif isinstance(v, bool):  # before int: True must not match the number 1
            terms.append(f"{alias}.type = '{'true' if v else 'false'}'")
        elif isinstance(v, (int, float)):
            terms.append(f"({alias}.type IN ('integer', 'real') AND {alias}.atom = ?)")
            params.append(v)
        elif isinstance(v, str):
            terms.append(f"({alias}.type = 'text' AND {alias}.atom = ?)")
            params.append(v)
        else:
            raise InvalidInput("metadata filter values must be strings, numbers, booleans or null "
                               "(or a list of them)", code="invalid_filter", field="filters.metadata")
    return "(" + (" OR ".join(terms) or "0") + ")", params


def _metadata_clause(key: str, wanted: Any) -> tuple[str, list[Any]]:
    """Top-level metadata[key] equals `wanted` (a list = any of); a list-valued field matches
    when any element does, like a term query on an array field in OpenSearch.

    json_each with a bound key, not a json_extract path, so no key can alter the JSON path.
    """
    values = list(wanted) if isinstance(wanted, (list, tuple)) else [wanted]
    direct, p1 = _json_value_is("m", values)
    element, p2 = _json_value_is("e", values)
    sql = (f"EXISTS (SELECT 1 FROM json_each(d.metadata) AS m WHERE m.key = ? AND ({direct} OR "
           f"(m.type = 'array' AND EXISTS (SELECT 1 FROM json_each(m.value) AS e WHERE {element}))))")
    return sql, [key, *p1, *p2]
