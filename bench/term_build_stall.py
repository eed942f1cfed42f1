"""How long one tenant's keyword searches wait while another tenant's term index is built (embedded index).

A tenant's first keyword search in a process builds its term index from its rows: about 0.8 s at 10⁵ documents.
This loads `--big` documents for one tenant and 100 for another, reopens the index (no term index in memory),
warms the small tenant, then times the big tenant's first keyword search while a thread keeps searching the
small tenant: the small tenant's latency during the build (wall ms p50 / max) is what a lock held through the
build costs every other tenant. Run it on two commits to compare (PYTHONPATH names the code measured):

  PYTHONPATH=shared python bench/term_build_stall.py --big 100000
"""
import argparse
import statistics
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from memlane.adapters.local.embedded_index import EmbeddedIndex
from memlane.bench import scale
from memlane.domain.models import Memory
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery

DIM = 16


def load(index: EmbeddedIndex, tenant: str, texts: list[str], rng: np.random.Generator) -> None:
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for start in range(0, len(texts), 2000):
        batch = []
        for j, text in enumerate(texts[start:start + 2000], start):
            v = rng.standard_normal(DIM)
            batch.append((Memory(memory_id=f"{tenant}-{j:07d}", scope=Scope(app_id="a", tenant_id=tenant), text=text,
                                 created_at=now, updated_at=now), (v / np.linalg.norm(v)).tolist()))
        index.upsert("s", batch)


def keyword(index: EmbeddedIndex, tenant: str, words: str) -> float:
    t0 = time.perf_counter()
    index.search("s", IndexQuery(scope=ScopeFilter(app_id="a", tenant_id=tenant), text=words, vector=None, k=10))
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big", type=int, default=100_000)
    args = ap.parse_args()
    rng = np.random.default_rng(5)
    corpus = scale.Corpus(seed=5)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.db"
        index = EmbeddedIndex(path, ann=False)
        index.ensure_store("s", DIM)
        t0 = time.perf_counter()
        big, small = corpus.texts(args.big), corpus.texts(100)
        load(index, "big", big, rng)
        load(index, "small", small, rng)
        index.close()
        print(f"loaded {args.big:,} + 100 documents in {time.perf_counter() - t0:.1f} s")
        index = EmbeddedIndex(path, ann=False)  # a fresh process: no term index in memory
        queries = corpus.queries(small, 200)
        for q in queries[:20]:
            keyword(index, "small", q)  # the small tenant's term index is built and warm
        idle = [keyword(index, "small", q) for q in queries[20:120]]
        during: list[float] = []
        stop = threading.Event()

        def small_searches() -> None:
            i = 0
            while not stop.is_set():
                during.append(keyword(index, "small", queries[i % len(queries)]))
                time.sleep(0.005)
                i += 1

        searcher = threading.Thread(target=small_searches)
        searcher.start()
        time.sleep(0.05)
        first = keyword(index, "big", corpus.queries(big, 1)[0])
        stop.set()
        searcher.join()
        index.close()
    print(f"big tenant's first keyword search (builds its term index): {first:.0f} ms")
    print(f"small tenant, idle: wall ms p50 {statistics.median(idle):.2f} / max {max(idle):.2f}")
    print(f"small tenant, during the build: {len(during)} searches, wall ms p50 {statistics.median(during):.2f} "
          f"/ max {max(during):.2f}")


if __name__ == "__main__":
    main()
