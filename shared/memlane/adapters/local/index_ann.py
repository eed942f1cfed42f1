"""Approximate nearest neighbours for large tenants of the embedded index: one HNSW graph (faiss)
per (store, app, tenant), on disk beside the SQLite file, derived from it and never trusted over it.

The table of docs and vectors stays the truth; a graph is a hint about which doc ids are near a
query. Three rules keep it from answering wrong (docs/adr/0002-ann-index.md):

- **Every candidate is checked in SQL** by the caller (`EmbeddedIndex._select`): a deleted or
  replaced doc left in the graph (a tombstone: faiss HNSW cannot remove) never comes back.
- **Ids only grow** (docs.id is AUTOINCREMENT), so a graph built up to `high_water` misses exactly
  the rows with a larger id; they are added from the table before the graph is used.
- **A file is trusted only if SQLite says so**: the `ann_graphs` row of the tenant names the file,
  its high-water id and its digest, written after the file is durably in place. A missing, corrupt
  or foreign file (another database's, an older copy) is ignored, and the tenant is searched
  exactly until a new graph is built.

faiss-cpu is optional (the `local` extra): without it `available()` is false and every search is exact.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .index_cache import TenantKey

M = 16                 # graph degree: recall 0.98+ at 10⁵ with ef 128 (ADR 0002)
EF_CONSTRUCTION = 128
# efSearch by the graph's size, (up to rows, ef): a larger graph packs more near-identical neighbours
# round a query, and a short walk stops before it has met its true top k (recall@10 0.89 at 10⁶ with
# ef 128). Each ef gave recall@10 ≥ 0.98 with margin at its step's largest size, measured on one graph
# per size (docs/benchmarks.md §2, "efSearch by graph size"); past 10⁶, one more doubling, not measured.
EF_SEARCH_BY_ROWS = ((100_000, 128), (500_000, 256), (1_000_000, 512))
EF_SEARCH_PAST = 1024
MIN_ROWS = 20_000      # tenants smaller than this are searched exactly: faster there (ADR 0002)
DEAD_FRACTION = 0.25   # rebuild a graph once this share of its nodes are tombstones
EXACT_FRACTION = 0.3  # a filter allowing less of the tenant than this is scored exactly: faiss filtered recall 0.97 at 20 %, 0.82 at 10 % (ADR 0002)



def ef_search(rows: int, k: int) -> int:
    """The walk's candidate list for a graph of `rows` nodes asked for k: never shorter than k."""
    return max(next((ef for up_to, ef in EF_SEARCH_BY_ROWS if rows <= up_to), EF_SEARCH_PAST), k)


def id_bitmap(ids: np.ndarray) -> np.ndarray:
    """The doc ids a walk may return, as faiss's IDSelectorBitmap reads them (bit i of byte i // 8, low bit
    first; ids past the end are not members). Built in ~1 ms for 3×10⁵ ids, where an IDSelectorBatch (a hash
    set and a Bloom filter) took ~67 ms — most of a filtered search at 10⁶ rows."""
    ids = np.asarray(ids, dtype=np.int64)
    if not ids.size:
        return np.empty(0, dtype=np.uint8)
    member = np.zeros(int(ids.max()) + 1, dtype=bool)
    member[ids] = True
    return np.packbits(member, bitorder="little")


def available() -> bool:
    try:
        import faiss
    except ImportError:
        return False
    return True


@dataclass
class Graph:
    """One tenant's HNSW graph over (docs.id, unit vector); `high_water` is the largest id it holds."""

    index: Any  # faiss.IndexIDMap2(IndexHNSWFlat), inner product = cosine on unit vectors
    high_water: int

    @classmethod
    def build(cls, ids: np.ndarray, matrix: np.ndarray) -> Graph:
        import faiss

        faiss.omp_set_num_threads(os.cpu_count() or 1)
        hnsw = faiss.IndexHNSWFlat(matrix.shape[1], M, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = EF_CONSTRUCTION
        graph = cls(faiss.IndexIDMap2(hnsw), 0)
        graph.add(ids, matrix)
        return graph

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    def add(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        if ids.size:
            self.index.add_with_ids(np.ascontiguousarray(matrix, dtype=np.float32), ids.astype(np.int64))
            self.high_water = max(self.high_water, int(ids.max()))

    def search(self, qvec: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The k nearest doc ids and their cosine; with `allowed` (doc ids), only those are visited
        as results — the filter runs inside the graph walk, so a selective one still gets k."""
        import faiss

        # One query is one graph walk: OpenMP workers would only compete with the server's other threads.
        faiss.omp_set_num_threads(1)
        k = min(k, self.size)
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        params = faiss.SearchParametersHNSW(efSearch=ef_search(self.size, k))
        if allowed is not None:
            bits = id_bitmap(allowed)
            if not bits.size:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            # `bits` is the selector's memory: it lives until this search returns
            params.sel = faiss.IDSelectorBitmap(bits.size, faiss.swig_ptr(bits))
        scores, ids = self.index.search(qvec[None, :].astype(np.float32), k, params=params)
        keep = ids[0] >= 0
        return ids[0][keep], scores[0][keep]

    def vectors(self, ids: np.ndarray) -> np.ndarray:
        """The stored vectors of `ids` (all in the graph): a selective filter scores them exactly."""
        if ids.size == 0:
            return np.empty((0, self.index.d), dtype=np.float32)
        return self.index.reconstruct_batch(np.ascontiguousarray(ids, dtype=np.int64))

    def to_bytes(self) -> bytes:
        import faiss

        return faiss.serialize_index(self.index).tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, high_water: int) -> Graph:
        import faiss

        return cls(faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8)), high_water)


class GraphFiles:
    """Graph files in `<index file>.ann/`, each recorded in the `ann_graphs` table of the index file.

    A file is written whole under a new name, fsynced and renamed into place before its row is
    committed, so a crash at any point leaves either the old (row, file) pair or the new one; a
    file without a row is garbage, removed on the next save of that tenant.
    """

    def __init__(self, db_path: str | Path):
        self.dir = Path(f"{db_path}.ann")
        self._lock = threading.Lock()

    def name(self, key: TenantKey, high_water: int) -> str:
        tenant = hashlib.blake2b("\x1f".join(key).encode(), digest_size=12).hexdigest()
        return f"{tenant}-{high_water}.faiss"

    def write(self, key: TenantKey, graph: Graph) -> tuple[str, str]:
        """Write the graph durably; return (file name, digest) for its `ann_graphs` row."""
        data = graph.to_bytes()
        name = self.name(key, graph.high_water)
        with self._lock:
            self.dir.mkdir(mode=0o700, exist_ok=True)
            tmp = self.dir / f".{name}.tmp"
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:  # private, as index.db
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.dir / name)
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)  # the rename itself survives a power cut
            finally:
                os.close(fd)
        return name, hashlib.blake2b(data, digest_size=16).hexdigest()

    def read(self, name: str, digest: str, high_water: int) -> Graph | None:
        """The graph of a recorded file, or None when the file is missing, altered or unreadable."""
        try:
            data = (self.dir / name).read_bytes()
        except OSError:
            return None
        if hashlib.blake2b(data, digest_size=16).hexdigest() != digest:
            return None
        try:
            graph = Graph.from_bytes(data, high_water)
        except Exception:  # noqa: BLE001 — faiss raises RuntimeError on a truncated or foreign file
            return None
        return graph

    def remove_except(self, key: TenantKey, keep: str | None) -> None:
        prefix = self.name(key, 0).rsplit("-", 1)[0]
        if not self.dir.is_dir():
            return
        for path in self.dir.glob(f"{prefix}-*.faiss"):
            if path.name != keep:
                path.unlink(missing_ok=True)
