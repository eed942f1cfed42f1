"""Which ANN library for the embedded index (docs/adr/0002-ann-index.md): faiss-cpu, hnswlib and
usearch side by side on the same vectors, with numpy's exact scan as the baseline and the truth.

Vectors: `--kind clustered` (default) is a mixture of 2,000 Gaussian clusters on the unit sphere,
the shape sentence embeddings have; `--kind random` is i.i.d. unit vectors, the worst case for any
graph (no structure to exploit). Filtered search keeps a subset of `--keep` of the rows (a scope or
type filter): each library applies it *inside* the search (faiss IDSelector, hnswlib filter
predicate); usearch 2.26's Python API has no predicate, so its filtered figure is a post-filter of
an over-fetch (what the ADR rules out) and is shown only for completeness.

  nice -n 5 python bench/ann_libraries.py --n 100000 --queries 200

`--ef-sweep SIZES` measures one thing instead: for each graph size, ONE faiss HNSW graph (the
index's M and efConstruction, 2 build threads) searched at every `--ef` (efSearch set per query,
no rebuild), recall@10 against the exact answer and p50/p95 per query, unfiltered and with the
`--keep` filters inside the walk (`--selectors`: the index's bitmap, and/or faiss's IDSelectorBatch,
which the index used before); the rows go to
`--json`. `--graph-dir` keeps each built graph on disk and reuses it, so a second sweep of 10⁶
does not pay the half-hour build again (docs/benchmarks.md §2, "efSearch by graph size"):

  nice -n 10 python bench/ann_libraries.py --ef-sweep 1000000,100000,300000 --queries 200 \
      --ef 128,192,256,384,512,768 --keep 0.3 --json bench/results/ann-ef-sweep.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from memlane.adapters.local import index_ann


def vectors(n: int, dim: int, kind: str, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        x = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        centres = rng.standard_normal((2000, dim), dtype=np.float32)
        x = centres[rng.integers(0, 2000, n)] * 0.35 + rng.standard_normal((n, dim), dtype=np.float32) * 0.2
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def exact(x: np.ndarray, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[list[np.ndarray], list[float]]:
    out, lat = [], []
    for v in q:
        t0 = time.perf_counter()
        s = x @ v
        if allowed is not None:
            s = np.where(allowed, s, -np.inf)
        top = np.argpartition(-s, k)[:k]
        out.append(top)
        lat.append((time.perf_counter() - t0) * 1000)
    return out, lat


def recall(found: list[np.ndarray], truth: list[np.ndarray], k: int) -> float:
    return float(np.mean([len(set(f[:k].tolist()) & set(t.tolist())) / k for f, t in zip(found, truth)]))


def pct(lat: list[float]) -> str:
    return f"p50 {np.percentile(lat, 50):6.2f} p95 {np.percentile(lat, 95):6.2f}"


def batched_truth(x: np.ndarray, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[np.ndarray]:
    """The exact top k of every query, a matmul of many queries at a time (10⁶ rows: seconds, not minutes)."""
    out: list[np.ndarray] = []
    for i in range(0, len(q), 50):
        s = x @ q[i:i + 50].T
        if allowed is not None:
            s[~allowed] = -np.inf
        out.extend(np.argpartition(-s, k, axis=0)[:k].T)
    return out


def faiss_graph(x: np.ndarray, m: int, ef_construction: int, cache: Path | None) -> tuple[object, float | None]:
    """A faiss HNSW graph of x as the index builds it (2 threads), and its build seconds (None if read from cache)."""
    import faiss

    if cache is not None and cache.exists():
        print(f"  graph read from {cache}", flush=True)
        return faiss.read_index(str(cache)), None
    faiss.omp_set_num_threads(2)
    idx = faiss.IndexHNSWFlat(x.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    idx.hnsw.efConstruction = ef_construction
    t0 = time.perf_counter()
    step = 50_000  # added in steps only to show progress: a build of 10⁶ takes half an hour here
    for i in range(0, len(x), step):
        idx.add(x[i:i + step])
        done = min(i + step, len(x))
        el = time.perf_counter() - t0
        print(f"  build {done:,}/{len(x):,} {el:7.0f} s ({done / el:.0f} vectors/s) load {os.getloadavg()[0]:.1f}",
              flush=True)
    build = time.perf_counter() - t0
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        faiss.write_index(idx, str(cache))
    return idx, build


def ef_sweep(a: argparse.Namespace) -> None:
    """Recall@10 and latency against efSearch on one graph per size (see the module docstring)."""
    import faiss

    k = 10
    efs = [int(e) for e in a.ef.split(",")]
    keeps = [float(v) for v in a.keep.split(",")] if a.keep else []
    selectors = a.selectors.split(",")
    out: dict = {"command": " ".join(sys.argv), "m": a.m, "ef_construction": a.ef_construction, "kind": a.kind,
                 "queries": a.queries, "faiss": faiss.__version__, "load_start": os.getloadavg()[0], "sizes": []}
    for n in [int(v) for v in a.ef_sweep.split(",")]:
        print(f"n {n:,} dim {a.dim} kind {a.kind} M {a.m} efC {a.ef_construction} load {os.getloadavg()[0]:.1f}",
              flush=True)
        x = vectors(n, a.dim, a.kind)
        qi = np.random.default_rng(2).integers(0, n, a.queries)
        q = x[qi] + np.random.default_rng(3).standard_normal((a.queries, a.dim), dtype=np.float32) * 0.05
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        truth = batched_truth(x, q, k)
        masks = {keep: np.random.default_rng(4).random(n) < keep for keep in keeps}
        ftruths = {keep: batched_truth(x, q, k, allowed) for keep, allowed in masks.items()}
        cache = Path(a.graph_dir) / f"hnsw-{a.kind}-{n}-M{a.m}-efc{a.ef_construction}.faiss" if a.graph_dir else None
        idx, build = faiss_graph(x, a.m, a.ef_construction, cache)
        del x
        faiss.omp_set_num_threads(1)  # one query is one walk, as in the index
        size: dict = {"n": n, "build_s": build, "rows": []}
        for ef in efs:
            for keep, selector in [(None, None), *((keep, sel) for keep in keeps for sel in selectors)]:
                sel_ids = np.flatnonzero(masks[keep]).astype(np.int64) if keep is not None else None
                found, lat = [], []
                for v in q:
                    t1 = time.perf_counter()
                    params = faiss.SearchParametersHNSW(efSearch=ef)
                    if sel_ids is not None:  # built per query, as the index does
                        if selector == "bitmap":
                            bits = index_ann.id_bitmap(sel_ids)
                            params.sel = faiss.IDSelectorBitmap(bits.size, faiss.swig_ptr(bits))
                        else:
                            params.sel = faiss.IDSelectorBatch(sel_ids)
                    _, ids = idx.search(v[None, :], k, params=params)
                    lat.append((time.perf_counter() - t1) * 1000)
                    found.append(ids[0])
                r = recall(found, ftruths[keep] if keep is not None else truth, k)
                short = sum(1 for f in found if (f >= 0).sum() < k)
                row = {"ef": ef, "keep": keep, "selector": selector, "recall_at_10": round(r, 4),
                       "p50_ms": round(float(np.percentile(lat, 50)), 3),
                       "p95_ms": round(float(np.percentile(lat, 95)), 3), "short_of_k": short,
                       "load": round(os.getloadavg()[0], 1)}
                size["rows"].append(row)
                label = "all" if keep is None else f"{keep:.2f} {selector}"
                print(f"  n {n:>9,} ef {ef:4d} {label:>4s}  {pct(lat)} recall@10 {r:.4f} short of k {short}",
                      flush=True)
        out["sizes"].append(size)
        out["load_end"] = os.getloadavg()[0]
        if a.json:  # after every size, so a long run keeps what it has measured
            Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
        del idx


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--kind", choices=["clustered", "random"], default="clustered")
    p.add_argument("--keep", default="0.02", help="fractions a filtered search allows, comma-separated")
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=128)
    p.add_argument("--ef", default="64,128,256")
    p.add_argument("--libs", default="faiss,hnswlib,usearch")
    p.add_argument("--search-threads", type=int, default=1, help="faiss OpenMP threads while searching")
    p.add_argument("--ef-sweep", metavar="SIZES", help="faiss only: recall and latency against --ef per graph size")
    p.add_argument("--graph-dir", help="with --ef-sweep: keep built graphs here and reuse them")
    p.add_argument("--json", help="with --ef-sweep: write the rows here")
    p.add_argument("--selectors", default="bitmap", help="with --ef-sweep and --keep: how the filter reaches the walk, "
                   "comma-separated: bitmap (the index's: index_ann.id_bitmap), batch (faiss IDSelectorBatch)")
    a = p.parse_args()
    if a.ef_sweep:
        ef_sweep(a)
        return
    k = 10
    import numpy as _np
    blas = _np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    print(f"n {a.n} dim {a.dim} kind {a.kind} keep {a.keep} M {a.m} efC {a.ef_construction}; numpy BLAS "
          f"{blas['name']} {blas.get('version')} OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}; "
          f"load {os.getloadavg()[0]:.1f}")
    x = vectors(a.n, a.dim, a.kind)
    qi = np.random.default_rng(2).integers(0, a.n, a.queries)
    q = x[qi] + np.random.default_rng(3).standard_normal((a.queries, a.dim), dtype=np.float32) * 0.05
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    keeps = [float(v) for v in a.keep.split(",")]
    truth, lat = exact(x, q, k)
    print(f"exact numpy            {pct(lat)}")
    masks = {keep: np.random.default_rng(4).random(a.n) < keep for keep in keeps}
    ftruths = {}
    for keep, allowed in masks.items():
        ftruths[keep], lat = exact(x, q, k, allowed)
        print(f"exact numpy filtered {keep:.2f}  {pct(lat)}")
    efs = [int(e) for e in a.ef.split(",")]
    for lib in a.libs.split(","):
        t0 = time.perf_counter()
        if lib == "faiss":
            import faiss
            faiss.omp_set_num_threads(1)
            idx = faiss.IndexHNSWFlat(a.dim, a.m, faiss.METRIC_INNER_PRODUCT)
            idx.hnsw.efConstruction = a.ef_construction
            faiss.omp_set_num_threads(2)
            idx.add(x)
            faiss.omp_set_num_threads(a.search_threads)
        elif lib == "hnswlib":
            import hnswlib
            idx = hnswlib.Index(space="ip", dim=a.dim)
            idx.init_index(max_elements=a.n, M=a.m, ef_construction=a.ef_construction)
            idx.add_items(x, np.arange(a.n), num_threads=2)
        else:
            from usearch.index import Index
            idx = Index(ndim=a.dim, metric="ip", dtype="f32", connectivity=a.m, expansion_add=a.ef_construction)
            idx.add(np.arange(a.n), x, threads=2)
        build = time.perf_counter() - t0
        print(f"{lib:8s} build {build:6.1f} s")
        for ef in efs:
            found, lat = [], []
            for v in q:
                t1 = time.perf_counter()
                if lib == "faiss":
                    params = faiss.SearchParametersHNSW(efSearch=ef)
                    _, ids = idx.search(v[None, :], k, params=params)
                    ids = ids[0]
                elif lib == "hnswlib":
                    idx.set_ef(ef)
                    ids, _ = idx.knn_query(v, k=k, num_threads=1)
                    ids = ids[0]
                else:
                    idx.expansion_search = ef
                    ids = idx.search(v, k, threads=1).keys
                lat.append((time.perf_counter() - t1) * 1000)
                found.append(np.asarray(ids))
            print(f"{lib:8s} ef {ef:4d}  {pct(lat)} recall@10 {recall(found, truth, k):.4f}")
            for keep, allowed in masks.items():
                allowed_ids = np.flatnonzero(allowed).astype(np.int64)
                ffound, flat = [], []
                for v in q:
                    t1 = time.perf_counter()
                    if lib == "faiss":
                        sel = faiss.IDSelectorBatch(allowed_ids)
                        _, ids = idx.search(v[None, :], k, params=faiss.SearchParametersHNSW(efSearch=ef, sel=sel))
                        ids = ids[0]
                    elif lib == "hnswlib":
                        ids, _ = idx.knn_query(v, k=k, num_threads=1, filter=lambda i: bool(allowed[i]))
                        ids = ids[0]
                    else:  # post-filter of an over-fetch: no predicate in the Python API
                        got = idx.search(v, int(k / keep) * 2, threads=1).keys
                        ids = got[allowed[got]][:k]
                    flat.append((time.perf_counter() - t1) * 1000)
                    ffound.append(np.asarray(ids))
                short = sum(1 for f in ffound if len(f[f >= 0]) < k)
                print(f"{lib:8s} ef {ef:4d}  filtered {keep:.2f} {pct(flat)} recall@10 "
                      f"{recall(ffound, ftruths[keep], k):.4f} short of k {short}/{len(q)}")
        del idx


if __name__ == "__main__":
    main()
