"""Benchmarks that ship with the package, so `memlane bench ...` works from an install.

    memlane bench locomo --data PATH [--json OUT] [--backend embedded|opensearch] [--limit-conversations N]
    memlane bench scale  [--large] [--json OUT]
    memlane bench scale_opensearch --url URL [--sizes 100000,1000000] [--shards 1] [--json OUT]
    memlane bench tokens [--turns 300] [--seed 7] [--budget 1500] [--conversation live|scripted80] [--json OUT] [--png OUT]
    memlane bench soak   --clients N --seconds S [--url URL] [--global-lock] [--json OUT]
    memlane bench updates [--data PATH] [--json OUT] [--failures]
    memlane bench calibrate [--data PATH] [--threshold 0.8] [--json OUT] [--wrong]
    memlane bench context --data PATH [--budgets 500,1000,1500,2000] [--json OUT] [--limit-conversations N]
    memlane bench messages [--adds N] [--per-add 2,20] [--embedder minilm|hashing] [--json OUT]
    memlane bench embed [--data PATH] [--texts 512] [--batches 1,4,8,16,32,64] [--threads 2,1] [--json OUT]
    memlane bench ingest [--data PATH] [--adds 120] [--tenants 8] [--workers 1,2,4] [--json OUT]
    memlane bench report [--doc docs/benchmarks.md] [--results bench/results] [--check]

See docs/benchmarks.md for what each one measures and the latest figures.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from typing import Sequence

SUITES = {"locomo": "LoCoMo retrieval quality: turn-level evidence recall against BM25 / vector / RRF",
          "scale": "ingest throughput and search latency as memories and tenants grow, beside brute force",
          "scale_opensearch": "OpenSearch at 10^5-10^6 memories over 1,000 Zipf tenants (LoCoMo turns, MiniLM): "
                              "bulk-load rate, tenant search latency, k-NN recall@10 vs exact, disk and memory",
          "tokens": "a live 300-turn thread: prompt tokens per turn of the context card (summary refreshing) vs the "
                    "flat full history and the last turns",
          "soak": "mixed add/search/list load from several tenants over HTTP, then every add verified",
          "updates": "knowledge updates: current value first, outdated hidden, non-conflicts kept, tenants apart",
          "calibrate": "the dream's safe_auto confidences on the knowledge updates: reliability table, "
                       "dream-only vs write-time",
          "context": "context cards on LoCoMo: prompt recall and tokens under a budget vs last turns and search top-k",
          "messages": "add latency: the share of an add spent making its messages searchable at once",
          "embed": "the local MiniLM model: int8 vs fp32 graph, texts/s by batch and threads, query latency",
          "ingest": "extraction throughput with the real model vs the model's own, seeded vectors, lag under a "
                    "sustained add rate",
          "report": "regenerate the figure tables of docs/benchmarks.md from bench/results/*.json"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlane bench", description="memlane benchmarks")
    sub = p.add_subparsers(dest="suite", required=True)
    for name, help_text in SUITES.items():
        module = importlib.import_module(f"{__name__}.{name}")
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.ERROR)  # keep the progress line and tables readable
    module = importlib.import_module(f"{__name__}.{args.suite}")
    return int(module.main(args))
