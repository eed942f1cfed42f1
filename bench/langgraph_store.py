"""What each MemlaneStore (LangGraph) operation costs, relative to a `get`, in-process (docs/integrations.md).

    PYTHONPATH=shared .venv/bin/python bench/langgraph_store.py [--items 1000]

Items spread over 20 namespaces; medians of repeated calls, printed as ratios to a `get` measured in the same
run (the absolute `get` time is printed for scale only).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from memlane.cli import InProcessTransport
from memlane.integrations.langgraph import MemlaneStore
from memlane.sdk import Memlane


def median_seconds(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000)
    n = parser.parse_args().items
    transport = InProcessTransport(Path(tempfile.mkdtemp()) / "data")
    store = MemlaneStore("bench", app_id="bench", tenant_id="t", client=Memlane("http://memlane.local",
                                                                              transport=transport))
    start = time.perf_counter()
    for i in range(n):
        store.put(("users", f"u{i % 20}", "facts"), f"k{i}", {"text": f"fact number {i} about topic {i % 37}", "i": i})
    put = (time.perf_counter() - start) / n
    get = median_seconds(lambda: store.get(("users", "u3", "facts"), "k3"), 20)
    rows = {
        "put (new key)": put,
        "put (same key, new value)": median_seconds(
            lambda: store.put(("users", "u3", "facts"), "k3", {"text": f"changed {time.time()}"}), 10),
        "search(query) under a prefix": median_seconds(lambda: store.search(("users", "u3"), query="topic 5"), 20),
        "search(query, filter)": median_seconds(
            lambda: store.search(("users",), query="topic 5", filter={"i": {"$gt": 500}}), 20),
        "search(prefix) without query": median_seconds(lambda: store.search(("users", "u3")), 5),
        "list_namespaces()": median_seconds(store.list_namespaces, 5),
    }
    print(f"{n} items; cost relative to a get ({get * 1000:.1f} ms here, for scale only):")
    for name, seconds in rows.items():
        print(f"  {name:32s} {seconds / get:6.1f}x")
    transport.service.close()


if __name__ == "__main__":
    main()
