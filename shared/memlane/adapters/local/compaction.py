"""Compaction of a SQLite file after a deletion: the `Compactor` port for the local table.

The table's connection zeroes what it deletes (``PRAGMA secure_delete``), but in WAL mode the
pages as they were before the delete stay in the ``-wal`` file until a checkpoint overwrites the
database pages and the log is truncated. This does that, from a connection of its own, so the
table adapter keeps its single connection and lock to itself.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ...domain.errors import Retryable


class SqliteFileCompactor:
    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 30_000):
        self.path = str(path)
        self.busy_timeout_ms = busy_timeout_ms

    def compact(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            db.close()
        if busy:
            raise Retryable(f"{Path(self.path).name} is busy: its write-ahead log could not be truncated; "
                            "retry the deletion", code="storage_busy")
