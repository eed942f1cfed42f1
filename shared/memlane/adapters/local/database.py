"""One SQLite file, one connection, shared by the table and the durable queue.

The queue lives in the table's database so that an add can commit its task and its extraction
job in one transaction: no crash can leave an accepted task without a job. Transactions nest
(an inner one is a savepoint), so the queue can wrap a table transaction and add its job to it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...domain.errors import Retryable

FILE_MODE = 0o600  # data files hold messages and API key hashes: owner only (the -wal/-shm inherit it)


def create_private(path: str | Path) -> None:
    """Create `path` empty with mode 0600 if it does not exist (SQLite then gives -wal/-shm the same mode)."""
    if str(path) == ":memory:":
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, FILE_MODE))


def file_version(path: str | Path) -> int | None:
    """A SQLite file's schema version (user_version), read without creating or changing it; None: no file."""
    if not Path(path).exists():
        return None
    db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def full(error: BaseException) -> Retryable | None:
    """A full disk (SQLITE_FULL) as the error a caller can act on: 503 `storage_full`, nothing written."""
    if isinstance(error, sqlite3.OperationalError) and getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        found = Retryable("the data directory's disk is full: this write was not made; free space and retry",
                          code="storage_full")
        found.__cause__ = error
        return found
    return None


class Database:
    def __init__(self, path: str | Path, *, timeout: float = 30.0):
        self.path = str(path)
        create_private(self.path)
        # isolation_level=None: transactions are ours (BEGIN IMMEDIATE / SAVEPOINT).
        self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=timeout)
        # Re-entrant: a queue commit holds it around the table's own transaction on the same thread.
        self.lock = threading.RLock()
        self._depth = 0
        with self.lock:
            self.conn.execute("PRAGMA journal_mode=WAL")
            # FULL: a write we acknowledged survives a power cut ("nothing accepted is ever lost").
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("PRAGMA secure_delete=ON")  # deleted items are zeroed, not left in free space

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; inside another one on this thread, a savepoint of it."""
        with self.lock:
            outer = self._depth == 0
            self.conn.execute("BEGIN IMMEDIATE" if outer else f"SAVEPOINT sp{self._depth}")
            self._depth += 1
            try:
                yield self.conn
            except BaseException as error:
                self._depth -= 1
                if self.conn.in_transaction:  # SQLite ends it by itself on some errors (a full disk)
                    if outer:
                        self.conn.execute("ROLLBACK")
                    else:
                        self.conn.execute(f"ROLLBACK TO sp{self._depth}")
                        self.conn.execute(f"RELEASE sp{self._depth}")
                raise full(error) or error
            self._depth -= 1
            try:
                self.conn.execute("COMMIT" if outer else f"RELEASE sp{self._depth}")
            except sqlite3.OperationalError as error:
                if outer and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise full(error) or error

    def close(self) -> None:
        with self.lock:
            self.conn.close()
