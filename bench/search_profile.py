"""Where one search's time goes on the embedded store: one 1,000-memory tenant among 20 (a tenant's search does not
depend on the others: docs/benchmarks.md §2), the scale bench's embedder and corpus; wall and CPU ms per search
(CPU time: what a loaded machine inflates least), then cProfile of 100 searches.

  python bench/search_profile.py
"""
import cProfile
import pstats
import tempfile
import time
from pathlib import Path
import numpy as np
from memlane.bench import scale, metrics
from memlane.services.search import search

with tempfile.TemporaryDirectory() as tmp:
    emb = scale.RandomEmbedder()
    b = scale.build("embedded", Path(tmp), emb)
    corpus = scale.Corpus(seed=5)
    target = None
    for t in range(20):
        texts = corpus.texts(1000)
        scale.bulk_load(b, f"t{t:05d}", texts, np.asarray(emb.embed(texts), dtype=np.float32), t * 1000)
        target = target or texts
    qs = corpus.queries(target, 100)
    scope = {"app_id": scale.APP, "tenant_id": "t00000"}
    for q in qs[:5]:
        search(b.deps, scale.STORE, query=q, scope=scope, top_k=10)
    wall, cpu = [], []
    for q in qs:
        t0, c0 = time.perf_counter(), time.process_time()
        search(b.deps, scale.STORE, query=q, scope=scope, top_k=10)
        wall.append((time.perf_counter() - t0) * 1000); cpu.append((time.process_time() - c0) * 1000)
    print("wall ms p50/p95", round(metrics.percentile(wall, 50), 2), round(metrics.percentile(wall, 95), 2),
          "| CPU ms p50/p95", round(metrics.percentile(cpu, 50), 2), round(metrics.percentile(cpu, 95), 2))
    pr = cProfile.Profile(); pr.enable()
    for q in qs:
        search(b.deps, scale.STORE, query=q, scope=scope, top_k=10)
    pr.disable()
    st = pstats.Stats(pr); st.sort_stats("cumulative"); st.print_stats("memlane", 25)
    st.sort_stats("tottime"); st.print_stats(12)
    b.service.close()
