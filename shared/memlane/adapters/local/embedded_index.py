"""Embedded hybrid index for local mode: BM25 over each tenant's own words + cosine kNN with numpy.

The file's tables are described in index_schema.py. Every search statement is built by
``_select``, which always adds the store and scope filter (index_filter.py); nothing else reads
``docs`` for search. Both halves score one tenant's documents in memory and keep only rows the
filter lets through: the keyword half a term index with the tenant's own BM25 statistics
(index_terms.py: built on first search, kept up to date by this process's writes), the vector half
the tenant's embedding matrix (index_vectors.py: dropped whenever that tenant's docs change); both
are cached per store/app/tenant (index_cache.py). Memories, messages and
summaries share the tables; ``record_type`` tells them apart, and a search asks for memories
unless it names others. See docs/adr/0001-embedded-index.md for why this design and where it
stops scaling.

A tenant past `ann_min_rows` documents gets an HNSW graph (index_ann.py, docs/adr/0002-ann-index.md),
built in the background from its matrix and kept on disk; until it is ready, and whenever it cannot
be trusted, the search is exact. The graph only proposes doc ids: the filter still decides, through
`_select` or, for a filter on scope, status and record type only, the tenant's term index, which holds
those columns of the rows `_select` read for it (`_allowed`).
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ...domain.errors import Conflict, InvalidInput, NotFound
from ...domain.models import Memory, RecordType, validate_store_name
from ...domain.schema import Described
from ...domain.scope import ScopeFilter
from ...ports import Hit, IndexedDoc, IndexQuery, IndexResult, keyword_limit
from ..tenant_binding import TenantBinding
from .compaction import CHECKPOINT_ATTEMPTS, Later, Rewrites, checkpoint
from .database import create_private, full
from .index_cache import TenantCache, TenantKey
from .index_filter import Filter, candidates, named_documents, utc_iso, where
from . import index_ann
from .index_ann import Graph, GraphFiles
from .index_schema import INSERT, INSERT_VECTOR, SCHEMA_VERSION, open_schema
from .index_terms import TermIndex, query_terms
from .index_vectors import Vectors, unit_vector

log = logging.getLogger("memlane")

__all__ = ["EmbeddedIndex", "TenantEmbeddedIndex"]

_CHUNK = 500  # ids per IN (...) list, well under SQLite's bound-parameter limit
_CHECK_COLUMNS = "d.id, d.memory_id, d.record_type, d.agent_id, d.run_id"
# What a term index reads of a row: its words, and the facts a search's filter checks (index_terms.Facts).
_TEXT_COLUMNS = "d.id, d.text, d.keywords, d.memory_id, d.record_type, d.agent_id, d.run_id, d.status"
# Each half checks about MARGIN × k / (the share of its candidates the tenant's last filter let through)
# of its best rows first, 4× more while short of k, and past WIDEST × k reads the rows the filter allows instead.
MARGIN = 1.2
WIDEST = 16
_RECORD_TYPES = {str(t): t for t in RecordType}
SHARES_KEPT = 100_000  # tenants whose last share the index remembers


class EmbeddedIndex:
    """The `Index` port over one SQLite file. Thread-safe: one connection behind one lock."""

    @classmethod
    def open(cls, path: str | Path, **options: Any) -> "EmbeddedIndex":
        """The index at `path`; a file SQLite cannot read ("file is not a database") is removed and a new one is
        opened: derived data, rebuilt from the table. Not kept aside: it would hold what is deleted later, where no
        deletion reaches (a deletion trial found an erased tenant's text in one)."""
        try:
            return cls(path, **options)
        except sqlite3.DatabaseError as unreadable:
            path = Path(path)
            size = path.stat().st_size
            for file in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
                file.unlink(missing_ok=True)
            log.warning("%s cannot be read (%s; %d bytes): removed, and a new index is built from the table", path,
                        unreadable, size)
            create_private(path)
            return cls(path, **options)

    def __init__(self, path: str | Path, *, ann: bool = True, ann_min_rows: int = index_ann.MIN_ROWS,
                 ann_background: bool = True):
        self._lock = threading.RLock()
        self._path = str(path)
        self._truncation = Later(lambda: self._truncate_log(attempts=1), Path(self._path).name)
        self._rewrites = Rewrites(self._vacuum, lambda attempts: self._truncate_log(attempts), Path(self._path).name)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # the index is derived data: rebuildable
        self._db.execute("PRAGMA busy_timeout=5000")
        # Up to 64 MiB of pages kept in the process (SQLite's default is 2 MiB, filled only as pages are read): a
        # large tenant's search reads FTS5 segments and docs rows well past 2 MiB (docs/benchmarks.md §2).
        self._db.execute("PRAGMA cache_size=-65536")
        # Deleted rows are overwritten with zeros, not left in free space (erasure leaves nothing).
        self._db.execute("PRAGMA secure_delete=ON")
        open_schema(self._db, path)
        self._cache: TenantCache[Vectors] = TenantCache()
        self._terms: TenantCache[TermIndex] = TenantCache()
        self._data_version = self._read_data_version()
        # ANN graphs of large tenants: in memory once loaded or built; `_behind` may miss newer rows,
        # `_no_graph` has no trusted file (both reset when another process writes the file).
        self._ann = ann and index_ann.available()
        self._ann_min_rows = ann_min_rows
        self._ann_background = ann_background
        self._files = GraphFiles(path)
        self._graphs: dict[TenantKey, Graph] = {}
        self._saved: dict[TenantKey, int] = {}  # high-water id of each graph's file
        self._behind: set[TenantKey] = set()
        self._no_graph: set[TenantKey] = set()
        self._building: set[TenantKey] = set()
        # Of a tenant's vector candidates, the share its last filter let through (this search's, once its
        # vector half has run: the keyword half reads it too).
        self._shares: dict[TenantKey, float] = {}
        # Term indexes are built outside the lock (`_prepare`), each on a connection of its own, and kept only
        # if no write reached the tenant meanwhile: its count of writes, and an epoch for what reaches every tenant.
        self._writes: dict[TenantKey, int] = {}
        self._epoch = 0

    def close(self) -> None:
        with self._lock:
            for key in list(self._graphs):  # a graph ahead of its file is saved, so reopening skips the catch-up
                if self._graphs[key].high_water != self._saved.get(key):
                    self._save_graph(key)
            self._db.close()

    # -- schema (services/schema.py) -----------------------------------------------------------
    def describe(self) -> Described:
        with self._lock:
            found = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        return Described(Path(self._path).name, SCHEMA_VERSION, found)

    def create_missing(self) -> list[str]:
        return []  # opening the file made (or migrated) it

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
            # Every graph of the store: loaded, being built, or only on disk (not searched since the start).
            graphs = {tuple(r) for r in self._db.execute(
                "SELECT store, app_id, tenant_id FROM ann_graphs WHERE store = ?", (store,))}
            graphs |= {k for k in (*self._graphs, *self._building) if k[0] == store}
            with self._write():
                self._db.execute("DELETE FROM docs WHERE store = ?", (store,))
                self._db.execute("DELETE FROM stores WHERE store = ?", (store,))
                self._db.execute("DELETE FROM ann_graphs WHERE store = ?", (store,))
            self._cache.evict_store(store)
            self._terms.evict_store(store)
            self._epoch += 1
            self._shares = {key: share for key, share in self._shares.items() if key[0] != store}
            for key in graphs:
                self._forget_graph(key)
                self._files.remove_except(key, None)

    # -- writes --------------------------------------------------------------------------------
    def upsert(self, store: str, docs: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        """Replace each doc by (tenant, memory_id): a document is its tenant's, whatever id another tenant's
        holds. All validated before anything is written."""
        with self._lock:
            dim = self._dim(store)
            if dim is None:
                raise NotFound(f"no index for store '{store}' (ensure_store first)", code="store_not_found")
            # A batch naming the same memory twice keeps the last version, as sequential upserts would.
            latest = {(m.scope.app_id, m.scope.tenant_id, m.memory_id):
                      (m, unit_vector(v, dim, f"embedding of {m.memory_id}")) for m, v in docs}
            tenants: dict[tuple[str, str], list[str]] = {}
            for app_id, tenant_id, memory_id in latest:
                tenants.setdefault((app_id, tenant_id), []).append(memory_id)
            with self._write():
                removed: dict[TenantKey, list[int]] = {}
                for tenant, ids in tenants.items():
                    removed.update(self._remove(store, ids, tenant))
                self._db.executemany(INSERT, [_row(store, m) for m, _ in latest.values()])
                self._db.executemany(INSERT_VECTOR, ((v.tobytes(), store, *key) for key, (_, v) in latest.items()))
            added = {(store, *tenant): ids for tenant, ids in tenants.items()}
            self._changed(removed, added)

    def delete(self, store: str, memory_ids: Sequence[str], *, app_id: str, tenant_id: str) -> None:
        """Delete the tenant's documents of these ids, whatever their record type."""
        with self._lock:
            with self._write():
                removed = self._remove(store, list(memory_ids), (app_id, tenant_id))
            self._changed(removed, {})

    def compact(self, *, rewrite: bool = False) -> None:
        """Leave no deleted text in the files. Freed pages are zeroed (secure_delete), then the WAL, which
        still holds the pages as they were before, is checkpointed into the file and truncated (later, in the
        background, while a reader holds it: compaction.Later); graphs holding deleted vectors are rebuilt
        without them. `rewrite`: the file is written anew first (VACUUM; searches wait for it) — or later, in the
        background, when it was in the last minute or a reader holds the log (compaction.Rewrites)."""
        with self._lock:
            self._drop_tombstoned_graphs()
        if rewrite:
            self._rewrites.ask()
        if not self._truncate_log():
            self._truncation.schedule()

    def _vacuum(self) -> None:
        with self._lock:
            self._db.execute("VACUUM")

    def _truncate_log(self, attempts: int = CHECKPOINT_ATTEMPTS) -> bool:
        with self._lock:
            return not checkpoint(self._db, attempts)

    def documents(self, store: str) -> Iterator[IndexedDoc]:
        """Every document of the store, of every record type, in id order (fsck compares them with the table)."""
        last = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT id, memory_id, app_id, tenant_id, agent_id, run_id, status, text, keywords, record_type "
                    "FROM docs WHERE store = ? AND id > ? ORDER BY id LIMIT 500", (store, last)).fetchall()
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
        f = Filter.of(query)
        terms = query_terms(query.text)  # analysed once: the term index is prepared for them outside the lock
        if k and terms:
            self._prepare((store, query.scope.app_id, query.scope.tenant_id))
        with self._lock:
            dim = self._dim(store)
            if dim is None or k == 0:
                return IndexResult(keyword=[], vector=[])
            qvec = None if query.vector is None else unit_vector(query.vector, dim, "query vector")
            # The vector half first: it loads the tenant's graph or matrix, which tell the keyword half its size.
            vector = [] if qvec is None else self._vector(store, f, qvec, k)
            keyword = self._keyword(store, f, terms, keyword_limit(query, k))
        return IndexResult(keyword=keyword, vector=vector)

    def similarities(self, store: str, scope: ScopeFilter, vector: Sequence[float],
                     ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        with self._lock:
            dim = self._dim(store)
            if dim is None:
                return {}
            qvec = unit_vector(vector, dim, "query vector")
            rows = self._select(store, Filter(scope=scope), "d.memory_id, v.embedding", with_vectors=True,
                                named=list(ids))
        return {mid: float(np.frombuffer(blob, dtype=np.float32) @ qvec) for mid, blob in rows}

    def _keyword(self, store: str, f: Filter, terms: list[int], k: int) -> list[Hit]:
        """BM25's best k of the query's `terms` that the filter lets through, scored by the tenant's term index
        (its own statistics, index_terms.py); the best are checked by `_select` as the vector half's are."""
        if not terms or k <= 0:  # keyword_k 0: the query asks for no keyword hit
            return []
        key = (store, f.scope.app_id, f.scope.tenant_id)
        index = self._term_index(key)
        # Chosen among the best few hundred rows (TermIndex.scores), or among all of them when the filter
        # turns away so many of the best that fewer than k are left.
        hits = self._best_allowed(store, f, key, *index.scores(terms, enough=self._first_want(key, k)), k)
        return hits if hits is not None else self._best_allowed(store, f, key, *index.scores(terms), k) or []

    def _vector(self, store: str, f: Filter, qvec: np.ndarray, k: int) -> list[Hit]:
        """Filtered kNN: through the tenant's graph when it has one, else exactly (its whole matrix scored)."""
        key = (store, f.scope.app_id, f.scope.tenant_id)
        self._check_foreign_writes()
        graph = self._graph(key) if self._ann else None
        if graph is not None:
            return self._ann_vector(store, f, qvec, k, graph)
        vectors = self._vectors(store, f.scope.app_id, f.scope.tenant_id)
        if self._ann and vectors.ids.size >= self._ann_min_rows:
            self._start_build(key, vectors)
        return self._best_allowed(store, f, key, vectors.ids, vectors.matrix @ qvec, False, k) or []

    def _best_allowed(self, store: str, f: Filter, key: TenantKey, ids: np.ndarray, scores: np.ndarray,
                      partial: bool, k: int) -> list[Hit] | None:
        """The best k of a tenant's scored rows (`ids`: docs.id) that the filter lets through, ties by memory id.
        `partial`: rows were left out of `ids`, each scoring below every row in it; None when fewer than k
        of `ids` pass (the rows left out could be the best that do).

        The `want` best are checked by `_select` first: if k of them pass and the k-th outscores every row not
        checked, no other row can be in the top k, so a broad filter checks about k rows instead of reading
        every row it allows. Short of k, `want` grows 4×; past WIDEST × k (a selective filter) the rows the
        filter allows are read once. Either way the rows are chosen by `_select`, and a row another process
        added after `ids` were read is left out, not mis-scored."""
        want = self._first_want(key, k)
        while want < ids.size:
            order = np.argpartition(-scores, want)  # order[want]: the best row not checked
            best = order[:want]
            hits, passed = self._checked(store, f, ids[best], scores[best], k)
            self._learn_share(key, want, passed)
            if len(hits) >= k:
                kth = hits[k - 1].score
                if kth > scores[order[want]]:
                    return hits
                # Rows not checked tie the k-th (equal scores are ordered by memory id): they alone can
                # still enter, so they are checked, not `want` grown for them (BM25 ties often).
                tied = np.flatnonzero(scores == kth)
                tied = tied[~np.isin(tied, best)]
                if tied.size <= WIDEST * k:
                    more = self._checked(store, f, ids[tied], scores[tied], k)[0]
                    return sorted(hits + more, key=lambda h: (-h.score, h.memory_id))[:k]
            if want >= WIDEST * k:  # a selective filter: read the rows it allows once
                keep = np.isin(ids, np.fromiter((r[0] for r in self._select(store, f, "d.id")), dtype=np.int64))
                ids, scores = ids[keep], scores[keep]
                if ids.size > k:  # the best k and every row tied with the k-th
                    keep = scores >= -np.partition(-scores, k - 1)[k - 1]
                    ids, scores = ids[keep], scores[keep]
                break
            want *= 4
        hits = self._checked(store, f, ids, scores, k)[0]
        return None if partial and len(hits) < k else hits

    def _ann_vector(self, store: str, f: Filter, qvec: np.ndarray, k: int, graph: Graph) -> list[Hit]:
        """Filtered kNN through the tenant's graph. The graph's best candidates are checked by `_select`,
        about as many as k needs at the share its filter let through last time (each one asked for widens
        the walk), more while short of k; when WIDEST × k still hold fewer than k (a selective filter),
        the allowed ids are read once and the filter goes inside the graph walk — or, for a small share
        of the tenant, they are scored exactly."""
        key = (store, f.scope.app_id, f.scope.tenant_id)
        want = min(self._first_want(key, k), WIDEST * k)
        while True:
            ids, sims = graph.search(qvec, want)
            hits, passed = self._checked(store, f, ids, sims, k)
            self._learn_share(key, ids.size, passed)
            if len(hits) >= k or want >= graph.size:  # enough, or every node was asked for
                return hits
            if want >= WIDEST * k:
                break
            want = min(4 * want, WIDEST * k)
        allowed = np.fromiter((r[0] for r in self._select(store, f, "d.id")), dtype=np.int64)
        if allowed.size <= max(self._ann_min_rows, index_ann.EXACT_FRACTION * graph.size):
            # Too few for the graph walk to find (ADR 0002): score them exactly, from the graph's own copy.
            allowed = allowed[allowed <= graph.high_water]  # rows after the catch-up: another process's, skipped
            scores = graph.vectors(allowed) @ qvec
            return self._checked(store, f, allowed, scores, k)[0]
        ids, sims = graph.search(qvec, k, allowed=allowed)
        return self._checked(store, f, ids, sims, k)[0]

    def _checked(self, store: str, f: Filter, ids: np.ndarray, sims: np.ndarray, k: int) -> tuple[list[Hit], int]:
        """The best k of these candidates that `_select` lets through (a graph's tombstones never do), ties by
        memory id, and how many it let through."""
        if ids.size == 0:
            return [], 0
        score = dict(zip(ids.tolist(), sims.tolist()))
        rows = self._allowed(store, f, ids)
        if rows is None:
            rows = self._select(store, f, _CHECK_COLUMNS, within=list(score))
        ranked = sorted(rows, key=lambda r: (-score[r[0]], r[1]))[:k]
        return [Hit(mid, float(score[i]), _RECORD_TYPES[kind], agent, run) for i, mid, kind, agent, run in ranked], len(rows)

    def _allowed(self, store: str, f: Filter, ids: np.ndarray) -> list[tuple[Any, ...]] | None:
        """What `_select` would answer for these candidates (`_CHECK_COLUMNS`), read from the tenant's term
        index when it holds what the filter checks: the rows it read through `_select` and has followed
        since. None when it cannot tell (no term index yet, or a filter on other columns)."""
        terms = self._terms.get((store, f.scope.app_id, f.scope.tenant_id)) if f.on_facts else None
        if terms is not None and self._read_data_version() != self._data_version:
            return None  # another process wrote since this search began: the file, as `_select` reads it, decides
        found = None if terms is None else terms.facts(ids)
        if found is None:
            return None
        return [(i, mid, kind, agent, run) for i, (mid, kind, agent, run, status) in found
                if f.admits(kind, agent, run, status)]

    def _first_want(self, key: TenantKey, k: int) -> int:
        """How many of its best rows a half checks first to find k that the filter lets through:
        k over the share of candidates it let through in the tenant's last search, with a margin."""
        return math.ceil(MARGIN * k / self._shares.get(key, 1.0)) + 8

    def _learn_share(self, key: TenantKey, asked: int, passed: int) -> None:
        if asked:
            self._shares.pop(key, None)  # the most recently searched last: the first are dropped past SHARES_KEPT
            self._shares[key] = max(passed / asked, 1 / WIDEST)
            if len(self._shares) > SHARES_KEPT:
                del self._shares[next(iter(self._shares))]

    # -- ANN graphs ----------------------------------------------------------------------------
    def build_graphs(self, store: str) -> int:
        """Build now, in this thread, the graph of every tenant of the store past `ann_min_rows` that
        has none (searches would start them in the background); return how many were built."""
        with self._lock:
            if not self._ann:
                return 0
            tenants = self._db.execute("SELECT app_id, tenant_id FROM docs WHERE store = ? GROUP BY app_id, tenant_id "
                                       "HAVING count(*) >= ?", (store, self._ann_min_rows)).fetchall()
        built = 0
        for app_id, tenant_id in tenants:
            key = (store, app_id, tenant_id)
            with self._lock:
                if self._graph(key) is not None or key in self._building:
                    continue
                self._building.add(key)
                vectors = self._vectors(store, app_id, tenant_id)
            self._install(key, Graph.build(vectors.ids, vectors.matrix))
            built += 1
        return built

    def _graph(self, key: TenantKey) -> Graph | None:
        """The tenant's graph, holding every current row of it, or None (search exactly)."""
        graph = self._graphs.get(key)
        if graph is None:
            if key in self._no_graph:
                return None
            graph = self._load_graph(key)
            if graph is None:
                self._no_graph.add(key)
                return None
        if key in self._behind and not self._catch_up(key, graph):
            return None
        return graph

    def _load_graph(self, key: TenantKey) -> Graph | None:
        row = self._db.execute("SELECT file, high_water, digest FROM ann_graphs "
                               "WHERE store = ? AND app_id = ? AND tenant_id = ?", key).fetchone()
        if row is None:
            return None
        graph = self._files.read(row[0], row[2], int(row[1]))
        if graph is None:  # missing, altered or unreadable: never trusted; the next exact search rebuilds it
            self._db.execute("DELETE FROM ann_graphs WHERE store = ? AND app_id = ? AND tenant_id = ?", key)
            return None
        self._graphs[key], self._saved[key] = graph, graph.high_water
        self._behind.add(key)  # the file may predate later writes (a crash, another process)
        return graph

    def _catch_up(self, key: TenantKey, graph: Graph) -> bool:
        """Add the tenant's rows newer than the graph (ids only grow). False when tombstones pass
        DEAD_FRACTION: the graph is dropped and rebuilt from the next exact search."""
        whole_tenant = Filter(scope=ScopeFilter(app_id=key[1], tenant_id=key[2]))
        rows = self._select(key[0], whole_tenant, "d.id, v.embedding", with_vectors=True, after=graph.high_water)
        if rows:
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            graph.add(np.array([r[0] for r in rows], dtype=np.int64), matrix)
        live = self._select(key[0], whole_tenant, "count(*)")[0][0]
        self._behind.discard(key)
        if graph.size - live > index_ann.DEAD_FRACTION * graph.size or live < self._ann_min_rows // 2:
            self._forget_graph(key)
            return False
        return True

    def _start_build(self, key: TenantKey, vectors: Vectors) -> None:
        """Build the tenant's graph from its matrix (a snapshot: later rows are caught up on install)."""
        if key in self._building:
            return
        self._building.add(key)

        def build() -> None:
            try:
                graph = Graph.build(vectors.ids, vectors.matrix)  # faiss releases the GIL: searches go on
            except BaseException:
                with self._lock:
                    self._building.discard(key)  # the next exact search tries again
                raise
            self._install(key, graph)

        if self._ann_background:
            threading.Thread(target=build, name="memlane-ann-build", daemon=True).start()
        else:
            build()

    def _drop_tombstoned_graphs(self) -> None:
        """A graph keeps the vectors of the rows deleted after it was built (faiss HNSW cannot remove
        them), in memory and in its file; compaction must leave none, so such graphs are dropped
        and rebuilt from the next search."""
        known = {tuple(r[:3]): (int(r[3]), int(r[4])) for r in self._db.execute(
            "SELECT store, app_id, tenant_id, nodes, high_water FROM ann_graphs")}
        known.update({key: (g.size, g.high_water) for key, g in self._graphs.items()})
        for key, (nodes, high_water) in known.items():
            if self._holds_deleted(key, nodes, high_water):
                with self._write():
                    self._db.execute("DELETE FROM ann_graphs WHERE store = ? AND app_id = ? AND tenant_id = ?", key)
                self._forget_graph(key)
                self._files.remove_except(key, None)

    def _holds_deleted(self, key: TenantKey, nodes: int, high_water: int) -> bool:
        """Whether a graph of `nodes` rows up to `high_water` holds a row deleted since (ids only grow)."""
        tenant = Filter(scope=ScopeFilter(app_id=key[1], tenant_id=key[2]))
        live = (self._select(key[0], tenant, "count(*)")[0][0]
                - self._select(key[0], tenant, "count(*)", after=high_water)[0][0])
        return live < nodes

    def _install(self, key: TenantKey, graph: Graph) -> None:
        with self._lock:
            try:
                if key not in self._building:  # the store was dropped meanwhile
                    return
                self._graphs[key] = graph
                self._behind.add(key)
                self._no_graph.discard(key)
                self._cache.evict(key)  # the graph holds the vectors now
                self._save_graph(key)
            finally:
                self._building.discard(key)

    def _save_graph(self, key: TenantKey) -> None:
        """Write the graph's file, then the row that makes it trusted (caller holds the lock)."""
        graph = self._graphs[key]
        if key in self._behind and not self._catch_up(key, graph):
            return
        if self._holds_deleted(key, graph.size, graph.high_water):
            # Built from a snapshot older than a deletion whose compaction found no graph to drop: its file would
            # keep the deleted vectors. Dropped; the next exact search builds it again.
            self._forget_graph(key)
            return
        name, digest = self._files.write(key, graph)
        with self._write():
            self._db.execute(
                "INSERT INTO ann_graphs (store, app_id, tenant_id, file, high_water, digest, nodes) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (store, app_id, tenant_id) DO UPDATE SET "
                "file = excluded.file, high_water = excluded.high_water, digest = excluded.digest, nodes = excluded.nodes",
                (*key, name, graph.high_water, digest, graph.size))
        self._saved[key] = graph.high_water
        self._files.remove_except(key, name)

    def _forget_graph(self, key: TenantKey) -> None:
        self._graphs.pop(key, None)
        self._saved.pop(key, None)
        self._behind.discard(key)
        self._no_graph.discard(key)
        self._building.discard(key)

    # -- the one query builder ------------------------------------------------------------------
    def _select(self, store: str, f: Filter, columns: str, *, within: list[int] | None = None,
                named: list[str] | None = None, with_vectors: bool = False,
                after: int | None = None, db: sqlite3.Connection | None = None) -> list[tuple[Any, ...]]:
        """Read `docs` (alias d) under the store + scope filter and the query's filters, in id order.

        The only code that reads docs for search: the scope conditions are not optional here,
        so no caller can forget them. `columns` is a constant chosen by this module. `db`: another
        connection to read on (the term-index builder's), else the index's own.
        """
        clauses, params = where(store, f)
        if after is not None:
            clauses.append("d.id > ?")
            params.append(after)
        source = "docs AS d"
        if within is not None or named is not None:
            # Candidates first, each looked up by id (CROSS JOIN fixes the order): through the
            # scope index instead SQLite would read every row of the tenant to check a few.
            source, values = candidates(within) if within is not None else named_documents(named or [])
            params[:0] = values
        join = "JOIN vectors AS v ON v.doc_id = d.id" if with_vectors else ""
        sql = f"SELECT {columns} FROM {source} {join} WHERE {' AND '.join(clauses)} ORDER BY d.id"
        return (db or self._db).execute(sql, params).fetchall()

    # -- vector cache --------------------------------------------------------------------------
    def _vectors(self, store: str, app_id: str, tenant_id: str) -> Vectors:
        self._check_foreign_writes()
        key = (store, app_id, tenant_id)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        # Every document of the tenant, whatever its type: the filter chooses among them per search.
        whole_tenant = Filter(scope=ScopeFilter(app_id=app_id, tenant_id=tenant_id))
        rows = self._select(store, whole_tenant, "d.id, v.embedding", with_vectors=True)
        dim = self._dim(store) or 0
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        vectors = Vectors(np.array([r[0] for r in rows], dtype=np.int64), matrix)
        self._cache.put(key, vectors)
        return vectors

    def _read_data_version(self) -> int:
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _check_foreign_writes(self) -> None:
        # data_version changes when *another* connection commits to the file (e.g. `memlane
        # reindex` in a second process); our own writes evict precisely instead.
        version = self._read_data_version()
        if version != self._data_version:
            self._cache.clear()
            self._terms.clear()
            self._epoch += 1
            self._behind |= set(self._graphs)  # its rows reach the graphs before their next search
            self._no_graph.clear()  # it may have saved a graph
            self._data_version = version

    # -- internals -----------------------------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException as error:
            if self._db.in_transaction:  # SQLite ends it by itself on a full disk
                self._db.execute("ROLLBACK")
            raise full(error) or error

    def _dim(self, store: str) -> int | None:
        row = self._db.execute("SELECT dim FROM stores WHERE store = ?", (store,)).fetchone()
        return None if row is None else int(row[0])

    def _remove(self, store: str, memory_ids: list[str], tenant: tuple[str, str]) -> dict[TenantKey, list[int]]:
        """Delete the tenant's docs of these ids; return the docs.ids removed, by (store, app, tenant)."""
        removed: list[int] = []
        for i in range(0, len(memory_ids), _CHUNK):
            chunk = memory_ids[i:i + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            removed += [doc_id for (doc_id,) in self._db.execute(
                f"DELETE FROM docs WHERE store = ? AND app_id = ? AND tenant_id = ? AND memory_id IN ({marks}) "
                "RETURNING id", [store, *tenant, *chunk])]
        return {(store, *tenant): removed} if removed else {}

    def _changed(self, removed: dict[TenantKey, list[int]], added: dict[TenantKey, list[str]]) -> None:
        """After a committed write: the tenants' matrices are dropped, their graphs catch up before their next
        search (removed rows are tombstones there), and their term indexes take the change in."""
        for key in removed.keys() | added.keys():
            self._writes[key] = self._writes.get(key, 0) + 1
            self._cache.evict(key)
            self._behind.add(key)
            terms = self._terms.get(key)
            if terms is None:
                continue
            try:
                terms.remove(removed.get(key, []))
                if added.get(key):
                    scope = Filter(scope=ScopeFilter(app_id=key[1], tenant_id=key[2]))
                    terms.add(self._select(key[0], scope, _TEXT_COLUMNS, named=added[key]))
            except BaseException:
                self._terms.evict(key)  # rebuilt from the table at its next search
                raise
            self._terms.put(key, terms)  # again: its size changed

    def _prepare(self, key: TenantKey) -> None:
        """Build the tenant's term index, if it has none, without holding the index lock: a large tenant's first
        keyword search (≈ 0.8 s at 10⁵ documents) would hold up every other search and write. The index is kept
        only if no write reached the tenant while it was read; else `_term_index` builds it under the lock."""
        with self._lock:
            self._check_foreign_writes()
            if self._terms.get(key) is not None:
                return
            seen = (self._epoch, self._writes.get(key, 0))
        reader = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            reader.execute("PRAGMA busy_timeout=5000")
            terms = self._read_terms(key, reader)
        finally:
            reader.close()
        with self._lock:
            self._check_foreign_writes()
            if (self._epoch, self._writes.get(key, 0)) == seen and self._terms.get(key) is None:
                self._terms.put(key, terms)

    def _term_index(self, key: TenantKey) -> TermIndex:
        self._check_foreign_writes()
        terms = self._terms.get(key)
        if terms is None:
            terms = self._read_terms(key)
            self._terms.put(key, terms)
        return terms

    def _read_terms(self, key: TenantKey, db: sqlite3.Connection | None = None) -> TermIndex:
        """A tenant's term index, from its rows as `_select` reads them (on `db`, else the index's connection)."""
        whole_tenant = Filter(scope=ScopeFilter(app_id=key[1], tenant_id=key[2]))
        return TermIndex(self._select(key[0], whole_tenant, _TEXT_COLUMNS, db=db))


def _row(store: str, m: Memory) -> tuple[Any, ...]:
    created = utc_iso(m.created_at)
    event = None if m.event_time is None else utc_iso(m.event_time)
    return (
        store, m.memory_id, m.scope.app_id, m.scope.tenant_id, m.scope.agent_id, m.scope.run_id,
        str(m.memory_type), str(m.status), created, event, event or created,
        json.dumps(m.metadata, default=str), m.importance, m.text, m.keywords, str(m.record_type),
    )


class TenantEmbeddedIndex:
    """An `EmbeddedIndex` bound to one tenant (`Index.for_tenant`): calls naming another store or
    tenant are refused."""

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

    def delete(self, store: str, memory_ids: Sequence[str], *, app_id: str, tenant_id: str) -> None:
        self.binding.check(store, app_id, tenant_id)
        self._index.delete(store, memory_ids, app_id=app_id, tenant_id=tenant_id)

    def search(self, store: str, query: IndexQuery) -> IndexResult:
        self.binding.check(store, query.scope.app_id, query.scope.tenant_id)
        return self._index.search(store, query)

    def similarities(self, store: str, scope: ScopeFilter, vector: Sequence[float],
                     ids: Sequence[str]) -> dict[str, float]:
        self.binding.check(store, scope.app_id, scope.tenant_id)
        return self._index.similarities(store, scope, vector, ids)

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> TenantEmbeddedIndex:
        return self._index.for_tenant(store, app_id, tenant_id)
