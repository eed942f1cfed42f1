"""A durable in-process queue with a supervised pool of workers, in the table's SQLite database.

At-least-once, like SQS: a job is leased while it runs; failures retry with exponential backoff;
a job that keeps failing is parked as dead and handed to `on_dead`, so its task can say FAILED.

- Atomic with the task: `commit` writes the job in the same transaction as the add's task and
  messages (the queue shares the table's database), so an accepted task always has its job.
- One owner: the data-dir lock (datadir.py) makes this process the only one using the queue, so
  at start every lease left by a dead owner is released at once (`take_ownership`), and a
  graceful `stop` hands back the leases of jobs it could not finish within its grace period.
- Supervised: nothing a job or its failure handler raises stops a worker; it is logged.
- A full disk is not the job's failure: a job refused for it (503 `storage_full`) is handed back without counting
  the attempt, and what the queue could not write of a job's fate (its hand-back, retry or deletion: the disk
  refuses those too) is owed and written before the next claim, so the job comes back soon after space is freed,
  not when its lease runs out.
- Fair: jobs carry a group (a tenant); a group runs one job at a time, and groups take turns
  (the one served longest ago first), so one tenant's backlog or one huge add cannot hold every
  worker.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from ...domain.errors import Retryable
from ...ports import Job, QueueHealth, Table, Write
from .database import Database

log = logging.getLogger(__name__)

Handler = Callable[[Job], None]
DeadHandler = Callable[[Job, str], None]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, "
    "kind TEXT NOT NULL DEFAULT '', store TEXT NOT NULL DEFAULT '', request_id TEXT NOT NULL DEFAULT '', "
    "grp TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT 'ready', attempts INTEGER NOT NULL DEFAULT 0, "
    "available_at REAL NOT NULL, enqueued_at REAL NOT NULL DEFAULT 0, last_error TEXT)",
    "CREATE INDEX IF NOT EXISTS jobs_due ON jobs (state, available_at)",
    "CREATE INDEX IF NOT EXISTS jobs_group ON jobs (grp, state)",
    "CREATE INDEX IF NOT EXISTS jobs_request ON jobs (request_id, store, kind)",
    # When each group was last served: the group served longest ago goes next.
    "CREATE TABLE IF NOT EXISTS job_groups (grp TEXT PRIMARY KEY, served REAL NOT NULL)",
)

# A due job of a group that has no job running now; the group served longest ago first.
_NEXT = (
    "SELECT j.id, j.body, j.attempts, j.grp FROM jobs j LEFT JOIN job_groups g ON g.grp = j.grp "
    "WHERE j.state IN ('ready', 'leased') AND j.available_at <= :now "
    "AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.grp = j.grp AND r.state = 'leased' AND r.available_at > :now) "
    "ORDER BY COALESCE(g.served, 0), j.available_at, j.id LIMIT 1")
# A leased job handed back, its attempt not counted (a graceful stop, a full disk).
_HAND_BACK = ("UPDATE jobs SET state = 'ready', available_at = ?, attempts = MAX(0, attempts - 1) "
              "WHERE id = ? AND state = 'leased'")
FULL_DISK_RETRY = 5.0  # seconds before a job refused by a full disk runs again (at most `max_delay`)


def _disk_full(error: BaseException) -> bool:
    return isinstance(error, Retryable) and error.code == "storage_full"  # database.full's translation


class DurableQueue:
    def __init__(self, database: Database | str | Path, *, max_attempts: int = 5, base_delay: float = 0.5,
                 max_delay: float = 60.0, lease_seconds: float = 300.0, workers: int = 2,
                 clock: Callable[[], float] = time.time):
        self.db = database if isinstance(database, Database) else Database(database)
        with self.db.transaction() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
        self.max_attempts, self.base_delay, self.max_delay = max_attempts, base_delay, max_delay
        self.lease_seconds, self.workers, self._clock = lease_seconds, workers, clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._running: dict[int, int] = {}  # thread ident → id of the job it runs
        self._running_lock = threading.Lock()
        self._owed: dict[int, list[tuple[str, tuple]]] = {}  # job id → the writes of its fate a full disk refused

    # -- the Queue port ---------------------------------------------------------------------
    def enqueue(self, job: Job, *, delay: float = 0) -> None:
        with self.db.transaction() as conn:
            self._insert(conn, job, delay)
        self._wake.set()

    def commit(self, table: Table, writes: Sequence[Write], job: Job, *, delay: float = 0) -> None:
        # The table's transaction nests in ours (a savepoint): the job exists exactly when the writes do.
        with self.db.transaction() as conn:
            table.transact(writes)
            self._insert(conn, job, delay)
        self._wake.set()

    def discard(self, job: Job) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM jobs WHERE request_id = ? AND store = ? AND kind = ? AND grp = ? "
                         "AND state = 'ready'", (job.request_id, job.store, job.kind, job.group or job.store))

    def depth(self) -> int:
        with self.db.lock:
            return self.db.conn.execute("SELECT COUNT(*) FROM jobs WHERE state != 'dead'").fetchone()[0]

    def health(self) -> QueueHealth:
        with self.db.lock:
            depth, oldest = self.db.conn.execute(
                "SELECT COUNT(*), MIN(enqueued_at) FROM jobs WHERE state != 'dead'").fetchone()
            dead = self.db.conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'dead'").fetchone()[0]
        return QueueHealth(depth=depth, oldest_pending_seconds=round(max(0.0, self._clock() - oldest), 3)
                           if oldest is not None else 0.0, dead=dead, worker_alive=self.alive)

    def _insert(self, conn: sqlite3.Connection, job: Job, delay: float) -> None:
        # A job already waiting for the same work is enough (a replay, the sweeper): work is idempotent.
        # The group names the tenant: request ids are per tenant, so two tenants' jobs are not the same work.
        waiting = conn.execute(
            "SELECT 1 FROM jobs WHERE request_id = ? AND store = ? AND kind = ? AND grp = ? AND state = 'ready' "
            "LIMIT 1", (job.request_id, job.store, job.kind, job.group or job.store)).fetchone()
        if waiting:
            return
        now = self._clock()
        conn.execute("INSERT INTO jobs (body, kind, store, request_id, grp, available_at, enqueued_at) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (job.model_dump_json(), job.kind, job.store, job.request_id, job.group or job.store,
                      now + max(0.0, delay), now))

    # -- ownership ---------------------------------------------------------------------------
    def take_ownership(self) -> int:
        """Release every lease and make every job due now. Only for the holder of the data-dir lock:
        whoever leased them is dead, and no sync add of a live process is waiting on a delayed job."""
        with self.db.transaction() as conn:
            released = conn.execute("UPDATE jobs SET state = 'ready' WHERE state = 'leased'").rowcount
            conn.execute("UPDATE jobs SET available_at = MIN(available_at, ?) WHERE state = 'ready'", (self._clock(),))
        if released:
            log.warning("released %d job lease(s) left by a stopped process", released)
        return released

    def import_jobs(self, path: Path) -> int:
        """Adopt the jobs of a queue file of an earlier version (queue.db beside the table)."""
        old = sqlite3.connect(str(path))
        try:
            rows = old.execute("SELECT body, state, attempts, last_error FROM jobs").fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            old.close()
        with self.db.transaction() as conn:
            for body, state, attempts, error in rows:
                job = Job.model_validate_json(body)
                conn.execute("INSERT INTO jobs (body, kind, store, request_id, grp, state, attempts, available_at, "
                             "enqueued_at, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (body, job.kind, job.store, job.request_id, job.group or job.store,
                              "dead" if state == "dead" else "ready", attempts, self._clock(), self._clock(), error))
        return len(rows)

    # -- the worker --------------------------------------------------------------------------
    def _claim(self) -> tuple[int, Job, int, str | None] | None:
        """Lease the next job, fairly. The fourth element is a reason when the job must be given up
        instead of run: it was leased max_attempts times and never finished (it kills the process)."""
        now = self._clock()
        with self.db.transaction() as conn:  # BEGIN IMMEDIATE: two workers never lease one job
            row = conn.execute(_NEXT, {"now": now}).fetchone()
            if row is None:
                return None
            job_id, body, attempts, group = row
            if attempts >= self.max_attempts:
                reason = f"abandoned: {attempts} attempts never finished (the process stopped during each)"
                conn.execute("UPDATE jobs SET state = 'dead', last_error = ? WHERE id = ?", (reason, job_id))
                return job_id, Job.model_validate_json(body), attempts, reason
            # A lease is an availability time in the future: if we die, the job comes back after it.
            conn.execute("UPDATE jobs SET state = 'leased', attempts = attempts + 1, available_at = ? WHERE id = ?",
                         (now + self.lease_seconds, job_id))
            conn.execute("INSERT INTO job_groups (grp, served) VALUES (?, ?) "
                         "ON CONFLICT (grp) DO UPDATE SET served = excluded.served", (group, now))
        return job_id, Job.model_validate_json(body), attempts + 1, None

    def process_one(self, handler: Handler, on_dead: DeadHandler) -> bool:
        """Run one due job. False when none is due. Raises nothing a job or `on_dead` raises."""
        self._settle_owed()
        claimed = self._claim()
        if claimed is None:
            return False
        job_id, job, attempts, abandoned = claimed
        if abandoned:
            log.error("job %s (%s %s) dead: %s", job_id, job.kind, job.request_id, abandoned)
            self._give_up(on_dead, job, abandoned)
            return True
        with self._running_lock:
            self._running[threading.get_ident()] = job_id
        try:
            handler(job)
        except Exception as error:  # noqa: BLE001 — a worker must survive any job failure and record it
            if _disk_full(error):
                log.warning("job %s refused by a full disk: handed back, retry in %.0fs", job_id, self._full_delay)
                self._record(job_id, [(_HAND_BACK, (self._clock() + self._full_delay, job_id))])
            else:
                self._failed(job_id, job, attempts, f"{type(error).__name__}: {error}", on_dead)
        else:
            self._record(job_id, [("DELETE FROM jobs WHERE id = ?", (job_id,)),
                                  ("DELETE FROM job_groups WHERE grp = ? AND NOT EXISTS "
                                   "(SELECT 1 FROM jobs WHERE grp = ?)", (job.group or job.store,) * 2)])
        finally:
            with self._running_lock:
                self._running.pop(threading.get_ident(), None)
        return True

    def _failed(self, job_id: int, job: Job, attempts: int, reason: str, on_dead: DeadHandler) -> None:
        if attempts >= self.max_attempts:
            log.error("job %s dead after %d attempts: %s", job_id, attempts, reason)
            with self.db.transaction() as conn:
                conn.execute("UPDATE jobs SET state = 'dead', last_error = ? WHERE id = ?", (reason, job_id))
            self._give_up(on_dead, job, reason)
            return
        delay = min(self.max_delay, self.base_delay * 2 ** (attempts - 1))
        log.warning("job %s failed (attempt %d), retry in %.1fs: %s", job_id, attempts, delay, reason)
        self._record(job_id, [("UPDATE jobs SET state = 'ready', available_at = ?, last_error = ? WHERE id = ?",
                               (self._clock() + delay, reason, job_id))])

    @property
    def _full_delay(self) -> float:
        return min(self.max_delay, FULL_DISK_RETRY)

    def _record(self, job_id: int, writes: list[tuple[str, tuple]]) -> None:
        """Write what became of a leased job. A full disk refuses it too: it is owed (written before the next
        claim) instead of leaving the job leased until its lease runs out."""
        try:
            with self.db.transaction() as conn:
                for sql, args in writes:
                    conn.execute(sql, args)
        except Retryable as error:
            if not _disk_full(error):
                raise
            with self._running_lock:
                self._owed[job_id] = writes
            log.warning("job %s: its state could not be written (the disk is full); written once it can be", job_id)

    def _settle_owed(self) -> None:
        with self._running_lock:
            owed = list(self._owed.items())
        for job_id, writes in owed:
            with self._running_lock:
                self._owed.pop(job_id, None)
            self._record(job_id, writes)  # owed again while the disk is still full

    @staticmethod
    def _give_up(on_dead: DeadHandler, job: Job, reason: str) -> None:
        try:
            on_dead(job, reason)
        except Exception:  # noqa: BLE001 — a failing failure handler must not stop the worker either
            log.exception("the failure handler of dead job %s %s failed", job.kind, job.request_id)

    def drain(self, handler: Handler, on_dead: DeadHandler, *, timeout: float = 30.0) -> None:
        """Process until no job is pending (tests, `--local` CLI). Waits for retries that come due."""
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            if not self.process_one(handler, on_dead):
                time.sleep(0.01)

    def start(self, handler: Handler, on_dead: DeadHandler, *, poll: float = 0.5) -> None:
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    busy = self.process_one(handler, on_dead)
                except Exception:  # noqa: BLE001 — e.g. the database briefly locked: log, wait, go on
                    log.exception("the worker loop failed; continuing")
                    busy = False
                if not busy:
                    self._wake.wait(poll)
                    self._wake.clear()

        self._threads = [threading.Thread(target=loop, name=f"memlane-worker-{i}", daemon=True)
                         for i in range(max(1, self.workers))]
        for thread in self._threads:
            thread.start()

    def stop(self, grace: float = 10.0) -> int:
        """Take no more jobs; wait up to `grace` seconds for running ones; hand back the leases of those
        still running (without counting the interrupted attempt). Returns how many were handed back."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + grace
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._running_lock:
            unfinished = list(self._running.values())
        if unfinished:
            with self.db.transaction() as conn:
                conn.executemany(_HAND_BACK, [(self._clock(), i) for i in unfinished])
            log.warning("stopping: handed back %d unfinished job(s)", len(unfinished))
        return len(unfinished)

    @property
    def alive(self) -> bool | None:
        """Whether the workers run (None: never started in this process)."""
        if not self._threads:
            return None
        return not self._stop.is_set() and all(t.is_alive() for t in self._threads)

    # -- inspection --------------------------------------------------------------------------
    def pending(self) -> int:
        return self.depth()

    def dead(self) -> list[tuple[Job, str]]:
        with self.db.lock:
            rows = self.db.conn.execute("SELECT body, last_error FROM jobs WHERE state='dead' ORDER BY id").fetchall()
        return [(Job.model_validate_json(b), e or "") for b, e in rows]
