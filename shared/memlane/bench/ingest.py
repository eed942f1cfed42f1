"""`memlane bench ingest`: does extraction keep up with the model, and with a sustained add rate?

One run, side by side:
- the model's own batched throughput (texts/s at batch 64 on the memory texts the run extracts);
- the local worker extracting a backlog of adds from several tenants (LoCoMo turns, two per add):
  memories/s extracted with the real model — by worker threads, with the jobs' embed calls shared
  (CoalescingEmbedder, as `memlane serve` runs) and not shared — and with seeded vectors, where the
  model costs nothing and the rest of the pipeline shows;
- extraction lag (accepted → SUCCEEDED) under a sustained add rate set at a fraction of the
  extraction throughput just measured.
Adds are accepted with the worker stopped, so messages/s accepted is the add path alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import machine, table
from .embed import texts_from
from .scale import RandomEmbedder

STORE = "ingest"
APP = "bench"


def _service(data_dir: Path, embedder: Any, workers: int) -> Any:
    from ..bootstrap import build_local
    from ..config import Settings
    from ..services import stores

    settings = Settings.from_env(env={}, data_dir=data_dir, table="sqlite", index="embedded", reranker="none",
                                 worker_threads=workers, queue_limit=0)
    service = build_local(settings, embedder=embedder)
    stores.create(service.deps, name=STORE)
    return service


def _adds(turns: list[str], tenants: int) -> list[tuple[str, list[dict[str, str]]]]:
    return [(f"t{i % tenants}", [{"role": "user", "content": turns[i]}, {"role": "assistant", "content": turns[i + 1]}])
            for i in range(0, len(turns) - 1, 2)]


def _accept(service: Any, adds: list[tuple[str, list[dict[str, str]]]]) -> list[tuple[str, str]]:
    from ..services import ingest
    return [(tenant, ingest.add(service.deps, STORE, messages=messages,
                                scope={"app_id": APP, "tenant_id": tenant, "agent_id": "a", "run_id": "r"}).request_id)
            for tenant, messages in adds]


def _memories(service: Any, accepted: list[tuple[str, str]]) -> tuple[int, list[str], list[float]]:
    """Memories written, their texts, and each task's lag (accepted → finished), seconds."""
    count, texts, lags = 0, [], []
    for tenant, rid in accepted:
        task = service.deps.repo.locate_task(STORE, rid, APP, tenant)
        written = [o for o in task.outcomes if o.action.value != "NOOP"]
        count += len(written)
        texts += [o.text for o in written]
        lags.append((task.updated_at - task.created_at).total_seconds())
    return count, texts, lags


def _wait_drained(service: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while service.queue.pending() and time.monotonic() < deadline:
        time.sleep(0.02)


def backlog(adds: list[tuple[str, list[dict[str, str]]]], embedder: Any, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        service = _service(Path(tmp), embedder, workers)
        try:
            started = time.perf_counter()
            accepted = _accept(service, adds)
            accept_s = time.perf_counter() - started
            started = time.perf_counter()
            service.start_worker()
            _wait_drained(service, timeout=3600)
            extract_s = time.perf_counter() - started
            count, texts, _ = _memories(service, accepted)
        finally:
            service.close()
    return {"adds": len(adds), "messages_per_s_accepted": 2 * len(adds) / accept_s, "memories": count,
            "memories_per_s": count / extract_s, "texts": texts}


def sustained(adds: list[tuple[str, list[dict[str, str]]]], embedder: Any, workers: int, rate: float) -> dict[str, Any]:
    """Adds at `rate` per second while the worker runs: lag of each task, backlog at the end."""
    from ..services import ingest
    with tempfile.TemporaryDirectory() as tmp:
        service = _service(Path(tmp), embedder, workers)
        try:
            service.start_worker()
            accepted = []
            started = time.perf_counter()
            for i, (tenant, messages) in enumerate(adds):
                time.sleep(max(0.0, started + i / rate - time.perf_counter()))
                accepted.append((tenant, ingest.add(service.deps, STORE, messages=messages, scope={
                    "app_id": APP, "tenant_id": tenant, "agent_id": "a", "run_id": "r"}).request_id))
            offered_s = time.perf_counter() - started
            left = service.queue.pending()
            _wait_drained(service, timeout=3600)
            _, _, lags = _memories(service, accepted)
        finally:
            service.close()
    lags.sort()
    return {"rate_adds_per_s": rate, "achieved_adds_per_s": len(adds) / offered_s, "backlog_at_end": left,
            "lag_p50_s": statistics.median(lags), "lag_p95_s": lags[int(0.95 * (len(lags) - 1))]}


def model_throughput(model: Any, texts: list[str]) -> float:
    """The model at its best: every text in one call (sorted by length, run in its own batches)."""
    model.embed(texts[:8])
    started = time.perf_counter()
    model.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ..adapters.embedders.coalescing import CoalescingEmbedder
    from ..adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

    turns = texts_from(args.data, 2 * args.adds, args.seed)
    adds = _adds(turns, args.tenants)
    cache = Path(tempfile.mkdtemp(prefix="memlane-models-"))
    model = MiniLMOnnxEmbedder(precision=args.precision, cache_dir=cache)
    model.embed(["warm up"])
    rows: list[dict[str, Any]] = []
    texts: list[str] = []
    for workers in [int(w) for w in args.workers.split(",")]:
        for shared in (True, False):
            r = backlog(adds, CoalescingEmbedder(model) if shared else model, workers)
            texts = texts or r["texts"]
            rows.append({"embedder": model.name, "workers": workers, "shared_calls": shared,
                         **{k: v for k, v in r.items() if k != "texts"}})
    seeded = backlog(adds, RandomEmbedder(), max(int(w) for w in args.workers.split(",")))
    rows.append({"embedder": "seeded vectors", "workers": max(int(w) for w in args.workers.split(",")),
                 "shared_calls": False, **{k: v for k, v in seeded.items() if k != "texts"}})
    model_rate = model_throughput(model, (texts * 4)[:max(256, len(texts))])
    best = max((r for r in rows if r["embedder"] == model.name), key=lambda r: r["memories_per_s"])
    # An add costs the model its two messages (embedded at once, searchable) and its memories later: the
    # rate the model sustains is texts/s over texts per add; offer 50% and 90% of it.
    per_add = 2 + best["memories"] / best["adds"]
    lag = [sustained(adds, CoalescingEmbedder(model), best["workers"], share * model_rate / per_add)
           for share in (0.5, 0.9)]
    return {"machine": machine(), "precision": model.precision, "source": str(args.data or "seeded sentences"),
            "tenants": args.tenants, "model_texts_per_s": model_rate, "backlog": rows,
            "best_share_of_model": best["memories_per_s"] / model_rate, "sustained": lag}


def render(report: dict[str, Any]) -> str:
    rows = [[r["embedder"], r["workers"], "yes" if r["shared_calls"] else "no", r["adds"],
             r["messages_per_s_accepted"], r["memories"], r["memories_per_s"],
             r["memories_per_s"] / report["model_texts_per_s"]] for r in report["backlog"]]
    lag = [[s["rate_adds_per_s"], s["achieved_adds_per_s"], s["backlog_at_end"], s["lag_p50_s"], s["lag_p95_s"]]
           for s in report["sustained"]]
    return "\n\n".join([
        f"{report['machine'].get('cpu', '?')}, {report['machine']['cpus']} CPUs; {report['tenants']} tenants; "
        f"texts: {report['source']}; the model alone ({report['precision']}, all the memories in one call): "
        f"{report['model_texts_per_s']:.1f} texts/s",
        table(["embedder", "workers", "shared calls", "adds", "messages/s accepted", "memories", "memories/s",
               "share of model"], rows),
        f"best with the model: {report['best_share_of_model']:.2f} of the model's own throughput",
        "sustained add rate (50% and 90% of what the model sustains: its texts/s over 2 messages + the memories "
        "of an add), lag accepted → extracted:",
        table(["adds/s offered", "adds/s achieved", "queued at end", "lag p50 s", "lag p95 s"], lag),
    ])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="LoCoMo JSON: its turns are the messages (default: seeded sentences)")
    p.add_argument("--adds", type=int, default=120, help="adds of two messages each")
    p.add_argument("--tenants", type=int, default=8)
    p.add_argument("--workers", default="1,2,4", help="worker threads to measure")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "int8"])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", type=Path)


def main(args: argparse.Namespace) -> int:
    from .common import minilm
    minilm()
    report = run(args)
    print(render(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0
