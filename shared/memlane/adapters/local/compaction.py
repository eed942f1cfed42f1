"""Compaction of a SQLite file after a deletion: the `Compactor` port for the local table.

The table's connection zeroes what it deletes (``PRAGMA secure_delete``), but in WAL mode the
pages as they were before the delete stay in the ``-wal`` file until a checkpoint overwrites the
database pages and the log is truncated. This does that, from a connection of its own, so the
table adapter keeps its single connection and lock to itself.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ...domain.errors import Retryable


# A checkpoint cannot truncate the log while another connection reads an older snapshot, and SQLite's
# busy handler does not wait for readers: a worker's read of a few milliseconds made a deletion answer
# 503. Try again for up to about a second before telling the caller to retry.
CHECKPOINT_ATTEMPTS = 20
CHECKPOINT_PAUSE = 0.05


class SqliteFileCompactor:
    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 30_000):
        self.path = str(path)
        self.busy_timeout_ms = busy_timeout_ms

    def compact(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            busy = checkpoint(db)
        finally:
            db.close()
        if busy:
            raise Retryable(f"{Path(self.path).name} is busy: its write-ahead log could not be truncated; "
                            "retry the deletion", code="storage_busy")


def checkpoint(db: sqlite3.Connection) -> bool:
    """Checkpoint the WAL into the file and truncate it, retrying while readers hold it; whether it stayed busy."""
    for attempt in range(CHECKPOINT_ATTEMPTS):
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
