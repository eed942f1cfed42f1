"""OpenSearch at 10⁵ and 10⁶ memories (issue 17, item 2): a store of 1,000 tenants of Zipf-distributed
sizes, bulk-loaded into a node of its own, then searched as the service searches it.

What is real and what is synthetic:

- Texts: LoCoMo conversation turns (the dev split, /work/shared/data/locomo-dev.json or --locomo),
  one or two turns recombined per memory, so BM25 sees real words and real term frequencies.
- Vectors: the real MiniLM model (all-MiniLM-L6-v2, ONNX) embeds every distinct turn once and every
  query; a memory's vector is the sum of its turns' vectors plus a seeded random direction of norm
  0.75, at unit length (cosine ≈ 0.8 to its turns): the model's geometry for the sample, seeded
  vectors for the rest — 10⁶ texts through the model would take hours on this machine.
- Queries: LoCoMo questions (real text, real model vectors), searched in a small, the median and
  the largest tenant. Latency is the `Index.search` call the service makes for top_k 10 (BM25 and
  filtered k-NN in one `_msearch`: vector k = keyword k = candidates, as services/search.py asks with
  the shipped recipe), without the query
  embedding, and with it (the model embedding the question in the same loop). `--vector-k` measures
  other vector k's beside it (keyword k = min(k, candidates)): what another vector k costs.
- `--vector-plans shipped,walk,exact`: each measured tenant is searched with each vector half side by side
  (taking turns query by query) —
  as shipped (exact up to `queries.EXACT_VECTOR_MAX` documents, else the walk), always walked, always scored
  exactly (a script score over the tenant's filter) — the measurement that sets that threshold.
  `--measure-tenants` names the tenants by size rank (0 the largest; default the smallest, median, largest).
- `--force-merge`: after a size is measured, its index is merged to one segment (timed) and measured
  again — a search walks one HNSW graph per segment.
- Recall@10 of the k-NN half: its top 10 against the exact top 10 of the tenant (numpy matmul over
  the tenant's vectors, float32; BLAS kernel named in the report).
- The load: `OpenSearchIndex.bulk_load` (create-only, routed by tenant, refresh paused, bounded
  in-flight bulk requests with 429 backoff). Documents are not written to a table: the index is
  what is measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .common import minilm, table
from .metrics import p50_p95
from .scale import blas_kernel

STORE = "scale"
APP = "bench"
DIM = 384
TENANTS = 1000
NOISE = 0.75


def zipf_sizes(total: int, tenants: int = TENANTS, s: float = 1.0) -> np.ndarray:
    """Tenant sizes ∝ 1/rank^s summing to `total` (each at least 1): a few huge tenants, a long tail."""
    w = 1.0 / np.arange(1, tenants + 1, dtype=np.float64) ** s
    sizes = np.maximum(1, np.floor(w / w.sum() * total)).astype(np.int64)
    sizes[0] += total - int(sizes.sum())
    return sizes


def locomo(path: Path) -> tuple[list[str], list[str]]:
    """Every turn's text and every question of the LoCoMo file."""
    data = json.loads(path.read_text())
    turns, questions = [], []
    for conv in data:
        c = conv["conversation"]
        for key, session in c.items():
            if re.fullmatch(r"session_\d+", key):
                turns += [t["text"] for t in session if t.get("text")]
        questions += [q["question"] for q in conv["qa"] if q.get("question")]
    return list(dict.fromkeys(turns)), list(dict.fromkeys(questions))


class Data:
    """The deterministic corpus: memory j of tenant t is derived from (seed, t, j) alone, so the load
    can stop at 10⁵ and go on to 10⁶ with the same first documents."""

    def __init__(self, turns: list[str], turn_vectors: np.ndarray, seed: int = 41):
        self.turns, self.tv, self.seed = turns, turn_vectors, seed

    def memory(self, tenant: int, j: int) -> tuple[str, np.ndarray]:
        rng = np.random.default_rng((self.seed, tenant, j))
        picks = rng.integers(0, len(self.turns), 1 + int(rng.random() < 0.5))
        noise = rng.standard_normal(DIM).astype(np.float32)
        v = self.tv[picks].sum(axis=0) + noise / np.linalg.norm(noise) * NOISE * len(picks)
        return " ".join(self.turns[i] for i in picks), (v / np.linalg.norm(v)).astype(np.float32)


def documents(data: Data, start: np.ndarray, stop: np.ndarray, keep: dict[int, list[np.ndarray]]) -> Iterator[Any]:
    """Memories [start[t], stop[t]) of every tenant t, interleaved in rounds as a live store fills;
    the vectors of the tenants in `keep` are collected for the exact answer."""
    from ..domain.models import Memory
    from ..domain.scope import Scope

    base = datetime(2024, 1, 1, tzinfo=UTC)
    scopes = [Scope(app_id=APP, tenant_id=f"t{t:04d}", run_id="r1") for t in range(len(start))]
    step = 50
    lo = start.copy()
    while (lo < stop).any():
        for t in np.nonzero(lo < stop)[0]:
            for j in range(int(lo[t]), int(min(stop[t], lo[t] + step))):
                text, vec = data.memory(int(t), j)
                if t in keep:
                    keep[t].append(vec)
                when = base + timedelta(seconds=j)
                yield Memory(memory_id=f"t{t:04d}-{j:07d}", scope=scopes[t], text=text, created_at=when,
                             updated_at=when), vec.tolist()
            lo[t] = min(stop[t], lo[t] + step)


def _shares(final: np.ndarray, total: int, of: int) -> np.ndarray:
    """Each tenant's part of a store of `total` memories on its way to `final` (the same Zipf shape)."""
    target = np.minimum(final, np.maximum(1, np.floor(final * total / of))).astype(np.int64)
    target[0] += total - int(target.sum())
    return target


def node_figures(client: Any, index: str) -> dict[str, Any]:
    stats = client.indices.stats(index=index, metric="store,docs,segments")["_all"]["primaries"]
    nodes = client.nodes.stats(metric="jvm,process,os")["nodes"]
    node = next(iter(nodes.values()))
    pid = None
    info = client.nodes.info(metric="process")["nodes"]
    pid = next(iter(info.values()))["process"]["id"]
    rss = None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) // 1024
    except OSError:
        pass
    return {"docs": stats["docs"]["count"], "disk_mb": round(stats["store"]["size_in_bytes"] / 2**20, 1),
            "segments": stats["segments"]["count"],
            "heap_used_mb": round(node["jvm"]["mem"]["heap_used_in_bytes"] / 2**20),
            "heap_max_mb": round(node["jvm"]["mem"]["heap_max_in_bytes"] / 2**20),
            "process_rss_mb": rss}


def shipped_k() -> int:
    """The k the service asks of each half with the shipped recipe, whatever the top_k (services/search.py)."""
    from ..policies.ranking import DEFAULT_RECIPE, RECIPES

    return RECIPES[DEFAULT_RECIPE].candidates


# A vector plan → the index's `exact_vector_max`: the tenant sizes it scores exactly.
VECTOR_PLANS = {"shipped": None, "walk": 0, "exact": 10**9}


def plan_index(idx: Any, plan: str) -> Any:
    """The index with this vector plan: a copy sharing its client, its tenant counts its own."""
    from ..adapters.opensearch.index import EXACT_VECTOR_MAX, OpenSearchIndex

    limit = VECTOR_PLANS[plan]
    return OpenSearchIndex(idx.client, index_prefix=idx.prefix, knn_engine=idx.knn_engine, shards=idx.shards,
                           replicas=idx.replicas, exact_vector_max=EXACT_VECTOR_MAX if limit is None else limit)


def measure_tenant(idx: Any, tenant: int, vectors: np.ndarray, questions: list[str], qvecs: np.ndarray,
                   model: Any, k: int, keyword_k: int, plans: tuple[str, ...] = ("shipped",)) -> list[dict[str, Any]]:
    """One row per vector plan. The plans take turns query by query, each going first as often as the
    others, so that what the node has cached by then favours none of them."""
    from ..domain.scope import ScopeFilter
    from ..ports import IndexQuery

    scope = ScopeFilter(app_id=APP, tenant_id=f"t{tenant:04d}")
    ids = [f"t{tenant:04d}-{j:07d}" for j in range(len(vectors))]

    def q(text: str, vec: Any) -> Any:
        return IndexQuery(scope=scope, text=text, vector=vec, k=k, keyword_k=keyword_k)

    indexes = {plan: plan_index(idx, plan) for plan in plans}
    for text, vec in zip(questions[:10], qvecs[:10]):  # warm: the first searches page the graph in (and count)
        for index in indexes.values():
            index.search(STORE, q(text, vec.tolist()))
    bare: dict[str, list[float]] = {p: [] for p in plans}
    embedded: dict[str, list[float]] = {p: [] for p in plans}
    recall: dict[str, list[float]] = {p: [] for p in plans}
    foreign = dict.fromkeys(plans, 0)
    short = dict.fromkeys(plans, 0)
    for i, (text, vec) in enumerate(zip(questions, qvecs)):
        top = {ids[j] for j in np.argsort(-(vectors @ vec), kind="stable")[:10]}
        for plan in plans[i % len(plans):] + plans[:i % len(plans)]:
            index = indexes[plan]
            t0 = time.perf_counter()
            index.search(STORE, q(text, vec.tolist()))
            bare[plan].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            index.search(STORE, q(text, model.embed([text])[0]))
            embedded[plan].append((time.perf_counter() - t0) * 1000)
            hits = index.search(STORE, q("", vec.tolist())).vector
            # The filter is inside the k-NN clause: every hit is the tenant's, and k come back when it has k.
            foreign[plan] += sum(1 for h in hits if not h.memory_id.startswith(f"t{tenant:04d}-"))
            short[plan] += len(hits) < min(k, len(ids))
            recall[plan].append(len({h.memory_id for h in hits[:10]} & top) / max(1, min(10, len(ids))))
    return [{"tenant": f"t{tenant:04d}", "memories": len(vectors), "k": k, "keyword_k": keyword_k, "plan": plan,
             "search_ms": p50_p95(bare[plan]), "with_embedding_ms": p50_p95(embedded[plan]),
             "recall_at_10": round(float(np.mean(recall[plan])), 4), "foreign_hits": foreign[plan],
             "short_answers": short[plan]} for plan in plans]


def measure(idx: Any, alias: str, tenants: tuple[int, ...], keep: dict[int, list[np.ndarray]], questions: list[str],
            qvecs: np.ndarray, model: Any, ks: list[tuple[int, int]],
            plans: tuple[str, ...] = ("shipped",)) -> dict[str, Any]:
    """The node's figures, then each tenant searched at each (vector k, keyword k), the shipped one first, with
    the vector plans side by side."""
    figures = node_figures(idx.client, alias)
    rows = [row for k, kk in ks for t in tenants
            for row in measure_tenant(idx, t, np.vstack(keep[t]), questions, qvecs, model, k, kk, plans)]
    return {**figures, "tenants_measured": rows, "loadavg_1m": round(os.getloadavg()[0], 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ..adapters.opensearch.index import OpenSearchIndex

    started = time.monotonic()
    totals = [int(x) for x in args.sizes.split(",")]
    turns, questions = locomo(Path(args.locomo))
    model = minilm()
    t0 = time.perf_counter()
    cache = Path(args.turn_cache) if args.turn_cache else None
    if cache is not None and cache.exists():  # development aid: the turns' vectors of an earlier run
        turn_vectors = np.load(cache)
    else:
        turn_vectors = np.asarray(model.embed(turns), dtype=np.float32)
        if cache is not None:
            np.save(cache, turn_vectors)
    embed_s = time.perf_counter() - t0
    rng = np.random.default_rng(5)
    questions = [questions[i] for i in rng.choice(len(questions), args.queries, replace=False)]
    qvecs = np.asarray(model.embed(questions), dtype=np.float32)
    data = Data(turns, turn_vectors)

    idx = OpenSearchIndex.from_url(args.url, index_prefix=args.prefix, knn_engine=args.engine,
                                   shards=args.shards, replicas=0)
    alias = f"{args.prefix}-{STORE}"
    final = zipf_sizes(args.final or totals[-1])
    tenants = tuple(args.measure_tenants or (TENANTS - 1, TENANTS // 2, 0))
    plans = tuple(args.vector_plans)
    if not set(plans) <= set(VECTOR_PLANS):
        raise SystemExit(f"--vector-plans: choose from {', '.join(VECTOR_PLANS)}")
    shipped = candidates = shipped_k()
    ks = [(shipped, candidates)] + [(k, min(k, candidates)) for k in args.vector_k if k != shipped]
    keep: dict[int, list[np.ndarray]] = {t: [] for t in tenants}
    loaded = np.zeros(TENANTS, dtype=np.int64)
    if args.resume:  # the index holds the first `resume` memories, loaded by an earlier run with --keep
        loaded = _shares(zipf_sizes(args.resume), args.resume, args.resume)  # as that run shaped it
        for t in keep:
            keep[t] = [data.memory(t, j)[1] for j in range(int(loaded[t]))]
    else:
        idx.drop_store(STORE)
    idx.ensure_store(STORE, DIM)
    report: dict[str, Any] = {"url_node": args.url.split("@")[-1], "shards": args.shards, "replicas": 0,
                              "engine": f"{args.engine} hnsw m 16 ef_construction 128 (memory-index.json)",
                              "in_flight": args.in_flight, "batch_docs": args.batch,
                              "turns": len(turns), "turn_embed_s": round(embed_s, 1),
                              "model": model.name, "queries": args.queries, "blas": blas_kernel(),
                              "shipped_k": shipped, "keyword_k": candidates,
                              "tenants": TENANTS, "points": []}
    for total in totals:
        target = np.maximum(loaded, _shares(final, total, args.final or totals[-1]))
        t0 = time.perf_counter()
        n = idx.bulk_load(STORE, documents(data, loaded, target, keep), in_flight=args.in_flight,
                          batch_docs=args.batch)
        load_s = time.perf_counter() - t0
        loaded = target
        point: dict[str, Any] = {"memories": int(loaded.sum()), "loaded_now": n, "load_s": round(load_s, 1),
                                 "docs_per_s": round(n / load_s, 1) if n else None,
                                 "loadavg_1m_start": round(os.getloadavg()[0], 2)}
        point.update(measure(idx, alias, tenants, keep, questions, qvecs, model, ks, plans))
        if args.force_merge:
            t0 = time.perf_counter()
            idx.client.indices.forcemerge(index=alias, max_num_segments=1, request_timeout=4 * 3600)
            point["force_merge_s"] = round(time.perf_counter() - t0, 1)
            point["merged"] = measure(idx, alias, tenants, keep, questions, qvecs, model, ks, plans)
        report["points"].append(point)
        print(json.dumps(point), flush=True)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    if not args.keep:
        idx.drop_store(STORE)
    idx.close()
    return report


def format_report(r: dict[str, Any]) -> str:
    states = [(p, "loaded", p) for p in r["points"]] + [(p, "merged", p["merged"]) for p in r["points"] if "merged" in p]
    out = [f"OpenSearch {r['shards']} shard, 0 replicas, {r['engine']}; {r['tenants']} tenants (Zipf); "
           f"{r['queries']} LoCoMo questions per tenant; model {r['model']}; exact recall: numpy, {r['blas']}",
           table(["memories", "load s", "docs/s", "force merge s"],
                 [[f"{p['memories']:,}", p["load_s"], p["docs_per_s"], p.get("force_merge_s", "-")] for p in r["points"]]),
           table(["memories", "index", "disk MB", "heap MB", "RSS MB", "segments"],
                 [[f"{p['memories']:,}", state, m["disk_mb"], f"{m['heap_used_mb']}/{m['heap_max_mb']}",
                   m["process_rss_mb"], m["segments"]] for p, state, m in states]),
           table(["memories", "index", "tenant", "its memories", "k", "vector plan", "p50 ms", "p95 ms", "+embed p50",
                  "+embed p95", "recall@10"],
                 [[f"{p['memories']:,}", state, x["tenant"], f"{x['memories']:,}", f"{x['k']}/{x['keyword_k']}",
                   x.get("plan", "shipped"),
                   x["search_ms"]["p50"], x["search_ms"]["p95"], x["with_embedding_ms"]["p50"],
                   x["with_embedding_ms"]["p95"], x["recall_at_10"]]
                  for p, state, m in states for x in m["tenants_measured"]])]
    return "\n".join(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=os.environ.get("MEMLANE_OPENSEARCH_URL"))
    p.add_argument("--sizes", default="100000,1000000", help="store sizes, loaded in turn into one index")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--prefix", default="osscale")
    p.add_argument("--keep", action="store_true", help="leave the index in place")
    p.add_argument("--final", type=int, help="the store size whose Zipf shape the sizes follow (default: the last)")
    p.add_argument("--resume", type=int, help="the index holds this many memories from a run with --keep: go on")
    p.add_argument("--locomo", default="/work/shared/data/locomo-dev.json")
    p.add_argument("--turn-cache", help="a .npy file keeping the turns' vectors between runs")
    p.add_argument("--json", dest="json_out", type=Path)
    p.add_argument("--engine", choices=["lucene", "faiss"], default="lucene",
                   help="the k-NN engine of the index (faiss needs the k-NN plugin's native libraries)")
    p.add_argument("--vector-k", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                   help="vector k's measured beside the shipped one, e.g. 100,50")
    p.add_argument("--vector-plans", type=lambda v: [x for x in v.split(",") if x], default=["shipped"],
                   help=f"vector halves measured side by side per tenant, of: {', '.join(VECTOR_PLANS)}")
    p.add_argument("--measure-tenants", type=lambda v: [int(x) for x in v.split(",") if x], default=None,
                   help="tenants measured, by size rank (0: the largest; default: the smallest, the median, the largest)")
    p.add_argument("--force-merge", action="store_true", help="merge to one segment after each size, measure again")


def main(args: argparse.Namespace) -> int:
    report = run(args)
    print(format_report(report))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m memlane.bench.scale_opensearch")
    add_arguments(_parser)
    raise SystemExit(main(_parser.parse_args()))
