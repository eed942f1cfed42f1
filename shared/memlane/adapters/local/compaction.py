"""Compaction of a SQLite file after a deletion: the `Compactor` port for the local table.

The table's connection zeroes what it deletes (``PRAGMA secure_delete``), but in WAL mode the
pages as they were before the delete stay in the ``-wal`` file until a checkpoint overwrites the
database pages and the log is truncated. This does that, from a connection of its own, so the
table adapter keeps its single connection and lock to itself.

A checkpoint that truncates the log must wait for every reader of an older snapshot, and while it
waits SQLite holds off every writer: a backup tool or an `sqlite3` shell reading the file stopped the
whole server for minutes (a deletion trial). So each try waits for no reader (busy timeout 0); a
file still held after about a second is truncated later, in the background (`Later`), and the
deletion is answered: what it deleted is out of the tables, and its bytes leave the log as soon as
the reader lets go.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

from .database import Database

log = logging.getLogger(__name__)

# A reader of a few milliseconds (a worker's read) is waited out: tries over about a second.
CHECKPOINT_ATTEMPTS = 20
CHECKPOINT_PAUSE = 0.05
RETRY_SECONDS = 5.0  # between background tries while a reader still holds the log
REWRITE_WAIT_SECONDS = 60.0  # a rewrite (VACUUM) waits this long for the writer of the moment
REWRITE_EVERY_SECONDS = 60.0  # at most one rewrite of a file in this time (`Rewrites`)
_HELD = "a reader holds its write-ahead log; truncated in the background once it lets go"


class Later:
    """`attempt` (answers whether it succeeded) tried again every RETRY_SECONDS in the background until it
    succeeds; one timer at a time however often it is scheduled. A retry tries once: the index's is made under the
    lock every search takes (a regression trial: searches stalled a second every five while a reader held the file)."""

    def __init__(self, attempt: Callable[[], bool], what: str, why: str = _HELD):
        self.attempt, self.what, self.why = attempt, what, why
        self._timer: threading.Timer | None = None
        self._owed = False  # scheduled and not yet succeeded
        self._lock = threading.Lock()

    @property
    def pending(self) -> bool:
        return self._owed

    def schedule(self) -> None:
        with self._lock:
            if not self._owed:  # once while owed, not at every try (a trial: every five seconds for a minute)
                log.warning("%s: %s", self.what, self.why)
            self._owed = True
            if self._timer is None:
                self._timer = threading.Timer(RETRY_SECONDS, self._retry)
                self._timer.daemon = True
                self._timer.start()

    def _retry(self) -> None:
        with self._lock:
            self._timer = None
        try:
            done = self.attempt()
        except sqlite3.ProgrammingError:  # its connection was closed: the process is stopping
            with self._lock:
                self._owed = False
            return
        except Exception:  # noqa: BLE001 — a background retry logs and tries again, it never dies silently
            log.exception("%s: compaction failed; trying again", self.what)
            done = False
        if not done:
            self.schedule()
            return
        with self._lock:
            self._owed = self._timer is not None  # scheduled again meanwhile: still owed


class Rewrites:
    """When a file is written anew (VACUUM) after a deletion: at once if it can be, else once, in the background. Not
    twice within REWRITE_EVERY_SECONDS: a rewrite takes seconds on a large file and holds off every write meanwhile,
    and any tenant can ask for erasures (a trial: 47 erasures of an empty tenant in 25 s cut another tenant's writes
    to a seventh). Not while a reader holds the log: the rewrite would go into it, a copy of the whole file each time,
    which cannot shrink until the reader lets go (70 MB an erasure in a trial) — one may, as a reader of an empty log
    does not show, and it shows then. Meanwhile the deleted rows' earlier copies wait in pages' unused space, as after
    a deletion answered in one go."""

    def __init__(self, rewrite: Callable[[], None], truncate: Callable[[int], bool], what: str):
        self._rewrite, self._truncate = rewrite, truncate
        self._last: float | None = None
        self._lock = threading.Lock()
        self.later = Later(lambda: self._try(attempts=1), what, "rewritten in the background, once the last rewrite "
                                                                 "is a minute old and no reader holds the log")

    def ask(self) -> None:
        if not self._try(CHECKPOINT_ATTEMPTS):
            self.later.schedule()

    def _try(self, attempts: int) -> bool:
        with self._lock:
            if self._last is not None and time.monotonic() - self._last < REWRITE_EVERY_SECONDS:
                return False
            if not self._truncate(attempts):  # a reader holds the log
                return False
            self._rewrite()
            self._last = time.monotonic()
            self._truncate(attempts)  # the rewritten pages into the file (else the next checkpoint moves them)
            return True


class SqliteFileCompactor:
    def __init__(self, path: str | Path, database: Database | None = None):
        """`database`: the process's own connection to the file, if it has one: a rewrite runs on it, under its lock,
        so the process's writers wait for it rather than time out on a lock held by another connection."""
        self.path, self.database = str(path), database
        self.later = Later(lambda: self._truncate(attempts=1), Path(self.path).name)
        self.rewrites = Rewrites(self._vacuum, lambda attempts: self._truncate(attempts), Path(self.path).name)

    def compact(self, *, rewrite: bool = False) -> None:
        if rewrite:
            self.rewrites.ask()
        if not self._truncate():
            self.later.schedule()

    def _vacuum(self) -> None:
        if self.database is not None:
            with self.database.lock:
                self.database.conn.execute("VACUUM")
            return
        db = sqlite3.connect(self.path, isolation_level=None, timeout=REWRITE_WAIT_SECONDS)
        try:
            db.execute("VACUUM")  # waits for the writer of the moment, holds off the next ones while it runs
        finally:
            db.close()

    def _truncate(self, attempts: int = CHECKPOINT_ATTEMPTS) -> bool:
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            return not checkpoint(db, attempts)
        finally:
            db.close()


def checkpoint(db: sqlite3.Connection, attempts: int = CHECKPOINT_ATTEMPTS) -> bool:
    """Checkpoint the WAL into the file and truncate it, trying again while readers hold it (never waiting on one:
    a waiting checkpoint holds off every writer); whether it stayed busy. The connection's busy timeout is put back."""
    timeout = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout=0")
    try:
        for attempt in range(attempts):
            try:
                busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError as error:  # "database is locked" / "database table is locked"
                if "locked" not in str(error) and "busy" not in str(error):
                    raise
                busy = 1
            if not busy:
                return False
            time.sleep(CHECKPOINT_PAUSE * (attempt + 1) / CHECKPOINT_ATTEMPTS * 2)
        return True
    finally:
        db.execute(f"PRAGMA busy_timeout={int(timeout)}")
