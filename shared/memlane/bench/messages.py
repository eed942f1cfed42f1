"""The add-latency cost of making messages searchable at once (issue 12, item 6).

Since messages are index documents, an add embeds its messages and writes them to the index after
its table commit. This measures, in one run on the same service, each add end to end and the part
of it that indexes the messages (the same `message_index.index` call, timed on the same batch right
after), so the cost is a ratio of two figures measured side by side, not an absolute time.

    memlane bench messages [--adds N] [--per-add 2,20] [--embedder minilm|hashing] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

STORE = "bench-messages"


def _embedder(name: str) -> Any:
    if name == "hashing":
        from ..adapters.embedders.hashing import HashingEmbedder

        return HashingEmbedder()
    from ..adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

    return MiniLMOnnxEmbedder()


def measure(embedder: Any, adds: int, per_add: int, data_dir: Path) -> dict[str, Any]:
    from ..bootstrap import build_local
    from ..config import Settings
    from ..services import ingest, message_index, stores

    service = build_local(Settings.from_env(env={}, data_dir=data_dir, reranker="none"), embedder=embedder)
    try:
        deps = service.deps
        stores.create(deps, name=STORE)
        base = datetime(2024, 1, 1, tzinfo=timezone.utc)
        total: list[float] = []
        indexing: list[float] = []
        for i in range(adds):
            msgs = [{"role": "user" if j % 2 == 0 else "assistant", "name": "Ann",
                     "content": f"Turn {i}.{j}: I moved to city number {i * per_add + j} and I like its parks.",
                     "created_at": base + timedelta(minutes=i * per_add + j)} for j in range(per_add)]
            scope = {"app_id": "bench", "tenant_id": "t1", "agent_id": "a", "run_id": f"r{i // 50}"}
            t0 = time.perf_counter()
            task = ingest.add(deps, STORE, scope=scope, messages=msgs)
            total.append(time.perf_counter() - t0)
            said = deps.repo.get_messages(STORE, task.scope, task.message_ids)
            t1 = time.perf_counter()
            message_index.index(deps, STORE, said)  # the same work the add did, again (an upsert)
            indexing.append(time.perf_counter() - t1)
    finally:
        service.close()
    p50_total, p50_index = statistics.median(total), statistics.median(indexing)
    return {"per_add": per_add, "adds": adds, "add_p50_ms": round(1000 * p50_total, 2),
            "indexing_p50_ms": round(1000 * p50_index, 2),
            "indexing_share_of_add": round(p50_index / p50_total, 3) if p50_total else None,
            "add_over_add_without_indexing": round(p50_total / max(p50_total - p50_index, 1e-9), 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = _embedder(args.embedder)
    rows = []
    for per_add in (int(n) for n in args.per_add.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(measure(embedder, args.adds, per_add, Path(tmp) / "data"))
    return {"embedder": getattr(embedder, "name", args.embedder), "rows": rows}


def format_report(r: dict[str, Any]) -> str:
    lines = [f"embedder {r['embedder']}; p50 over the adds, worker not running (extraction excluded)",
             f"{'msgs/add':>8} {'add ms':>8} {'index ms':>9} {'share':>6} {'add / add w/o index':>20}"]
    for row in r["rows"]:
        lines.append(f"{row['per_add']:>8} {row['add_p50_ms']:>8} {row['indexing_p50_ms']:>9} "
                     f"{row['indexing_share_of_add']:>6} {row['add_over_add_without_indexing']:>20}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adds", type=int, default=200, help="adds measured per batch size")
    p.add_argument("--per-add", default="2,20", help="messages per add, comma-separated")
    p.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    p.add_argument("--json", dest="json_out", type=Path)


def main(args: argparse.Namespace) -> int:
    report = run(args)
    print(format_report(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0
