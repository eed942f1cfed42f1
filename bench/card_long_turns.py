"""A thread of long turns: the context card's first build against its next builds of the same state, side by side in
one run (the card keeps each line's token count, by its digest: the next build counts nothing again).

A trial built cards over 50 turns of ~32,000 characters each: every build took 2-3 s under load, because lines over
2,000 characters were counted afresh each time. `--turns` turns of `--chars` characters (seeded words), the hashing
embedder, the shipped tokenizer; prints each build's wall time and the ratio of the next builds to the first.

  python bench/card_long_turns.py
  python bench/card_long_turns.py --turns 50 --chars 31000 --builds 5
"""
import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.services import context, ingest, stores

WORDS = "the a of river mountain coffee project meeting sister bought moved quickly yesterday Paris plan".split()


def turn(rng: random.Random, i: int, chars: int) -> str:
    out: list[str] = []
    while sum(map(len, out)) < chars:
        out.append(" ".join(rng.choice(WORDS) for _ in range(12)) + ".")
    return f"Turn {i}: " + " ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--chars", type=int, default=31_000)
    ap.add_argument("--builds", type=int, default=5, help="builds of the same state, the first included")
    args = ap.parse_args()
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as tmp:
        service = build_local(Settings.from_env(env={}, data_dir=Path(tmp) / "data", reranker="none",
                                                embedder="hashing"))
        try:
            deps = service.deps
            name = stores.create(deps, name="long-turns").name
            scope = {"app_id": "bench", "tenant_id": "t", "run_id": "long"}
            for i in range(args.turns):
                ingest.add(deps, name, scope=scope, messages=[
                    {"role": "user" if i % 2 == 0 else "assistant", "content": turn(rng, i, args.chars)}])
                print(f"\rturns added: {i + 1}/{args.turns}", end="", flush=True)
            service.drain()
            print()
            times = []
            for n in range(args.builds):
                t0 = time.perf_counter()
                card = context.build(deps, name, app_id="bench", tenant_id="t", thread_id="long",
                                     recent_messages=args.turns)
                times.append((time.perf_counter() - t0) * 1000)
                print(f"build {n + 1}: {times[-1]:.0f} ms ({card.total} tokens)")
            if len(times) > 1:
                later = statistics.median(times[1:])
                print(f"first {times[0]:.0f} ms, next builds median {later:.0f} ms: {later / times[0]:.3f}x the first")
        finally:
            service.close()


if __name__ == "__main__":
    main()
