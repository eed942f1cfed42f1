"""Extraction vs ingestion, and what one huge add does to the other tenants (issue 15 #12).

    PYTHONPATH=shared .venv/bin/python bench/worker_fairness.py [--adds 200] [--embedder hashing|minilm]

1. Throughput: N small adds (two messages each) accepted with no worker running, then extracted
   by the pool; adds/s accepted vs tasks/s extracted, side by side in one run.
2. Fairness: tenant A sends one add of ~1.9 MB (96 long messages), then tenants B..K send a small
   add each. How long the small adds wait for their memories, with one worker in FIFO order (the
   old worker) and with the pool (2 workers, tenants taking turns), as a ratio.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.domain.models import TaskStatus
from memlane.services import ingest, stores

WORDS = ("alice bob lisbon piano flight hotel vegetarian passport march monday office wifi sister teaches "
         "lives courier dentist weekend").split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "."


def service(data: Path, embedder: str, workers: int):
    svc = build_local(Settings.from_env(env={}, data_dir=data, embedder=embedder, reranker="none",
                                        worker_threads=workers, queue_limit=0))
    stores.create(svc.deps, name="demo")
    return svc


def throughput(data: Path, embedder: str, adds: int) -> None:
    svc = service(data, embedder, workers=2)
    rng = random.Random(1)
    started = time.perf_counter()
    for n in range(adds):
        ingest.add(svc.deps, "demo", scope={"app_id": "a", "tenant_id": f"t{n % 8}"},
                   messages=[{"role": "user", "content": sentence(rng)}, {"role": "user", "content": sentence(rng)}])
    accepted = time.perf_counter() - started
    started = time.perf_counter()
    svc.start_worker()
    while svc.queue.depth():
        time.sleep(0.02)
    extracted = time.perf_counter() - started
    svc.close()
    print(f"throughput: {adds / accepted:.0f} adds/s accepted, {adds / extracted:.1f} tasks/s extracted "
          f"(2 workers): extraction takes {extracted / accepted:.1f}x as long as ingestion")


def fairness(data: Path, embedder: str, workers: int, fifo: bool) -> float:
    """Mean seconds the small adds of other tenants wait behind one huge add."""
    svc = service(data, embedder, workers)
    rng = random.Random(2)
    huge = [{"role": "user", "content": " ".join(sentence(rng) for _ in range(230))} for _ in range(96)]
    print(f"  huge add: {sum(len(m['content']) for m in huge) / 1e6:.2f} MB")
    ingest.add(svc.deps, "demo", scope={"app_id": "a", "tenant_id": "big"}, messages=huge)
    small = []
    for n in range(10):
        task = ingest.add(svc.deps, "demo", scope={"app_id": "a", "tenant_id": f"small{n}"},
                          messages=[{"role": "user", "content": sentence(rng)}])
        small.append((f"small{n}", task.request_id))
    if fifo:  # the old worker: one queue order for everybody, no tenant groups
        svc.queue.db.conn.execute("UPDATE jobs SET grp = 'all'")
    waits: dict[str, float] = {}
    started = time.perf_counter()
    svc.start_worker()
    while len(waits) < len(small):
        for tenant, rid in small:
            if rid not in waits and svc.deps.repo.get_task("demo", rid).status == TaskStatus.SUCCEEDED:
                waits[rid] = time.perf_counter() - started
        time.sleep(0.02)
    svc.close()
    return sum(waits.values()) / len(waits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        throughput(Path(tmp) / "t", args.embedder, args.adds)
        print("fairness: small adds of 10 tenants behind one huge add of another")
        old = fairness(Path(tmp) / "fifo", args.embedder, workers=1, fifo=True)
        print(f"  one worker, FIFO (before): small adds wait {old:.2f}s on average")
        new = fairness(Path(tmp) / "pool", args.embedder, workers=2, fifo=False)
        print(f"  pool of 2, tenants take turns (now): {new:.2f}s — {old / new:.0f}x shorter")


if __name__ == "__main__":
    main()
