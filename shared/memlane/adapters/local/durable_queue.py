"""A durable in-process queue with a worker thread, on SQLite.

At-least-once, like SQS: a job is leased while it runs; a job whose lease ran out (the process
died mid-job) is offered again after a restart. Failures retry with exponential backoff; a job
that keeps failing is parked as dead and handed to `on_dead`, so its task can say FAILED.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

from ...ports import Job

log = logging.getLogger(__name__)

Handler = Callable[[Job], None]
DeadHandler = Callable[[Job, str], None]


class DurableQueue:
    def __init__(self, path: str | Path, *, max_attempts: int = 5, base_delay: float = 0.5,
                 max_delay: float = 60.0, lease_seconds: float = 300.0, clock: Callable[[], float] = time.time):
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # an accepted job survives a power cut
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, "
            "state TEXT NOT NULL DEFAULT 'ready', attempts INTEGER NOT NULL DEFAULT 0, "
            "available_at REAL NOT NULL, last_error TEXT)")
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.max_attempts, self.base_delay, self.max_delay = max_attempts, base_delay, max_delay
        self.lease_seconds, self._clock = lease_seconds, clock

    # -- the Queue port ---------------------------------------------------------------------
    def enqueue(self, job: Job) -> None:
        with self._lock:
            self._db.execute("INSERT INTO jobs (body, available_at) VALUES (?, ?)",
                             (job.model_dump_json(), self._clock()))
        self._wake.set()

    # -- the worker --------------------------------------------------------------------------
    def _claim(self) -> tuple[int, Job, int] | None:
        now = self._clock()
        with self._lock:
            row = self._db.execute(
                "SELECT id, body, attempts FROM jobs WHERE state IN ('ready', 'leased') AND available_at <= ? "
                "ORDER BY available_at, id LIMIT 1", (now,)).fetchone()
            if row is None:
                return None
            # A lease is an availability time in the future: if we die, the job comes back after it.
            self._db.execute("UPDATE jobs SET state='leased', attempts=attempts+1, available_at=? WHERE id=?",
                             (now + self.lease_seconds, row[0]))
        return row[0], Job.model_validate_json(row[1]), row[2] + 1

    def process_one(self, handler: Handler, on_dead: DeadHandler) -> bool:
        """Run one due job. False when none is due."""
        claimed = self._claim()
        if claimed is None:
            return False
        job_id, job, attempts = claimed
        try:
            handler(job)
        except Exception as error:  # noqa: BLE001 — a worker must survive any job failure and record it
            reason = f"{type(error).__name__}: {error}"
            if attempts >= self.max_attempts:
                log.error("job %s dead after %d attempts: %s", job_id, attempts, reason)
                with self._lock:
                    self._db.execute("UPDATE jobs SET state='dead', last_error=? WHERE id=?", (reason, job_id))
                on_dead(job, reason)
            else:
                delay = min(self.max_delay, self.base_delay * 2 ** (attempts - 1))
                log.warning("job %s failed (attempt %d), retry in %.1fs: %s", job_id, attempts, delay, reason)
                with self._lock:
                    self._db.execute("UPDATE jobs SET available_at=?, last_error=? WHERE id=?",
                                     (self._clock() + delay, reason, job_id))
            return True
        with self._lock:
            self._db.execute("DELETE FROM jobs WHERE id=?", (job_id,))
        return True

    def drain(self, handler: Handler, on_dead: DeadHandler, *, timeout: float = 30.0) -> None:
        """Process until no job is pending (tests, `--local` CLI). Waits for retries that come due."""
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            if not self.process_one(handler, on_dead):
                time.sleep(0.01)

    def start(self, handler: Handler, on_dead: DeadHandler, *, poll: float = 0.5) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                if not self.process_one(handler, on_dead):
                    self._wake.wait(poll)
                    self._wake.clear()

        self._thread = threading.Thread(target=loop, name="memlane-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout)

    # -- inspection --------------------------------------------------------------------------
    def pending(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM jobs WHERE state != 'dead'").fetchone()[0]

    def dead(self) -> list[tuple[Job, str]]:
        with self._lock:
            rows = self._db.execute("SELECT body, last_error FROM jobs WHERE state='dead' ORDER BY id").fetchall()
        return [(Job.model_validate_json(b), e or "") for b, e in rows]
