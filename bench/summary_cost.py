"""What a thread summary costs as the thread grows (issue 12 #4): the trigger check after an add and the
incremental refresh should not grow with the thread; rebuilding from the whole thread would.

    PYTHONPATH=shared .venv/bin/python bench/summary_cost.py [sizes...]   (default: 200 2000)

For each size, a thread of that many messages is summarised, then 100 more messages are added (past
the 2,000-token trigger). Reported, side by side in one run: the message items the trigger check and
the incremental refresh read from the table (deterministic), and the time of an incremental refresh
and of an extractive rebuild from the whole thread, each as a ratio to the trigger check's time.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.domain.scope import Scope
from memlane.policies import summary as extractive
from memlane.services import ingest, stores, summaries

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
SCOPE = {"app_id": "app", "tenant_id": "u", "agent_id": "a", "run_id": "t"}


class CountingTable:
    """The table, counting the message items its queries return."""

    def __init__(self, inner):  # type: ignore[no-untyped-def]
        self.inner, self.read = inner, 0

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def query(self, pk, **kwargs):  # type: ignore[no-untyped-def]
        page = self.inner.query(pk, **kwargs)
        self.read += sum(i["sk"].startswith("MSG#") for i in page.items)
        return page


def add_turns(deps, start: int, end: int) -> None:  # type: ignore[no-untyped-def]
    for i in range(start, end, 2):
        ingest.add(deps, "demo", scope=SCOPE, request_id=f"r{i}", messages=[
            {"role": "user", "content": f"Turn {i}: I compared hotel {i} in Porto at {100 + i % 50} euros near the river.",
             "created_at": T0 + timedelta(minutes=i)},
            {"role": "assistant", "content": f"Noted hotel {i}; it is {i % 7} km from the station and has breakfast.",
             "created_at": T0 + timedelta(minutes=i, seconds=30)}])


def measure(n: int) -> dict[str, float]:
    svc = build_local(Settings.from_env(env={}, data_dir=Path(tempfile.mkdtemp()) / "data", reranker="none"),
                      embedder=HashingEmbedder())
    try:
        deps = svc.deps
        stores.create(deps, name="demo")
        scope = Scope(**SCOPE)
        add_turns(deps, 0, n)
        counting = CountingTable(deps.for_tenant("demo", "app", "u").table)
        tenant = dataclasses.replace(deps.for_tenant("demo", "app", "u"), table=counting)
        summaries.refresh(tenant, "demo", scope, force=True)
        add_turns(deps, n, n + 100)
        store = deps.repo.get_store("demo")
        counting.read = 0
        started = time.perf_counter()
        assert summaries.due(tenant, store, scope, tenant.repo.get_summary("demo", scope)) is not None
        check, check_reads = time.perf_counter() - started, counting.read
        counting.read = 0
        started = time.perf_counter()
        summaries.refresh(tenant, "demo", scope)
        incremental, refresh_reads = time.perf_counter() - started, counting.read
        started = time.perf_counter()
        messages, cursor = [], None
        while True:
            page, cursor = tenant.repo.newest_messages("demo", scope, limit=500, cursor=cursor)
            messages += page
            if not cursor:
                break
        extractive.extract(list(reversed(messages))[:-store.summary_keep_recent], deps.tokenizer.count_many,
                           deps.settings.summary_max_tokens)
        full = time.perf_counter() - started
        return {"messages": n + 100, "check_reads": check_reads, "refresh_reads": refresh_reads,
                "refresh_vs_check": incremental / check, "rebuild_vs_check": full / check}
    finally:
        svc.close()


def main(argv: list[str]) -> None:
    for n in [int(a) for a in argv] or [200, 2000]:
        r = measure(n)
        print(f"thread of {r['messages']:>5} messages: trigger check read {r['check_reads']} messages, incremental "
              f"refresh {r['refresh_reads']}; time vs the check: refresh {r['refresh_vs_check']:.1f}x, "
              f"extractive rebuild of the whole thread {r['rebuild_vs_check']:.1f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
