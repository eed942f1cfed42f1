"""Settings of a long-running memlane process: `memlane serve`, `memlane worker`, a Lambda container.

Python's cyclic garbage collector runs its young generation every 700 allocations of container objects;
one search allocates thousands (hits, statements read for `newer_first`, rows), nearly all freed by
reference counting, and every tenth young collection walks the middle generation too. Measured at 10⁵
memories in one tenant (docs/benchmarks.md §2, "The garbage collector"): about a collection per search,
0.5 ms on average and 30–60 ms for the rare full one, which lands in the tail. `settle` moves what the
process has built so far (modules, adapters, caches) out of the collector's reach and runs the young
generation every YOUNG_ALLOCATIONS instead; cycles are still collected, less often.
"""

from __future__ import annotations

import gc

YOUNG_ALLOCATIONS = 20_000
_settled = False


def settle() -> None:
    """Call once the process has built what it keeps, before it serves; later calls do nothing (what a process
    built after its first service is not kept out: a test process builds many and drops them). No
    `gc.collect()` first: it would add tens of milliseconds to a Lambda cold start for what little garbage
    start-up leaves."""
    global _settled
    if _settled:
        return
    _settled = True
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_ALLOCATIONS, middle, old)
