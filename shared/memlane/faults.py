"""Fault injection: named crash points in the flows that must survive a crash (tests/faults/).

A service calls `deps.faults.point("extract.after_table_write")` where a crash would hurt most.
Unarmed (the default) a point does nothing. Armed with a schedule — MEMLANE_FAULTS, read by
config.py and handed over by bootstrap.py — the process dies on the spot with os._exit, as a
power cut or kill -9 would: no finally block, no flush, no goodbye.

Schedule: comma-separated `name@n` — die the n-th time point `name` is reached (n defaults to 1);
`any@n` dies at the n-th point reached, whatever its name (random schedules pick n).
"""

from __future__ import annotations

import os
import threading
from typing import Callable

CRASH_EXIT_CODE = 86

# Every point the services call, so a schedule naming another one is refused, not silently idle.
POINTS = (
    "add.after_request_claim",  # the request id is claimed; no message, no task yet
    "add.after_messages_and_task",  # messages, task and its job committed (one transaction); not answered
    "extract.after_running",  # the task says RUNNING
    "extract.mid_memories",  # some of the task's memories are in the table, not all
    "extract.after_table_write",  # every memory in the table, none in the index
    "extract.after_index_write",  # table and index written; the task not yet SUCCEEDED
    "dream.after_running",
    "dream.after_actions",  # actions recorded, none applied
    "memory.after_edit",  # an edit and its index job committed; the index not yet written
    "explicit.after_commit",  # an explicit write and its index job committed; the index not yet written
    "erase.mid_store",  # a store's items deleted, its report not yet kept
    "erase.after_store",  # a store erased (the n-th hit: n stores), the others not
    "erase.before_done",
)


def _die(name: str) -> None:
    os.write(2, f"memlane: fault injection: crash at {name}\n".encode())
    os._exit(CRASH_EXIT_CODE)


class Faults:
    def __init__(self, schedule: str = "", crash: Callable[[str], None] | None = None):
        self._targets: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in schedule.split(","))):
            name, _, n = part.partition("@")
            if name != "any" and name not in POINTS:
                raise ValueError(f"unknown crash point '{name}' (known: any, {', '.join(POINTS)})")
            self._targets[name] = int(n or 1)
        self._hits: dict[str, int] = {}
        self._lock = threading.Lock()
        self._crash = crash if crash is not None else _die  # (looked up now: a test may replace _die)

    @property
    def armed(self) -> bool:
        return bool(self._targets)

    def point(self, name: str) -> None:
        if not self._targets:
            return
        with self._lock:
            hits = {key: self._hits.get(key, 0) + 1 for key in (name, "any")}
            self._hits.update(hits)
            due = any(self._targets.get(key) == count for key, count in hits.items())
        if due:
            self._crash(name)
