"""Recall of the vector half's whole list (k = 100: what fusion takes) through a tenant's ANN graph, against
the exact answer, by how many candidates the walk asks for: the index's rule now (1.2 k / share + 8 = 128 for
an open filter), 200, and the 4 × k = 400 it asked for before. 10⁵ clustered vectors in one tenant (the
scale bench's `clustered`), queries = stored vectors plus noise; latency is the index call alone.

  python bench/vector_list_recall.py [--rows 100000] [--queries 200]
"""
import argparse
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from memlane.adapters.local import embedded_index
from memlane.adapters.local.embedded_index import EmbeddedIndex
from memlane.bench import metrics, scale
from memlane.domain.models import Memory
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery

K = 100
WALKS = {"rule (128)": embedded_index.MARGIN, "200": (200 - 8) / K, "4 × k (400)": (400 - 8) / K}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(23)
    x = scale.clustered(args.rows, rng, rng.standard_normal((2000, scale.DIM), dtype=np.float32))
    qs = x[rng.integers(0, len(x), args.queries)] + rng.standard_normal((args.queries, scale.DIM), dtype=np.float32) * 0.05
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    scope = Scope(app_id="a", tenant_id="t", run_id="r")
    with tempfile.TemporaryDirectory() as tmp:
        idx = EmbeddedIndex(Path(tmp) / "index.db", ann_min_rows=1, ann_background=False)
        idx.ensure_store("s", scale.DIM)
        print(f"loading {args.rows:,} clustered vectors and building their graph ...", flush=True)
        for i in range(0, len(x), 2000):
            idx.upsert("s", [(Memory(memory_id=f"m{i + j:08d}", scope=scope, text="ann", created_at=now,
                                     updated_at=now), v.tolist()) for j, v in enumerate(x[i:i + 2000])])
        idx.build_graphs("s")
        truth = [np.argsort(-(x @ q))[:K] for q in qs]
        try:
            for label, margin in WALKS.items():
                embedded_index.MARGIN = margin
                at10, at100, lat = [], [], []
                for q, exact in zip(qs, truth):
                    t0 = time.perf_counter()
                    hits = idx.search("s", IndexQuery(scope=ScopeFilter(app_id="a", tenant_id="t"), text="",
                                                      vector=q.tolist(), k=K)).vector
                    lat.append((time.perf_counter() - t0) * 1000)
                    got = [int(h.memory_id[1:]) for h in hits]
                    at10.append(len(set(got[:10]) & set(exact[:10].tolist())) / 10)
                    at100.append(len(set(got) & set(exact.tolist())) / K)
                p = metrics.p50_p95(lat)
                print(f"walk {label:>12}: recall@10 {np.mean(at10):.4f}  recall@100 {np.mean(at100):.4f}  "
                      f"index call p50 / p95 {p['p50']:.2f} / {p['p95']:.2f} ms")
        finally:
            idx.close()


if __name__ == "__main__":
    main()
