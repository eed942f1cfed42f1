"""What the rewrite an erasure makes of the local files costs (adapters/local/compaction.py, docs/security.md): a data
dir of N LoCoMo turn pairs (table and embedded index, seeded vectors), `compact()` and `compact(rewrite=True)` in
turns, side by side.

  python bench/rewrite_cost.py 100000
"""
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memlane.bench import scale
from memlane.bench.common import locomo_pairs

DATA = Path(__file__).parents[2] / "shared" / "data" / "locomo-dev.json"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    texts, _ = locomo_pairs(DATA, n)
    with tempfile.TemporaryDirectory() as tmp:
        b = scale.build("embedded", Path(tmp), scale.RandomEmbedder())
        scale.bulk_load(b, "t00000", texts, np.asarray(scale.RandomEmbedder().embed(texts), dtype=np.float32), 0)
        b.deps.compact()
        sizes = {p.name: f"{p.stat().st_size / 2**20:.0f} MB" for p in Path(tmp).rglob("*.db")}
        for rewrite in (False, True, False, True):
            t0 = time.perf_counter()
            b.deps.compact(rewrite=rewrite)
            print(f"{n:,} memories ({sizes}): compact(rewrite={rewrite}) {time.perf_counter() - t0:.2f} s", flush=True)
        b.service.close()


if __name__ == "__main__":
    main()
