"""Embedded hybrid index for local mode: SQLite FTS5 (BM25) + exact cosine kNN with numpy.

One SQLite file holds everything:

- ``stores``   store name → embedding dimension (set by ``ensure_store``).
- ``docs``     one row per (store, memory_id): scope, filter fields, text. Kept small, so a
               filter that reads 10k rows of a tenant stays fast.
- ``vectors``  docs.id → float32 embedding, apart from ``docs`` for the same reason.
- ``docs_fts`` an external-content FTS5 table over ``docs.text`` + ``docs.keywords``
               (``porter unicode61``: English stemming, Unicode case folding), kept in sync
               by triggers so no write path can forget it. A third column holds one token
               per (store, app, tenant), so FTS5 skips other tenants' rows before BM25.

Every search statement is built by ``_select``, which always adds the store and scope
filter; nothing else reads ``docs`` for search. Vector search scores the embeddings of one
tenant held in an in-memory matrix (cached per store/app/tenant, dropped whenever that
tenant's docs change) and keeps only rows the filter lets through (see ``_vector``). See
docs/adr/0001-embedded-index.md for why this design and where it stops scaling.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ...domain.language import LUCENE_STOP_WORDS
from ...domain.errors import Conflict, DependencyFailed, InvalidInput, NotFound, Retryable
from ...domain.models import Memory, validate_store_name
from ...domain.scope import ScopeFilter
from ...ports import Hit, IndexedDoc, IndexQuery, IndexResult
from ..tenant_binding import TenantBinding

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS stores (
    store TEXT PRIMARY KEY,
    dim   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS docs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: the vector cache is keyed by it
    store       TEXT NOT NULL,
    memory_id   TEXT NOT NULL,
    app_id      TEXT NOT NULL,
    tenant_id   TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    event_time  TEXT,
    time        TEXT NOT NULL,                      -- event_time, else created_at (UTC ISO, fixed width)
    metadata    TEXT NOT NULL,                      -- JSON object
    importance  REAL NOT NULL,
    text        TEXT NOT NULL,
    keywords    TEXT NOT NULL,
    tkey        TEXT NOT NULL,                      -- _tenant_key(store, app_id, tenant_id)
    UNIQUE (store, memory_id)
);
-- Covers the scope + status part of every filter: the default search reads no table rows for it.
CREATE INDEX IF NOT EXISTS docs_scope ON docs (store, app_id, tenant_id, status, agent_id, run_id);
CREATE TABLE IF NOT EXISTS vectors (
    doc_id    INTEGER PRIMARY KEY,                  -- docs.id
    embedding BLOB NOT NULL                         -- float32, unit length
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    text, keywords, tkey, content='docs', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts (rowid, text, keywords, tkey) VALUES (new.id, new.text, new.keywords, new.tkey);
END;
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, text, keywords, tkey)
        VALUES ('delete', old.id, old.text, old.keywords, old.tkey);
    DELETE FROM vectors WHERE doc_id = old.id;
END;
CREATE TRIGGER IF NOT EXISTS docs_au AFTER UPDATE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, text, keywords, tkey)
        VALUES ('delete', old.id, old.text, old.keywords, old.tkey);
    INSERT INTO docs_fts (rowid, text, keywords, tkey) VALUES (new.id, new.text, new.keywords, new.tkey);
END;
"""

_INSERT = """
INSERT INTO docs (store, memory_id, app_id, tenant_id, agent_id, run_id, memory_type, status,
                  created_at, event_time, time, metadata, importance, text, keywords, tkey)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_INSERT_VECTOR = "INSERT INTO vectors (doc_id, embedding) SELECT id, ? FROM docs WHERE store = ? AND memory_id = ?"

_TOKEN = re.compile(r"\w+")  # letters/digits only: no FTS5 operator character survives
_MAX_QUERY_TOKENS = 64  # bounds the cost of one MATCH; longer queries keep their first 64 words
_CHUNK = 500  # ids per IN (...) list, well under SQLite's bound-parameter limit
_CACHE_BYTES = 256 * 1024 * 1024  # total embedding bytes kept in memory across tenants


def _utc_iso(value: datetime) -> str:
    """Fixed-width UTC ISO text, so SQL string comparison is time comparison. Naive means UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _tenant_key(store: str, app_id: str, tenant_id: str) -> str:
    # Digits only: one unicode61 token that the porter stemmer leaves alone.
    digest = hashlib.sha256("\x1f".join((store, app_id, tenant_id)).encode()).digest()
    return str(int.from_bytes(digest[:12], "big"))


def match_expression(text: str) -> str | None:
    """A safe FTS5 MATCH expression for free text: each word quoted, OR-ed. None when no words.

    Only ``\\w`` runs are kept, so quotes, ``*``, ``^``, ``:``, ``-``, ``+`` and parentheses
    are gone, and every kept word is a quoted string, so ``NEAR``, ``OR``, ``NOT`` or a
    column name are plain terms. User text can neither break nor extend the MATCH grammar.
    English stop words are left out.
    """
    words = (t.lower() for t in _TOKEN.findall(text))
    tokens = list(dict.fromkeys(w for w in words if w not in LUCENE_STOP_WORDS))[:_MAX_QUERY_TOKENS]
    return " OR ".join(f'"{t}"' for t in tokens) or None


def _unit_vector(values: Sequence[float], dim: int, what: str) -> np.ndarray:
    try:
        vec = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} must be a list of numbers", code="invalid_vector") from None
    if vec.shape != (dim,):
        raise InvalidInput(f"{what} has dimension {vec.shape[0] if vec.ndim == 1 else vec.shape}, "
                           f"the store's is {dim}", code="dimension_mismatch")
    if not np.all(np.isfinite(vec)):
        raise InvalidInput(f"{what} contains NaN or infinite values", code="invalid_vector")
    # Normalise anyway: cosine = dot only holds for unit vectors, and embedders round.
    norm = float(np.linalg.norm(vec))
    return (vec / np.float32(norm)) if norm > 0 else vec


@dataclass(frozen=True)
class _Filter:
    """Everything that narrows a search, in the form `_select` turns into SQL."""

    scope: ScopeFilter
    statuses: tuple[str, ...] | None = None  # None = any
    memory_types: tuple[str, ...] | None = None
    metadata: dict[str, Any] | None = None
    time_from: str | None = None
    time_to: str | None = None

    @classmethod
    def of(cls, q: IndexQuery) -> _Filter:
        return cls(
            scope=q.scope,
            statuses=tuple(str(s) for s in q.statuses),
            memory_types=None if q.memory_types is None else tuple(str(t) for t in q.memory_types),
            metadata=q.metadata,
            time_from=None if q.time_from is None else _utc_iso(q.time_from),
            time_to=None if q.time_to is None else _utc_iso(q.time_to),
        )


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


@dataclass(frozen=True)
class _Vectors:
    """One tenant's embeddings, rows ordered by docs.id. Replaced, never mutated."""

    ids: np.ndarray  # int64, ascending
    memory_ids: list[str]
    matrix: np.ndarray  # float32 (n, dim)


class EmbeddedIndex:
    """The `Index` port over one SQLite file. Thread-safe: one connection behind one lock."""

    def __init__(self, path: str | Path):
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # the index is derived data: rebuildable
        self._db.execute("PRAGMA busy_timeout=5000")
        # Deleted rows are overwritten with zeros, not left in free space (erasure leaves nothing).
        self._db.execute("PRAGMA secure_delete=ON")
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version not in (0, _SCHEMA_VERSION):
            # The index is derived data: the fix is to delete the file and run `memlane reindex`.
            raise DependencyFailed(f"index file {path} has schema version {version}, this code expects "
                                   f"{_SCHEMA_VERSION}; delete it and rebuild the index")
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        self._cache: OrderedDict[tuple[str, str, str], _Vectors] = OrderedDict()
        self._cache_bytes = 0
        self._data_version = self._read_data_version()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- stores --------------------------------------------------------------------------------
    def ensure_store(self, store: str, dim: int) -> None:
        validate_store_name(store)
        if not isinstance(dim, int) or dim <= 0:
            raise InvalidInput("embedding dimension must be a positive integer", field="dim")
        with self._lock, self._write():
            row = self._db.execute("SELECT dim FROM stores WHERE store = ?", (store,)).fetchone()
            if row is None:
                self._db.execute("INSERT INTO stores (store, dim) VALUES (?, ?)", (store, dim))
            elif row[0] != dim:
                raise Conflict(f"index of store '{store}' has dimension {row[0]}, not {dim}; "
                               "drop and rebuild it to change the embedding model", code="dimension_conflict")

    def drop_store(self, store: str) -> None:
        with self._lock:
            with self._write():
                self._db.execute("DELETE FROM docs WHERE store = ?", (store,))
                self._db.execute("DELETE FROM stores WHERE store = ?", (store,))
            for key in [k for k in self._cache if k[0] == store]:
                self._evict(key)

    # -- writes --------------------------------------------------------------------------------
    def upsert(self, store: str, docs: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        """Replace each doc by memory_id. All validated before anything is written."""
        with self._lock:
            dim = self._dim(store)
            if dim is None:
                raise NotFound(f"no index for store '{store}' (ensure_store first)", code="store_not_found")
            vecs = {m.memory_id: _unit_vector(v, dim, f"embedding of {m.memory_id}") for m, v in docs}
            # A batch naming the same memory twice keeps the last version, as sequential upserts would.
            rows = list({m.memory_id: self._row(store, m) for m, _ in docs}.values())
            with self._write():
                touched = self._remove(store, list(vecs))
                self._db.executemany(_INSERT, rows)
                self._db.executemany(_INSERT_VECTOR, ((v.tobytes(), store, mid) for mid, v in vecs.items()))
            touched |= {(store, r[2], r[3]) for r in rows}
            for key in touched:
                self._evict(key)

    def delete(self, store: str, memory_ids: Sequence[str], *, tenant: tuple[str, str] | None = None) -> None:
        """Delete by id; with `tenant` (app_id, tenant_id), only the ids of that tenant."""
        with self._lock:
            with self._write():
                touched = self._remove(store, list(memory_ids), tenant)
            for key in touched:
                self._evict(key)

    def compact(self) -> None:
        """Leave no deleted text in the file. An FTS5 delete only appends a tombstone: the terms stay
        in the older segments until they are merged, so merge them all ('optimize'; SQLite 3.40 has no
        FTS5 secure-delete). Freed pages are zeroed (secure_delete), then the WAL, which still holds
        the pages as they were before, is checkpointed into the file and truncated."""
        with self._lock:
            with self._write():
                self._db.execute("INSERT INTO docs_fts (docs_fts) VALUES ('optimize')")
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise Retryable("the index file is busy: its write-ahead log could not be truncated; "
                                "retry the deletion", code="storage_busy")

    def documents(self, store: str) -> Iterator[IndexedDoc]:
        """Every document of the store, in id order (fsck compares them with the table)."""
        last = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT id, memory_id, app_id, tenant_id, agent_id, run_id, status, text, keywords FROM docs "
                    "WHERE store = ? AND id > ? ORDER BY id LIMIT 500", (store, last)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield from (IndexedDoc(*row[1:]) for row in rows)

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> TenantEmbeddedIndex:
        return TenantEmbeddedIndex(self, TenantBinding.of(store, app_id, tenant_id))

    def count(self, store: str) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM docs WHERE store = ?", (store,)).fetchone()[0])

    # -- search --------------------------------------------------------------------------------
    def search(self, store: str, query: IndexQuery) -> IndexResult:
        k = max(query.k, 0)
        f = _Filter.of(query)
        with self._lock:
            dim = self._dim(store)
            if dim is None or k == 0:
                return IndexResult(keyword=[], vector=[])
            qvec = None if query.vector is None else _unit_vector(query.vector, dim, "query vector")
            keyword = self._keyword(store, f, query.text, k)
            vector = [] if qvec is None else self._vector(store, f, qvec, k)
        return IndexResult(keyword=keyword, vector=vector)

    def _keyword(self, store: str, f: _Filter, text: str, k: int) -> list[Hit]:
        match = match_expression(text)
        if match is None:
            return []
        rows = self._select(store, f, "d.memory_id, -bm25(docs_fts, 1.0, 1.0, 0.0)", match=match, limit=k)
        return [Hit(memory_id, float(score)) for memory_id, score in rows]

    def _vector(self, store: str, f: _Filter, qvec: np.ndarray, k: int) -> list[Hit]:
        """Exact filtered kNN: score the tenant's whole matrix, then ask the filter about the best.

        If at least k of the `want` best rows pass the filter, they hold the filtered top k
        (every row outside scores no higher), so a broad filter checks a few hundred ids
        instead of reading every allowed id. A selective one widens `want`, then reads the
        allowed ids once. Either way the rows are chosen by `_select`.
        """
        vectors = self._vectors(store, f.scope.app_id, f.scope.tenant_id)
        n = vectors.ids.size
        if n == 0:
            return []
        scores = vectors.matrix @ qvec
        want = max(8 * k, 256)
        while want < n // 4:
            best = np.argpartition(-scores, want)[:want]
            passing = self._select(store, f, "d.id", within=vectors.ids[best].tolist())
            rows = best[np.isin(vectors.ids[best], [r[0] for r in passing])]
            if rows.size >= k:
                return self._top(vectors, scores, rows, k)
            want *= 8
        allowed = np.fromiter((r[0] for r in self._select(store, f, "d.id")), dtype=np.int64)
        # Rows another process added after the matrix was read are skipped, not mis-scored.
        rows = np.minimum(np.searchsorted(vectors.ids, allowed), n - 1)
        return self._top(vectors, scores, rows[vectors.ids[rows] == allowed], k)

    @staticmethod
    def _top(vectors: _Vectors, scores: np.ndarray, rows: np.ndarray, k: int) -> list[Hit]:
        if rows.size > k:
            rows = rows[np.argpartition(-scores[rows], k - 1)[:k]]
        ranked = sorted(rows.tolist(), key=lambda i: (-scores[i], vectors.memory_ids[i]))
        return [Hit(vectors.memory_ids[i], float(scores[i])) for i in ranked]

    # -- the one query builder ------------------------------------------------------------------
    def _select(self, store: str, f: _Filter, columns: str, *, match: str | None = None,
                within: list[int] | None = None, with_vectors: bool = False,
                limit: int | None = None) -> list[tuple[Any, ...]]:
        """Read `docs` (alias d) under the store + scope filter and the query's filters.

        The only code that reads docs for search: the scope conditions are not optional here,
        so no caller can forget them. `columns` is a constant chosen by this module.
        """
        where = ["d.store = ?", "d.app_id = ?", "d.tenant_id = ?"]
        params: list[Any] = [store, f.scope.app_id, f.scope.tenant_id]

        def add(clause: tuple[str, list[Any]]) -> None:
            where.append(clause[0])
            params.extend(clause[1])

        if f.scope.agent_ids is not None:
            add(_in("d.agent_id", f.scope.agent_ids))
        if f.scope.run_ids is not None:
            add(_in("d.run_id", f.scope.run_ids))
        if f.statuses is not None:
            add(_in("d.status", f.statuses))
        if f.memory_types is not None:
            add(_in("d.memory_type", f.memory_types))
        for key, wanted in (f.metadata or {}).items():
            add(_metadata_clause(key, wanted))
        if f.time_from is not None:
            add(("d.time >= ?", [f.time_from]))
        if f.time_to is not None:
            add(("d.time <= ?", [f.time_to]))
        if within is not None:  # candidate doc ids, as one JSON parameter: no variable limit
            add(("d.id IN (SELECT value FROM json_each(?))", [json.dumps(within)]))

        if match is None:
            join = "JOIN vectors AS v ON v.doc_id = d.id" if with_vectors else ""
            sql = f"SELECT {columns} FROM docs AS d {join} WHERE {' AND '.join(where)} ORDER BY d.id"
        else:
            # The tenant token narrows the FTS5 scan to this tenant before any BM25 work (the
            # SQL filter stays the authority); user words are held to the text columns.
            tenant = _tenant_key(store, f.scope.app_id, f.scope.tenant_id)
            sql = (f"SELECT {columns} FROM docs_fts JOIN docs AS d ON d.id = docs_fts.rowid "
                   f"WHERE docs_fts MATCH ? AND {' AND '.join(where)} "
                   "ORDER BY bm25(docs_fts, 1.0, 1.0, 0.0), d.memory_id")
            params.insert(0, f'tkey : "{tenant}" AND {{text keywords}} : ({match})')
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self._db.execute(sql, params).fetchall()

    # -- vector cache --------------------------------------------------------------------------
    def _vectors(self, store: str, app_id: str, tenant_id: str) -> _Vectors:
        self._check_foreign_writes()
        key = (store, app_id, tenant_id)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        whole_tenant = _Filter(scope=ScopeFilter(app_id=app_id, tenant_id=tenant_id))
        rows = self._select(store, whole_tenant, "d.id, d.memory_id, v.embedding", with_vectors=True)
        dim = self._dim(store) or 0
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        vectors = _Vectors(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows], matrix)
        self._cache[key] = vectors
        self._cache_bytes += matrix.nbytes
        while self._cache_bytes > _CACHE_BYTES and len(self._cache) > 1:
            self._evict(next(iter(self._cache)))
        return vectors

    def _evict(self, key: tuple[str, str, str]) -> None:
        dropped = self._cache.pop(key, None)
        if dropped is not None:
            self._cache_bytes -= dropped.matrix.nbytes

    def _read_data_version(self) -> int:
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _check_foreign_writes(self) -> None:
        # data_version changes when *another* connection commits to the file (e.g. `memlane
        # reindex` in a second process); our own writes evict precisely instead.
        version = self._read_data_version()
        if version != self._data_version:
            self._cache.clear()
            self._cache_bytes = 0
            self._data_version = version

    # -- internals -----------------------------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _dim(self, store: str) -> int | None:
        row = self._db.execute("SELECT dim FROM stores WHERE store = ?", (store,)).fetchone()
        return None if row is None else int(row[0])

    def _remove(self, store: str, memory_ids: list[str],
                tenant: tuple[str, str] | None = None) -> set[tuple[str, str, str]]:
        """Delete docs by id (of `tenant` only, when given); return the (store, app, tenant) keys
        whose vectors changed."""
        touched: set[tuple[str, str, str]] = set()
        only = "" if tenant is None else " AND app_id = ? AND tenant_id = ?"
        for i in range(0, len(memory_ids), _CHUNK):
            chunk = memory_ids[i:i + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = self._db.execute(f"DELETE FROM docs WHERE store = ? AND memory_id IN ({marks}){only} "
                                    "RETURNING app_id, tenant_id", [store, *chunk, *(tenant or ())]).fetchall()
            touched |= {(store, app, tenant) for app, tenant in rows}
        return touched

    @staticmethod
    def _row(store: str, m: Memory) -> tuple[Any, ...]:
        created = _utc_iso(m.created_at)
        event = None if m.event_time is None else _utc_iso(m.event_time)
        return (
            store, m.memory_id, m.scope.app_id, m.scope.tenant_id, m.scope.agent_id, m.scope.run_id,
            str(m.memory_type), str(m.status), created, event, event or created,
            json.dumps(m.metadata, default=str), m.importance, m.text, m.keywords,
            _tenant_key(store, m.scope.app_id, m.scope.tenant_id),
        )


class TenantEmbeddedIndex:
    """An `EmbeddedIndex` bound to one tenant (`Index.for_tenant`): calls naming another store or
    tenant are refused, and deletes touch only the tenant's documents."""

    def __init__(self, index: EmbeddedIndex, binding: TenantBinding):
        self._index, self.binding = index, binding

    def ensure_store(self, store: str, dim: int) -> None:
        self.binding.check_lifecycle(store)

    def drop_store(self, store: str) -> None:
        self.binding.check_lifecycle(store)

    def upsert(self, store: str, docs: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        for memory, _ in docs:
            self.binding.check(store, memory.scope.app_id, memory.scope.tenant_id)
        self._index.upsert(store, docs)

    def delete(self, store: str, memory_ids: Sequence[str]) -> None:
        self.binding.check(store)
        self._index.delete(store, memory_ids, tenant=(self.binding.app_id, self.binding.tenant_id))

    def search(self, store: str, query: IndexQuery) -> IndexResult:
        self.binding.check(store, query.scope.app_id, query.scope.tenant_id)
        return self._index.search(store, query)

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> TenantEmbeddedIndex:
        return self._index.for_tenant(store, app_id, tenant_id)
