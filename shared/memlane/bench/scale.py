"""Scale benchmark: ingest throughput, search latency as a tenant and the number of tenants grow,
and write-to-searchable latency — each search figure beside a brute-force baseline run in the
same process on the same data, reported as a ratio (memlane / brute force; below 1 is faster).

What is real and what is synthetic:

- The code paths are the real ones: ``ingest.add`` → the durable queue → extract (rule
  extractor, consolidation) → index for ingest; ``services.search.search`` (embed, hybrid index
  query, fusion, rerank, table reads) for search; the embedded index or OpenSearch behind it.
- The embedder is a seeded random unit vector per text (384 dims, "random-unit-384"): MiniLM
  would dominate every timing here (~100 texts/s batched on 2 cores, ~5-10 ms per query), so it
  is measured once on its own and reported beside the rest instead.
- Memory texts are synthetic sentences over a Zipf-distributed vocabulary (its most frequent
  ranks are real English function words), so keyword postings have a realistic skew; queries are
  3-5 content words (none of the 100 most frequent) drawn from one stored text each.
- Large tenants are bulk-loaded (table transactions of 25, index upserts of 500) rather than
  extracted one add at a time; ingest throughput is measured separately on the service path.

Brute force: the same texts and vectors held in Python lists / one numpy matrix; a query scans
every text of the tenant for each query word (substring test), scores every vector (one matmul),
and fuses the two top-100 lists with RRF. It is what an index must beat.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from . import metrics
from .common import Progress, machine, table

STORE = "scale"
APP = "bench"
DIM = 384


class RandomEmbedder:
    """A seeded random unit vector per text: as fast as an embedder can be, and deterministic."""

    name = "random-unit-384"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out.tolist()


# The most frequent ranks are real English function words, so the index's stop-word handling
# applies to them as it would to real text.
FUNCTION_WORDS = ("the and to a of i in it is that my was for you with on but so have be at this "
                  "just we as are not me all they he had about she from what an or his her by if").split()
COMMON = 100  # queries take no word of the 100 most frequent ranks: real queries are content words


class Corpus:
    """Synthetic memory texts: Zipf-distributed words (function words first, then pseudo-words),
    8-24 per sentence, deterministic."""

    def __init__(self, seed: int = 7, vocabulary: int = 20_000):
        rng = np.random.default_rng(seed)
        consonants, vowels = list("bcdfghklmnprstvz"), list("aeiou")
        words: set[str] = set()
        while len(words) < vocabulary - len(FUNCTION_WORDS):
            n = int(rng.integers(2, 5))
            words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n)))
        self.words = FUNCTION_WORDS + sorted(words)
        self.common = set(self.words[:COMMON])
        self.rng = rng
        ranks = np.arange(1, vocabulary + 1, dtype=np.float64)
        self.p = (1 / ranks ** 1.07) / (1 / ranks ** 1.07).sum()

    def texts(self, n: int) -> list[str]:
        lengths = self.rng.integers(8, 25, size=n)
        picks = self.rng.choice(len(self.words), size=int(lengths.sum()), p=self.p)
        out, at = [], 0
        for length in lengths:
            out.append("Ann " + " ".join(self.words[i] for i in picks[at:at + length]))
            at += length
        return out

    def queries(self, texts: Sequence[str], n: int) -> list[str]:
        """3-5 distinct content words taken from one stored text each."""
        out: list[str] = []
        while len(out) < n:
            words = sorted({w for w in texts[int(self.rng.integers(0, len(texts)))].split()[1:]
                            if w not in self.common})
            if len(words) >= 2:
                k = min(len(words), int(self.rng.integers(3, 6)))
                out.append(" ".join(self.rng.choice(words, size=k, replace=False)))
        return out


class BruteForce:
    """A tenant's texts and vectors held naively; every query scans all of them."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.blocks: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray) -> None:
        self.ids.extend(ids)
        self.texts.extend(t.lower() for t in texts)
        self.blocks.append(vectors)
        self._matrix = None

    def search(self, query: str, vector: np.ndarray, k: int = 10, candidates: int = 100) -> list[str]:
        if self._matrix is None:
            self._matrix = np.vstack(self.blocks)
        terms = [t for t in query.lower().split() if t]
        kw = [(sum(1 for t in terms if t in text), i) for i, text in enumerate(self.texts)]
        kw = sorted((x for x in kw if x[0] > 0), reverse=True)[:candidates]
        scores = self._matrix @ vector
        top = np.argpartition(-scores, min(candidates, scores.size - 1))[:candidates]
        fused: dict[int, float] = {}
        for ranked in ([i for _, i in kw], sorted(top.tolist(), key=lambda i: -scores[i])):
            for rank, i in enumerate(ranked, start=1):
                fused[i] = fused.get(i, 0.0) + 1.0 / (60 + rank)
        return [self.ids[i] for i in sorted(fused, key=lambda i: -fused[i])[:k]]


@dataclass
class Bench:
    deps: Any
    service: Any
    backend: str


def build(backend: str, data_dir: Path, embedder: Any) -> Bench:
    from ..bootstrap import build_local
    from ..config import Settings
    from ..services import stores

    # The index's own settings are honoured (MEMLANE_ANN, MEMLANE_ANN_MIN_ROWS); the rest is the bench's.
    wanted = ("MEMLANE_OPENSEARCH_URL", "AWS_REGION") if backend == "opensearch" else ("MEMLANE_ANN", "MEMLANE_ANN_MIN_ROWS")
    env = {k: v for k, v in os.environ.items() if k in wanted}
    settings = Settings.from_env(env=env, data_dir=data_dir, index=backend, table="sqlite", reranker="auto")
    service = build_local(settings, embedder=embedder)
    try:
        stores.create(service.deps, name=STORE)
    except Exception:  # noqa: BLE001 — a leftover store from an earlier run on OpenSearch: start clean
        stores.delete(service.deps, STORE)
        stores.create(service.deps, name=STORE)
    return Bench(service.deps, service, backend)


def bulk_load(b: Bench, tenant: str, texts: Sequence[str], vectors: np.ndarray, start: int,
              progress: Progress | None = None) -> list[str]:
    """Write memories straight to the table (the truth) and the index, in batches, each with the reading the
    service's writes keep (policies/conflicts.py)."""
    from ..domain.models import Memory
    from ..domain.scope import Scope
    from ..policies.conflicts import reading

    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    scope = Scope(app_id=APP, tenant_id=tenant, run_id="r1")
    ids = []
    batch: list[tuple[Memory, list[float]]] = []

    def flush() -> None:
        for i in range(0, len(batch), 25):
            b.deps.repo.transact([b.deps.repo.memory_put(STORE, m) for m, _ in batch[i:i + 25]])
        b.deps.index.upsert(STORE, batch)
        if progress:
            progress.update(len(batch))
        batch.clear()

    for j, (text, vec) in enumerate(zip(texts, vectors)):
        mid = f"m{start + j:09d}"
        ids.append(mid)
        when = now + timedelta(seconds=start + j)
        batch.append((Memory(memory_id=mid, scope=scope, text=text, created_at=when, updated_at=when,
                             keywords="Ann", reading=reading(text)), vec.tolist()))
        if len(batch) >= 500:
            flush()
    if batch:
        flush()
    return ids


def time_searches(b: Bench, tenant: str, queries: Sequence[str], top_k: int = 10) -> list[float]:
    return time_searches_with(b, tenant, queries, None, top_k)[0]


def time_searches_with(b: Bench, tenant: str, queries: Sequence[str], model: Any,
                       top_k: int = 10) -> tuple[list[float], list[float]]:
    """Each query's search (ms), and — with `model` — the same plus the model embedding that query
    first, as a service with that model pays it (the search itself keeps the bench's embedder: the
    index does the same work whatever the vector's values)."""
    from ..services.search import search

    before, with_model = [], []
    for q in queries:
        t0 = time.perf_counter()
        if model is not None:
            model.embed([q])
        t1 = time.perf_counter()
        search(b.deps, STORE, query=q, scope={"app_id": APP, "tenant_id": tenant}, top_k=top_k)
        t2 = time.perf_counter()
        before.append((t2 - t1) * 1000)
        with_model.append((t2 - t0) * 1000)
    return before, with_model


def time_brute(brute: BruteForce, embedder: RandomEmbedder, queries: Sequence[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        vec = np.asarray(embedder.embed([q])[0], dtype=np.float32)  # the same embedding cost as memlane pays
        brute.search(q, vec)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def ingest_throughput(data_dir: Path, messages: int, per_add: int = 20) -> dict[str, Any]:
    """The service path end to end, on a fresh tenant: add → queue → extract → index."""
    from ..services import ingest

    embedder = RandomEmbedder()
    b = build("embedded", data_dir, embedder)
    corpus = Corpus(seed=11)
    texts = corpus.texts(messages)
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    t0 = time.perf_counter()
    for i in range(0, messages, per_add):
        msgs = [{"role": "user", "name": "Ann", "content": f"I {t.split(' ', 1)[1]}.",
                 "created_at": base + timedelta(minutes=i + j)} for j, t in enumerate(texts[i:i + per_add])]
        ingest.add(b.deps, STORE, scope={"app_id": APP, "tenant_id": "ingest", "run_id": f"r{i // 200}"},
                   messages=msgs)
    accepted = time.perf_counter() - t0
    t1 = time.perf_counter()
    b.service.drain(timeout=3600)
    extracted = time.perf_counter() - t1
    memories = b.deps.index.count(STORE) if hasattr(b.deps.index, "count") else 0
    b.service.close()
    return {"messages": messages, "messages_per_add": per_add, "accept_s": round(accepted, 2),
            "messages_per_s": round(messages / accepted, 1), "extract_index_s": round(extracted, 2),
            "memories": memories, "memories_per_s": round(memories / extracted, 1) if extracted else 0.0}


def write_to_searchable(data_dir: Path, samples: int) -> dict[str, Any]:
    """From add() returning to the memory being found by search, with the worker thread running."""
    from ..services import ingest
    from ..services.search import search

    b = build("embedded", data_dir, RandomEmbedder())
    corpus = Corpus(seed=13)
    # A tenant that already holds some memories, so consolidation has neighbours to compare with.
    bulk_load(b, "live", corpus.texts(1000), np.asarray(RandomEmbedder().embed(corpus.texts(1000))), 0)
    b.service.start_worker()
    lat = []
    try:
        for i in range(samples):
            marker = f"zqx{i}marker"
            t0 = time.perf_counter()
            ingest.add(b.deps, STORE, scope={"app_id": APP, "tenant_id": "live", "run_id": "r1"},
                       messages=[{"role": "user", "name": "Ann", "content": f"I keep the {marker} in the red box."}])
            deadline = t0 + 30
            while time.perf_counter() < deadline:
                hits = search(b.deps, STORE, query=marker, scope={"app_id": APP, "tenant_id": "live"}, top_k=1)
                if hits and marker in hits[0].memory.text:
                    break
                time.sleep(0.002)
            lat.append((time.perf_counter() - t0) * 1000)
    finally:
        b.service.close()
    return {"samples": samples, **metrics.p50_p95(lat), "note": "local worker thread; poll every 2 ms"}


def minilm_reference() -> dict[str, Any] | None:
    from .common import minilm

    try:
        model = minilm()
    except SystemExit:
        return None
    texts = Corpus(seed=17).texts(256)
    model.embed(["warm up"])
    t0 = time.perf_counter()
    model.embed(texts)
    batch = time.perf_counter() - t0
    t1 = time.perf_counter()
    for t in texts[:50]:
        model.embed([t[:60]])
    single = (time.perf_counter() - t1) / 50
    return {"model": model.name, "batched_texts_per_s": round(len(texts) / batch, 1),
            "one_query_ms": round(single * 1000, 2)}


def tenant_size_series(backend: str, data_dir: Path, sizes: Sequence[int], queries: int,
                       progress: Progress) -> list[dict[str, Any]]:
    embedder = RandomEmbedder()
    b = build(backend, data_dir, embedder)
    corpus = Corpus()
    brute = BruteForce()
    rows, loaded, all_texts = [], 0, []
    try:
        for size in sizes:
            texts = corpus.texts(size - loaded)
            vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
            progress.update(0, f"{backend}: load to {size:,}")
            t0 = time.perf_counter()
            ids = bulk_load(b, "big", texts, vectors, loaded, progress)
            load_s = time.perf_counter() - t0
            graphs_s = None
            if hasattr(b.deps.index, "build_graphs"):
                # A tenant past ann_min_rows is searched exactly until its graph is built in the background;
                # time the search it gets once built (what a user has after the first minutes), the build apart.
                progress.update(0, f"{backend}: graphs at {size:,}")
                t0 = time.perf_counter()
                graphs_s = round(time.perf_counter() - t0, 1) if b.deps.index.build_graphs(STORE) else None
            brute.add(ids, texts, vectors)
            all_texts.extend(texts)
            loaded = size
            qs = corpus.queries(all_texts, queries)
            progress.update(0, f"{backend}: search at {size:,}")
            time_searches(b, "big", qs[:5])  # warm the per-tenant vector cache
            ours = metrics.p50_p95(time_searches(b, "big", qs))
            base = metrics.p50_p95(time_brute(brute, embedder, qs))
            rows.append({"memories": size, "memlane_ms": ours, "brute_ms": base,
                         "ratio_p50": round(ours["p50"] / base["p50"], 3) if base["p50"] else None,
                         "ratio_p95": round(ours["p95"] / base["p95"], 3) if base["p95"] else None,
                         "bulk_load_per_s": round(len(texts) / load_s, 1), "graph_build_s": graphs_s})
    finally:
        b.service.close()
    return rows


def tenant_count_series(backend: str, data_dir: Path, counts: Sequence[int], per_tenant: int, queries: int,
                        progress: Progress, query_model: Any = None) -> list[dict[str, Any]]:
    """Search one tenant while the store holds more and more other tenants of the same size; with
    `query_model`, also with that model embedding each query (`memlane_with_embedding_ms`)."""
    embedder = RandomEmbedder()
    b = build(backend, data_dir, embedder)
    corpus = Corpus(seed=5)
    everyone = BruteForce()  # brute force over the whole store, filtering by tenant as it scans
    owner: list[str] = []
    rows, made = [], 0
    target_texts: list[str] = []
    try:
        for count in counts:
            while made < count:
                tenant = f"t{made:05d}"
                texts = corpus.texts(per_tenant)
                vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
                progress.update(0, f"{backend}: tenant {made + 1}/{count}")
                ids = bulk_load(b, tenant, texts, vectors, made * per_tenant, progress)
                everyone.add(ids, texts, vectors)
                owner.extend([tenant] * len(ids))
                if made == 0:
                    target_texts = texts
                made += 1
            qs = corpus.queries(target_texts, queries)
            time_searches(b, "t00000", qs[:5])
            before, with_model = time_searches_with(b, "t00000", qs, query_model)
            ours = metrics.p50_p95(before)
            mask = np.array([o == "t00000" for o in owner])
            base = metrics.p50_p95(_time_filtered_brute(everyone, mask, embedder, qs))
            rows.append({"tenants": count, "memories_in_store": count * per_tenant, "memlane_ms": ours,
                         "brute_ms": base, "ratio_p50": round(ours["p50"] / base["p50"], 3) if base["p50"] else None,
                         "ratio_p95": round(ours["p95"] / base["p95"], 3) if base["p95"] else None,
                         **({"memlane_with_embedding_ms": metrics.p50_p95(with_model)} if query_model is not None else {}),
                         "disk_mb": round(_size_mb(data_dir), 1), **rss_mb()})
    finally:
        b.service.close()
    return rows


def _time_filtered_brute(brute: BruteForce, mask: np.ndarray, embedder: RandomEmbedder,
                         queries: Sequence[str]) -> list[float]:
    """Naive multi-tenant store: scan everything, keep the tenant's rows."""
    out = []
    matrix = np.vstack(brute.blocks)
    for q in queries:
        t0 = time.perf_counter()
        vec = np.asarray(embedder.embed([q])[0], dtype=np.float32)
        terms = q.lower().split()
        kw = sorted(((sum(1 for t in terms if t in text), i) for i, text in enumerate(brute.texts)
                     if mask[i]), reverse=True)[:100]
        scores = np.where(mask, matrix @ vec, -np.inf)
        top = np.argpartition(-scores, min(100, scores.size - 1))[:100]
        fused: dict[int, float] = {}
        for ranked in ([i for c, i in kw if c > 0], sorted(top.tolist(), key=lambda i: -scores[i])):
            for rank, i in enumerate(ranked, start=1):
                fused[i] = fused.get(i, 0.0) + 1.0 / (60 + rank)
        sorted(fused, key=lambda i: -fused[i])[:10]
        out.append((time.perf_counter() - t0) * 1000)
    return out


def blas_kernel() -> str:
    """Which BLAS numpy's matmul runs on, and the kernel OpenBLAS picked: a brute-force figure means
    nothing without it (OPENBLAS_CORETYPE can pin a slower kernel than the CPU's)."""
    import ctypes
    import glob

    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    core = "unknown"
    for lib in glob.glob(str(Path(np.__file__).parent.parent / "numpy.libs" / "*openblas*")):
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            fn = getattr(ctypes.CDLL(lib), name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                core = fn().decode()
                break
    return (f"{blas.get('name')} {blas.get('version')}, kernel {core} "
            f"(OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE') or 'unset'})")


def clustered(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    """Unit vectors around topic centres, the shape sentence embeddings have. I.i.d. random unit
    vectors (RandomEmbedder) are the pathological case for any graph: in 384 dimensions all their
    distances concentrate, so the "true" top 10 are barely nearer than the 100th (ADR 0002)."""
    x = centres[rng.integers(0, len(centres), n)] * 0.35 + rng.standard_normal((n, DIM), dtype=np.float32) * 0.2
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def ann_series(data_dir: Path, sizes: Sequence[int], queries: int, progress: Progress,
               tenants: int = 1, kind: str = "clustered", hybrid_queries: int | None = None) -> list[dict[str, Any]]:
    """The embedded index's vector search with its ANN graph beside the exact scan, on the same
    file (a second connection with `ann=False`), per tenant size: latency of the index call (no
    query embedding), recall@10 of the graph against the exact answer, the graph's build time and
    file size, and a bare numpy scan of the same matrix. `tenants` > 1 fills the store with that
    many tenants of each size and searches the first (sizes are per tenant). Vectors are
    `clustered` (2,000 topics) or i.i.d. `random`; queries are stored vectors of the searched
    tenant plus noise, as real queries land near what was said. The hybrid half (FTS5 over a word
    every document holds: seconds a query at 10⁶) runs on the first `hybrid_queries` only.

    A size loaded from empty is timed by the build the index does anyway; a grown one (caught up,
    not rebuilt) by a fresh build of the same matrix beside it — never both: at 10⁶ one build is
    tens of minutes on this machine."""
    from ..adapters.local.embedded_index import EmbeddedIndex
    from ..adapters.local.index_ann import Graph
    from ..domain.models import Memory
    from ..domain.scope import Scope, ScopeFilter
    from ..ports import IndexQuery

    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "index.db"
    graphs = EmbeddedIndex(path, ann_min_rows=1, ann_background=False)
    exact = EmbeddedIndex(path, ann=False)
    graphs.ensure_store(STORE, DIM)
    rng = np.random.default_rng(23)
    centres = rng.standard_normal((2000, DIM), dtype=np.float32)
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    rows: list[dict[str, Any]] = []
    loaded = 0
    matrix = np.empty((0, DIM), dtype=np.float32)
    try:
        for size in sizes:
            from_empty = loaded == 0
            for t in range(tenants):
                tenant = f"t{t:04d}"
                if kind == "clustered":
                    x = clustered(size - loaded, rng, centres)
                else:
                    x = rng.standard_normal((size - loaded, DIM), dtype=np.float32)
                    x /= np.linalg.norm(x, axis=1, keepdims=True)
                if t == 0:
                    matrix = np.vstack([matrix, x])
                scope = Scope(app_id=APP, tenant_id=tenant, run_id="r1")
                for i in range(0, len(x), 2000):
                    graphs.upsert(STORE, [(Memory(memory_id=f"{tenant}-{loaded + i + j:08d}", scope=scope,
                                                  text="ann", created_at=now, updated_at=now), v.tolist())
                                          for j, v in enumerate(x[i:i + 2000])])
                    progress.update(min(2000, len(x) - i), f"ann: load {tenant} to {size:,}")
            loaded = size
            progress.update(0, f"ann: graphs at {size:,}")
            t0 = time.perf_counter()
            graphs.build_graphs(STORE)  # a new tenant's from scratch, a grown one's caught up
            graphs_s = time.perf_counter() - t0
            qs = matrix[rng.integers(0, len(matrix), queries)] + rng.standard_normal((queries, DIM), dtype=np.float32) * 0.05
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)

            def timed(idx: EmbeddedIndex, text: str, n: int = queries) -> tuple[list[float], list[list[str]]]:
                lat, found = [], []
                for q in qs[:n]:
                    query = IndexQuery(scope=ScopeFilter(app_id=APP, tenant_id="t0000"), text=text,
                                       vector=q.tolist(), k=10)
                    t1 = time.perf_counter()
                    res = idx.search(STORE, query)
                    lat.append((time.perf_counter() - t1) * 1000)
                    found.append([h.memory_id for h in res.vector])
                return lat, found

            progress.update(0, f"ann: search at {size:,}")
            timed(exact, "")  # warm: the exact side reads the tenant's matrix once
            exact_lat, truth = timed(exact, "")
            ann_lat, found = timed(graphs, "")
            n_hybrid = min(hybrid_queries or queries, queries)
            hybrid_exact, _ = timed(exact, "ann memory", n_hybrid)
            hybrid_ann, _ = timed(graphs, "ann memory", n_hybrid)
            numpy_lat = []
            for q in qs:
                t1 = time.perf_counter()
                scores = matrix @ q
                np.argpartition(-scores, 10)[:10]
                numpy_lat.append((time.perf_counter() - t1) * 1000)
            if from_empty:  # every tenant's graph was just built from scratch, each the same size
                build_s = graphs_s / tenants
                graph_mb = _size_mb(Path(f"{path}.ann")) / tenants
            else:
                progress.update(0, f"ann: time a fresh build at {size:,}")
                t0 = time.perf_counter()
                fresh = Graph.build(np.arange(len(matrix), dtype=np.int64), matrix)
                build_s = time.perf_counter() - t0
                graph_mb = len(fresh.to_bytes()) / 2**20
                del fresh
            recall = float(np.mean([len(set(f) & set(t)) / max(len(t), 1) for f, t in zip(found, truth)]))
            rows.append({"memories_per_tenant": size, "tenants": tenants, "recall_at_10": round(recall, 4),
                         "ann_ms": metrics.p50_p95(ann_lat), "exact_ms": metrics.p50_p95(exact_lat),
                         "hybrid_ann_ms": metrics.p50_p95(hybrid_ann), "hybrid_exact_ms": metrics.p50_p95(hybrid_exact),
                         "numpy_scan_ms": metrics.p50_p95(numpy_lat),
                         "ratio_ann_to_exact_p50": round(metrics.p50_p95(ann_lat)["p50"] / metrics.p50_p95(exact_lat)["p50"], 3),
                         "graph_build_s": round(build_s, 1),
                         "graph_mb": round(graph_mb, 1), "queries": queries, "hybrid_queries": n_hybrid,
                         "disk_mb": round(_size_mb(data_dir), 1), **rss_mb()})
    finally:
        graphs.close()
        exact.close()
    return rows


def _size_mb(root: Path) -> float:
    """Bytes on disk under `root` (the index file, its WAL and graph files), in MiB."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 2**20 if root.exists() else 0.0


def rss_mb() -> dict[str, float]:
    """This process's resident memory now and at its peak (Linux: /proc and getrusage, in MiB).
    It holds the bench's own copies too (its matrix, the exact side's cache), so it is an upper bound."""
    import resource

    rss = 0.0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rss_mb": round(rss, 1), "peak_rss_mb": round(max(peak, rss), 1)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [1_000, 10_000, 100_000]
    if args.large and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    counts = [int(c) for c in args.tenants.split(",")]
    backends = ["embedded"]
    if os.environ.get("MEMLANE_OPENSEARCH_URL") and args.backend in ("auto", "opensearch"):
        backends.append("opensearch")
    if args.backend == "embedded":
        backends = ["embedded"]
    elif args.backend == "opensearch":
        backends = ["opensearch"]
    total = sum(max(sizes) + max(counts) * args.per_tenant for _ in backends)
    progress = Progress(total, "starting")
    report: dict[str, Any] = {"embedder": RandomEmbedder.name, "queries_per_point": args.queries,
                              "top_k": 10, "machine": machine(), "blas": blas_kernel(), "backends": {}}
    if args.ann_only:
        backends = []
    query_model = None
    if args.query_model == "minilm" and backends:
        from .common import minilm

        query_model = minilm()
        query_model.embed(["warm up"])
        report["query_model"] = query_model.name
    with tempfile.TemporaryDirectory(prefix="memlane-scale-") as tmp:
        root = Path(tmp)
        try:
            if args.ann_sizes:
                ann_sizes = [int(x) for x in args.ann_sizes.split(",")]
                progress.total = sum(ann_sizes[-1:]) * args.ann_tenants
                report["ann"] = ann_series(root / "ann", ann_sizes, args.queries, progress, args.ann_tenants,
                                           args.ann_vectors, args.hybrid_queries)
                report["ann_vectors"] = args.ann_vectors
            if args.ann_only:
                return _finish(report, started)
            for backend in backends:
                b_sizes, b_counts = sizes, counts
                if backend == "opensearch" and not (args.large or args.sizes):
                    # Bulk loads into OpenSearch run at a few hundred docs/s (each batch waits for a
                    # refresh): keep the default run short; --large or --sizes measure further.
                    b_sizes = [x for x in sizes if x <= 10_000]
                    b_counts = [x for x in counts if x <= 10]
                report["backends"][backend] = {
                    "tenant_size": tenant_size_series(backend, root / f"{backend}-size", b_sizes, args.queries,
                                                      progress),
                    "tenant_count": tenant_count_series(backend, root / f"{backend}-count", b_counts,
                                                        args.per_tenant, args.queries, progress, query_model),
                }
            progress.update(0, "ingest throughput")
            report["ingest"] = ingest_throughput(root / "ingest", args.ingest_messages)
            progress.update(0, "write to searchable")
            report["write_to_searchable_ms"] = write_to_searchable(root / "live", args.samples)
            report["minilm_reference"] = minilm_reference()
        finally:
            progress.close()
    return _finish(report, started)


def _finish(report: dict[str, Any], started: float) -> dict[str, Any]:
    report["machine"]["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    return report


def format_report(r: dict[str, Any]) -> str:
    out = [f"embedder: {r['embedder']} (model cost excluded; see minilm_reference), top_k {r['top_k']}, "
           f"{r['queries_per_point']} queries per point; ratio = memlane / brute force (below 1: faster)",
           f"numpy BLAS: {r['blas']}"]
    if r.get("ann"):
        out += ["", f"[embedded] vector search, ANN graph vs exact scan ({r['ann_vectors']} vectors; index call only, "
                    "no embedding; ms)",
                table(["memories/tenant", "tenants", "recall@10", "ann p50", "p95", "exact p50", "p95",
                       "hybrid ann p50", "p95", "hybrid exact p50", "p95", "numpy p50", "ann/exact", "build s", "graph MB",
                       "disk MB", "RSS MB", "peak RSS MB"],
                      [[f"{x['memories_per_tenant']:,}", x["tenants"], x["recall_at_10"], x["ann_ms"]["p50"],
                        x["ann_ms"]["p95"], x["exact_ms"]["p50"], x["exact_ms"]["p95"], x["hybrid_ann_ms"]["p50"],
                        x["hybrid_ann_ms"]["p95"], x["hybrid_exact_ms"]["p50"], x["hybrid_exact_ms"]["p95"],
                        x["numpy_scan_ms"]["p50"], x["ratio_ann_to_exact_p50"], x["graph_build_s"], x["graph_mb"],
                        x.get("disk_mb"), x.get("rss_mb"), x.get("peak_rss_mb")]
                       for x in r["ann"]])]
    if "ingest" not in r:
        return "\n".join(out)
    for backend, series in r["backends"].items():
        out += ["", f"[{backend}] search latency as one tenant grows",
                table(["memories", "memlane p50", "p95", "brute p50", "p95", "ratio p50", "ratio p95", "load/s",
                       "graph build s"],
                      [[f"{x['memories']:,}", x["memlane_ms"]["p50"], x["memlane_ms"]["p95"], x["brute_ms"]["p50"],
                        x["brute_ms"]["p95"], x["ratio_p50"], x["ratio_p95"], x["bulk_load_per_s"],
                        x.get("graph_build_s")]
                       for x in series["tenant_size"]]),
                "", f"[{backend}] search latency of one tenant as tenants grow"
                    + (f" (with: {r['query_model']} embedding the query first)" if r.get("query_model") else ""),
                table(["tenants", "memories", "memlane p50", "p95", "with embedding p50", "p95", "brute p50", "p95",
                       "ratio p50", "ratio p95", "disk MB", "RSS MB"],
                      [[x["tenants"], f"{x['memories_in_store']:,}", x["memlane_ms"]["p50"], x["memlane_ms"]["p95"],
                        x.get("memlane_with_embedding_ms", {}).get("p50"), x.get("memlane_with_embedding_ms", {}).get("p95"),
                        x["brute_ms"]["p50"], x["brute_ms"]["p95"], x["ratio_p50"], x["ratio_p95"],
                        x.get("disk_mb"), x.get("rss_mb")]
                       for x in series["tenant_count"]])]
    i = r["ingest"]
    out += ["", f"ingest (service path, {i['messages']} messages in adds of {i['messages_per_add']}): "
                f"{i['messages_per_s']} messages/s accepted; {i['memories']} memories extracted + indexed at "
                f"{i['memories_per_s']} memories/s",
            f"write-to-searchable: p50 {r['write_to_searchable_ms']['p50']} ms, "
            f"p95 {r['write_to_searchable_ms']['p95']} ms ({r['write_to_searchable_ms']['samples']} samples)"]
    if r.get("minilm_reference"):
        m = r["minilm_reference"]
        out.append(f"MiniLM on this machine: {m['batched_texts_per_s']} texts/s batched, {m['one_query_ms']} ms per "
                   "query — add it to ingest and search figures for the local model")
    return "\n".join(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", help="tenant sizes to measure, comma-separated (default 1000,10000,100000)")
    p.add_argument("--large", action="store_true", help="also 1,000,000 memories in one tenant (slow)")
    p.add_argument("--tenants", default="1,10,100", help="tenant counts to measure (default 1,10,100)")
    p.add_argument("--per-tenant", type=int, default=1000, help="memories per tenant in the tenant series")
    p.add_argument("--queries", type=int, default=100, help="queries per measured point")
    p.add_argument("--ingest-messages", type=int, default=2000)
    p.add_argument("--samples", type=int, default=30, help="write-to-searchable samples")
    p.add_argument("--backend", choices=["auto", "embedded", "opensearch"], default="auto",
                   help="auto: embedded, plus OpenSearch when MEMLANE_OPENSEARCH_URL is set")
    p.add_argument("--ann-sizes", help="tenant sizes for the ANN-vs-exact series, comma-separated "
                   "(e.g. 1000,3000,10000,30000,100000); the series is skipped without it")
    p.add_argument("--ann-tenants", type=int, default=1, help="tenants of each size in the ANN series")
    p.add_argument("--ann-only", action="store_true", help="run only the ANN-vs-exact series")
    p.add_argument("--ann-vectors", choices=["clustered", "random"], default="clustered",
                   help="the ANN series' vectors: topic clusters (like embeddings) or i.i.d. random (worst case)")
    p.add_argument("--query-model", choices=["none", "minilm"], default="none",
                   help="minilm: the tenant series also times each search with the local model embedding its query")
    p.add_argument("--hybrid-queries", type=int, help="of the ANN series' queries, how many also time the hybrid "
                   "half (default all; at 10⁶ one takes seconds)")
    p.add_argument("--json", dest="json_out", type=Path)


def main(args: argparse.Namespace) -> int:
    report = run(args)
    print(format_report(report))
    print(f"\n{report['elapsed_s']} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0
