"""Do the two indexes rank alike? The same LoCoMo memories in the embedded index and in OpenSearch,
the same `IndexQuery` per question, each signal's list compared (docs/benchmarks.md, "Backend parity").

    set -a; . ENGINES.env; set +a   # MEMLANE_OPENSEARCH_URL
    PYTHONPATH=shared .venv/bin/python bench/backend_parity.py --data locomo-dev.json --conversations 2

The memories are extracted once (embedded, as `memlane bench locomo` does) and copied with the same ids
and vectors into an OpenSearch index of a throwaway prefix, deleted at the end. Per signal it prints how
many questions get the same top 10 (as a set and in order) and the mean overlap of the top k; then the
time of each part of an OpenSearch search, beside the embedded index's, as medians in one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from memlane.adapters.opensearch.index import OpenSearchIndex
from memlane.adapters.opensearch.queries import search_lines
from memlane.bench.common import CachedEmbedder, minilm
from memlane.bench.locomo import APP, STORE, Memlane, load
from memlane.domain.scope import ScopeFilter
from memlane.ports import IndexQuery


def compare(a: list[str], b: list[str], n: int) -> tuple[bool, bool, float]:
    top_a, top_b = a[:n], b[:n]
    overlap = len(set(a) & set(b)) / max(1, max(len(a), len(b)))
    return top_a == top_b, set(top_a) == set(top_b), overlap


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, default=Path(os.environ.get("MEMLANE_LOCOMO", "locomo-dev.json")))
    p.add_argument("--conversations", type=int, default=2)
    p.add_argument("--k", type=int, default=100, help="candidates per signal (the default recipe's 100; "
                                                      "a search of top_k 100 asks 2,000)")
    p.add_argument("--embed-cache", type=Path, default=Path(tempfile.gettempdir()) / "memlane-parity-embed.sqlite3")
    args = p.parse_args()
    embedder = CachedEmbedder(minilm(), args.embed_cache)
    convs = load(args.data, args.conversations)
    with tempfile.TemporaryDirectory() as tmp:
        local = Memlane(embedder, Path(tmp))
        for conv in convs:
            local.prepare(conv)
        deps = local.deps
        os_index = OpenSearchIndex.from_url(os.environ["MEMLANE_OPENSEARCH_URL"],
                                            index_prefix=f"parity-{uuid.uuid4().hex[:8]}")
        try:
            os_index.ensure_store(STORE, embedder.dim)
            by_tenant: dict[str, list[str]] = {}
            for doc in deps.index.documents(STORE):
                by_tenant.setdefault(doc.tenant_id, []).append(doc.memory_id)
            for tenant, ids in by_tenant.items():
                memories = deps.repo.get_memories(STORE, APP, tenant, ids)
                vectors = embedder.embed([m.text for m in memories])
                os_index.upsert(STORE, list(zip(memories, vectors)))
            report(args.k, convs, deps.index, os_index, embedder)
            breakdown(convs, os_index, embedder)
        finally:
            os_index.drop_store(STORE)
            os_index.close()
            local.close()


def report(k: int, convs: list[Any], local: Any, remote: OpenSearchIndex, embedder: Any) -> None:
    rows: dict[str, list[tuple[bool, bool, float]]] = {"keyword": [], "vector": []}
    times: dict[str, list[float]] = {"embedded": [], "opensearch": [], "msearch": [], "engine": []}
    examples = []
    for conv in convs:
        for q in conv.questions:
            query = IndexQuery(scope=ScopeFilter(app_id=APP, tenant_id=conv.sample_id), text=q.text,
                               vector=embedder.embed([q.text])[0], k=k)
            start = time.perf_counter()
            a = local.search(STORE, query)
            times["embedded"].append(time.perf_counter() - start)
            start = time.perf_counter()
            b = remote.search(STORE, query)
            times["opensearch"].append(time.perf_counter() - start)
            lines, _ = search_lines(remote._address(STORE), STORE, query, k=k, vector=query.vector)
            start = time.perf_counter()
            took = remote.client.msearch(body=lines)["took"]
            times["msearch"].append(time.perf_counter() - start)
            times["engine"].append(took / 1000)
            for signal in rows:
                ids_a = [h.memory_id for h in getattr(a, signal)]
                ids_b = [h.memory_id for h in getattr(b, signal)]
                rows[signal].append(compare(ids_a, ids_b, 10))
                if signal == "keyword" and ids_a[:10] != ids_b[:10] and len(examples) < 3:
                    examples.append((q.text, ids_a[:5], ids_b[:5]))
    n = len(rows["keyword"])
    print(f"{n} questions, k={k}")
    for signal, values in rows.items():
        print(f"  {signal:8s} same top-10 order {sum(v[0] for v in values) / n:.3f}  "
              f"same top-10 set {sum(v[1] for v in values) / n:.3f}  "
              f"mean overlap of top {k} {statistics.mean(v[2] for v in values):.3f}")
    for text, ids_a, ids_b in examples:
        print(f"  e.g. {text!r}\n    embedded   {ids_a}\n    opensearch {ids_b}")
    base = statistics.median(times["embedded"])
    print(f"median search (index only), embedded = 1: " + ", ".join(
        f"{name} {statistics.median(v) / base:.1f}" for name, v in times.items()) +
          f"  (embedded {base * 1000:.1f} ms)")


def breakdown(convs: list[Any], remote: OpenSearchIndex, embedder: Any, n: int = 60) -> None:
    """Where an OpenSearch search's time goes: the engine's own `took` against the round trip, per signal,
    at the k a default search asks (100) and the k a top_k=100 search asks (2,000), and with the hit's
    three fields read from doc values instead of `_source`. Medians over the first n questions."""
    questions = [(c, q) for c in convs for q in c.questions][:n]
    vectors = [embedder.embed([q.text])[0] for _, q in questions]
    start = time.perf_counter()
    embedder.inner.embed([questions[0][1].text + " ?"])  # one uncached query embedding, for scale
    embed_once = time.perf_counter() - start

    def variant(k: int, signals: tuple[str, ...], docvalues: bool) -> tuple[float, float]:
        took, wall = [], []
        for (conv, q), vec in zip(questions, vectors):
            query = IndexQuery(scope=ScopeFilter(app_id=APP, tenant_id=conv.sample_id), text=q.text, vector=vec, k=k)
            lines, names = search_lines(remote._address(STORE), STORE, query, k=k, vector=vec)
            body = []
            for i, name in enumerate(names):
                if name in signals:
                    head, line = lines[2 * i], dict(lines[2 * i + 1])
                    if docvalues:
                        line["_source"] = False
                        line["docvalue_fields"] = ["record_type", "agent_id", "run_id"]
                    body += [head, line]
            start = time.perf_counter()
            took.append(remote.client.msearch(body=body)["took"] / 1000)
            wall.append(time.perf_counter() - start)
        return statistics.median(took), statistics.median(wall)

    print(f"OpenSearch search parts, medians over {len(questions)} questions (ms; one query embedding "
          f"{embed_once * 1000:.1f} ms):")
    print("  k      signals          fields      engine took   round trip")
    for k in (100, 2000):
        for signals in (("keyword",), ("vector",), ("keyword", "vector")):
            for docvalues in (False, True):
                took, wall = variant(k, signals, docvalues)
                print(f"  {k:<6} {'+'.join(signals):16s} {'docvalues' if docvalues else '_source':10s}"
                      f"  {took * 1000:8.1f}     {wall * 1000:8.1f}")


if __name__ == "__main__":
    main()
