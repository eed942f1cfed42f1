"""Where one search's time goes on the embedded store: one tenant of `--per-tenant` memories among `--tenants`
(by default one of 1,000 among 20: a tenant's search does not depend on the others, docs/benchmarks.md §2), the
scale bench's embedder and corpus; wall and CPU ms per search (CPU time: what a loaded machine inflates least),
then cProfile of the searches.

The searches run with the garbage collector settled as `memlane serve` settles it (memlane/process.py);
`--default-gc` keeps Python's defaults. `--parts` times each part of a search instead of profiling it (wall
ms p50 / p95 of the index call and its two halves, the table reads, the reranker, `newer_first`, the query
embedding — the scale bench's seeded random vector, not a model's — and the search without it): what
cProfile's overhead and its second pass over the same queries (warm caches) would distort.

`--corpus locomo` searches real data instead of the scale bench's (pseudo-words, i.i.d. random vectors — the
worst case for a graph walk and the best for `newer_first`): one tenant of `--per-tenant` texts, each two
LoCoMo turns joined (seeded), with their MiniLM vectors (embedded once, ~25 min at 10⁵ on 2 cores, kept in
`--vectors`), queried with LoCoMo's questions (their vectors computed before the timing, so the parts'
"query embedding" is a cache read).

  python bench/search_profile.py
  python bench/search_profile.py --tenants 1 --per-tenant 100000 --queries 300 --parts
  python bench/search_profile.py --tenants 1 --per-tenant 100000 --queries 300 --readings
  python bench/search_profile.py --corpus locomo --data ../shared/data/locomo-dev.json --per-tenant 100000 \
      --queries 300 --parts --vectors /tmp/locomo-pairs-1e5.npy
"""
import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np

from memlane import process
from memlane.bench import metrics, scale
from memlane.services.search import search


def timed(deps, query, scope) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    search(deps, scale.STORE, query=query, scope=scope, top_k=10)
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def line(label: str, wall: list[float], cpu: list[float]) -> str:
    p = metrics.percentile
    return (f"{label}: wall ms p50/p95 {p(wall, 50):.2f} / {p(wall, 95):.2f} | "
            f"CPU ms p50/p95 {p(cpu, 50):.2f} / {p(cpu, 95):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tenants", type=int, default=20)
    ap.add_argument("--per-tenant", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--parts", action="store_true", help="wall time of each part of a search, no profile")
    ap.add_argument("--readings", action="store_true",
                    help="each search twice, interleaved: with the readings memories keep, and reading every pair")
    ap.add_argument("--default-gc", action="store_true",
                    help="Python's default garbage collector settings, not the server's (memlane.process.settle)")
    ap.add_argument("--corpus", choices=["scale", "locomo"], default="scale")
    ap.add_argument("--data", type=Path, help="LoCoMo JSON (--corpus locomo)")
    ap.add_argument("--vectors", type=Path, help="where the texts' MiniLM vectors are kept (--corpus locomo)")
    args = ap.parse_args()
    if args.corpus == "locomo":
        return locomo(args)
    with tempfile.TemporaryDirectory() as tmp:
        emb = scale.RandomEmbedder()
        b = scale.build("embedded", Path(tmp), emb)
        if not args.default_gc:
            process.settle()  # as `memlane serve` does once built: the tenant's data is loaded after it
        corpus = scale.Corpus(seed=5)
        target = None
        for t in range(args.tenants):
            texts = corpus.texts(args.per_tenant)
            scale.bulk_load(b, f"t{t:05d}", texts, np.asarray(emb.embed(texts), dtype=np.float32), t * args.per_tenant)
            target = target or texts
        t0 = time.perf_counter()
        built = b.deps.index.build_graphs(scale.STORE)
        print(f"{args.tenants} x {args.per_tenant:,} memories; {built} graph(s) built in {time.perf_counter() - t0:.1f} s")
        qs = corpus.queries(target, args.queries)
        scope = {"app_id": scale.APP, "tenant_id": "t00000"}
        first = timed(b.deps, qs[0], scope)[0]
        print(f"first search (reads the tenant's rows into its term index, loads its vectors): {first:.0f} ms")
        for q in qs[1:5]:
            timed(b.deps, q, scope)
        try:
            if args.readings:
                readings(b, qs, scope)
            else:
                parts(b, qs, scope) if args.parts else report(b, qs, scope)
        finally:
            b.service.close()


class _Known:
    """The model, answering the questions' vectors from what was computed before the timing."""

    def __init__(self, model, known: dict[str, list[float]]):
        self.model, self.known, self.name, self.dim = model, known, model.name, model.dim

    def embed(self, texts):
        return [self.known[t] if t in self.known else self.model.embed([t])[0] for t in texts]


def locomo(args) -> None:
    """One tenant of LoCoMo turn pairs with their MiniLM vectors, searched with LoCoMo's questions."""
    from memlane.bench.common import locomo_pairs, minilm, unit_vectors

    if args.data is None or args.vectors is None:
        raise SystemExit("--corpus locomo needs --data and --vectors")
    texts, questions = locomo_pairs(args.data, args.per_tenant)
    questions = questions[:args.queries]
    model = minilm()
    vectors = unit_vectors(model, texts, args.vectors)
    emb = _Known(model, dict(zip(questions, model.embed(questions))))
    with tempfile.TemporaryDirectory() as tmp:
        b = scale.build("embedded", Path(tmp), emb)
        if not args.default_gc:
            process.settle()
        scale.bulk_load(b, "t00000", texts, vectors, 0)
        t0 = time.perf_counter()
        b.deps.index.build_graphs(scale.STORE)
        print(f"{args.per_tenant:,} LoCoMo turn pairs; graph built in {time.perf_counter() - t0:.1f} s")
        scope = {"app_id": scale.APP, "tenant_id": "t00000"}
        for q in questions[:5]:
            timed(b.deps, q, scope)
        try:
            if args.readings:
                readings(b, questions, scope)
            else:
                parts(b, questions, scope) if args.parts else report(b, questions, scope)
        finally:
            b.service.close()


def parts(b, qs, scope) -> None:
    """Each part's wall time, read by wrapping it for this process only."""
    from memlane.policies import conflicts
    from memlane.services import search as service

    times: dict[str, list[float]] = {}

    def timed_part(owner, name: str, label: str) -> None:
        real = getattr(owner, name)

        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                times.setdefault(label, []).append((time.perf_counter() - t0) * 1000)
        setattr(owner, name, run)

    index = b.deps.index
    for owner, name, label in ((index, "search", "index call"), (index, "_keyword", "keyword half"),
                               (index, "_vector", "vector half"), (service, "_load", "table reads"),
                               (service, "_rerank", "reranker"), (conflicts, "newer_first", "newer_first"),
                               (b.deps.embedder, "embed", "query embedding")):
        timed_part(owner, name, label)
    wall, cpu = zip(*(timed(b.deps, q, scope) for q in qs))
    print(line("search", list(wall), list(cpu)))
    p = metrics.percentile
    # One embedding per search: the target is the search without it (a real model's is ~9 ms, §2).
    bare = [w - e for w, e in zip(wall, times["query embedding"], strict=True)]
    print(f"search without the query embedding: wall ms p50/p95 {p(bare, 50):.2f} / {p(bare, 95):.2f}")
    for label, ms in times.items():
        print(f"  {label}: wall ms p50/p95 {p(ms, 50):.2f} / {p(ms, 95):.2f}")


def readings(b, qs, scope) -> None:
    """Each search with the readings its memories keep (policies/conflicts.py) and as if they kept none, one after the
    other in alternating order (what the host does to one, it does to the other); the statement cache is emptied
    before each, as a search of other memories finds it."""
    from memlane.policies import conflicts, statement

    kept = conflicts.read
    ways = {"with readings": kept, "without": lambda m: conflicts._Read(statement.statement(m.text))}
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in ways}
    for i, q in enumerate(qs):
        for label in (("with readings", "without") if i % 2 else ("without", "with readings")):
            conflicts.read = ways[label]
            statement.statement.cache_clear()
            times[label].append(timed(b.deps, q, scope))
    conflicts.read = kept
    for label, measured in times.items():
        wall, cpu = zip(*measured)
        print(line(f"search {label}", list(wall), list(cpu)))
    p = metrics.percentile
    ratio = [w / o for (w, _), (o, _) in zip(times["with readings"], times["without"])]
    print(f"with / without, per search: p50 {p(ratio, 50):.2f}")


def report(b, qs, scope) -> None:
    wall, cpu = zip(*(timed(b.deps, q, scope) for q in qs))
    print(line("search", list(wall), list(cpu)))
    pr = cProfile.Profile()
    pr.enable()
    for q in qs:
        search(b.deps, scale.STORE, query=q, scope=scope, top_k=10)
    pr.disable()
    st = pstats.Stats(pr)
    st.sort_stats("cumulative")
    st.print_stats("memlane", 25)


if __name__ == "__main__":
    main()
