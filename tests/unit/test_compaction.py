"""A deletion's compaction waits out a reader that holds the write-ahead log for a moment (a worker's
read) instead of answering 503 at once; a reader that never lets go still gives a clear Retryable."""

import sqlite3

import pytest

from memlane.adapters.local import compaction
from memlane.adapters.local.compaction import SqliteFileCompactor
from memlane.domain.errors import Retryable


def _wal_file(tmp_path):
    path = tmp_path / "t.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x TEXT)")
    db.execute("INSERT INTO t VALUES ('secret')")
    return path, db


def _reader(path):
    """A connection inside a read transaction: it pins the WAL snapshot until it ends."""
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM t").fetchall()
    return reader


def test_a_checkpoint_that_is_busy_for_a_moment_is_tried_again(monkeypatch):
    """SQLite answers busy at once, without its busy handler, when another connection is checkpointing
    (two deletions compacting together), or raises "locked"; the next try succeeds. Before, the deletion
    answered 503, or 500 for the exception (seen once in the API fuzz, DELETE memory and DELETE thread)."""
    monkeypatch.setattr(compaction, "CHECKPOINT_PAUSE", 0.001)

    class Busy:
        answers = [(1, 0, 0), sqlite3.OperationalError("database table is locked"), (0, 0, 0)]

        def execute(self, sql):
            assert sql == "PRAGMA wal_checkpoint(TRUNCATE)"
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return type("Row", (), {"fetchone": lambda _self: answer})()

    db = Busy()
    assert compaction.checkpoint(db) is False and db.answers == []


def test_a_reader_that_never_lets_go_is_a_retryable_error(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "CHECKPOINT_ATTEMPTS", 3)
    path, writer = _wal_file(tmp_path)
    reader = _reader(path)
    writer.execute("DELETE FROM t")
    with pytest.raises(Retryable) as error:
        SqliteFileCompactor(path).compact()
    assert error.value.code == "storage_busy"
    reader.execute("COMMIT")
