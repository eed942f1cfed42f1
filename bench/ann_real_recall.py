"""Recall@10 of the embedded index's graph (faiss HNSW, the index's M and efConstruction) against exact search, on
REAL MiniLM vectors: `--n` texts, each two LoCoMo turns joined (seeded; two topics a text, a harder mix than one
user's memories), queried with LoCoMo's questions, at several efSearch. The synthetic clustered vectors of
`ann_libraries.py --ef-sweep` are the cheap stand-in; this is the check on what a real model gives.

  python bench/ann_real_recall.py --data ../shared/data/locomo-dev.json --n 100000 --vectors /tmp/locomo-pairs-1e5.npy

Embedding 10⁵ texts takes ~25 min on 2 cores (kept in `--vectors`, the same file `search_profile.py --corpus
locomo` reads).
"""
import argparse
import time
from pathlib import Path

import numpy as np

from memlane.adapters.local import index_ann
from memlane.bench.common import locomo_pairs, minilm, unit_vectors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--vectors", type=Path, required=True)
    ap.add_argument("--ef", default="32,48,64,96,128,256")
    args = ap.parse_args()
    texts, questions = locomo_pairs(args.data, args.n)
    model = minilm()
    x = unit_vectors(model, texts, args.vectors)
    q = np.asarray(model.embed(questions), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    truth = np.argsort(-(q @ x.T), axis=1)[:, :10]  # numpy's exact top 10
    t0 = time.perf_counter()
    graph = index_ann.Graph.build(np.arange(args.n, dtype=np.int64), x)
    print(f"graph of {args.n:,} built in {time.perf_counter() - t0:.0f} s (M {index_ann.M}, "
          f"efConstruction {index_ann.EF_CONSTRUCTION})", flush=True)
    import faiss

    faiss.omp_set_num_threads(1)  # one search thread, as the index searches
    for ef in (int(e) for e in args.ef.split(",")):
        params = faiss.SearchParametersHNSW(efSearch=ef)
        found, ms = [], []
        for v in q:
            t = time.perf_counter()
            found.append(graph.index.search(v[None, :], 10, params=params)[1][0])
            ms.append((time.perf_counter() - t) * 1000)
        recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)])
        print(f"n {args.n:,} ef {ef}: recall@10 {recall:.4f}  p50 {np.percentile(ms, 50):.2f} ms  "
              f"p95 {np.percentile(ms, 95):.2f} ms  ({len(q):,} LoCoMo questions)", flush=True)


if __name__ == "__main__":
    main()
