"""A deletion's compaction waits out a reader that holds the write-ahead log for a moment (a worker's
read); one that holds it longer neither stops the server nor fails the deletion: the log is truncated in the
background once it lets go."""

import sqlite3
import threading
import time

from memlane.adapters.local import compaction
from memlane.adapters.local.compaction import SqliteFileCompactor


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
            if sql.startswith("PRAGMA busy_timeout"):
                return type("Row", (), {"fetchone": lambda _self: (5000,)})()
            assert sql == "PRAGMA wal_checkpoint(TRUNCATE)"
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return type("Row", (), {"fetchone": lambda _self: answer})()

    db = Busy()
    assert compaction.checkpoint(db) is False and db.answers == []


def test_a_reader_that_holds_the_log_neither_stops_writers_nor_keeps_the_deleted_bytes(tmp_path, monkeypatch):
    """A deletion trial: with an `sqlite3` shell (or a backup tool) reading the file, a deletion's checkpoint waited
    for it 20 x 30 s while holding off every writer — the whole server stopped for ten minutes — then answered 503
    although the deletion was committed, and the deleted text stayed in the log. Now each try waits for no reader,
    a writer goes on meanwhile, and the log is truncated in the background once the reader lets go."""
    monkeypatch.setattr(compaction, "RETRY_SECONDS", 0.05, raising=False)  # absent before the fix
    path, writer = _wal_file(tmp_path)
    reader = _reader(path)
    writer.execute("DELETE FROM t")
    compactor = SqliteFileCompactor(path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA busy_timeout=10000")
    wrote = []

    def write_meanwhile():
        time.sleep(0.2)  # while the compaction tries
        started = time.monotonic()
        other.execute("INSERT INTO t VALUES ('another tenant')")
        wrote.append(time.monotonic() - started)

    thread = threading.Thread(target=write_meanwhile)
    started = time.monotonic()
    thread.start()
    compactor.compact()  # returns: no error, no wait on the reader past its tries
    took = time.monotonic() - started
    thread.join()
    assert took < 5 and wrote and wrote[0] < 1.0
    assert compactor.later.pending and b"secret" in (tmp_path / "t.db-wal").read_bytes()
    reader.execute("COMMIT")
    deadline = time.monotonic() + 5
    while compactor.later.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not compactor.later.pending
    assert (tmp_path / "t.db-wal").stat().st_size == 0


def test_the_index_tries_its_held_log_again_without_holding_searches_for_long(tmp_path, monkeypatch):
    """A regression trial: while a reader held index.db, the background retry made its second of tries under the lock
    every search takes — each tenant's searches stalled about a second every five. A retry tries once."""
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    monkeypatch.setattr(compaction, "RETRY_SECONDS", 0.02)
    index = EmbeddedIndex(tmp_path / "index.db")
    reader = sqlite3.connect(tmp_path / "index.db", isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
    index._db.execute("CREATE TABLE scratch (x TEXT)")  # frames past the reader's snapshot: the log is held
    index.compact()
    assert index._truncation.pending
    waits = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # as searches take the lock
        started = time.monotonic()
        with index._lock:
            waits.append(time.monotonic() - started)
        time.sleep(0.005)
    reader.execute("COMMIT")
    assert max(waits) < 0.3, max(waits)


def _left_in_free_space(path, marker: bytes) -> None:
    """A row holding `marker` written and deleted by a connection that does not zero what it frees: its bytes stay in
    the page's unused space, as a trial found earlier copies of rows there after deletions cut short by kill -9."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA secure_delete=OFF")
    db.execute("CREATE TABLE IF NOT EXISTS scratch (x TEXT)")
    db.execute("INSERT INTO scratch VALUES (?)", (marker.decode() * 20,))
    db.execute("DELETE FROM scratch")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert marker in path.read_bytes()


def test_a_rewrite_leaves_no_earlier_copy_of_a_row_in_the_unused_space_of_a_page(tmp_path):
    """A deletion trial (session 30): after a thread deletion or an erasure cut short by kill -9 and finished by its
    job, earlier copies of deleted rows stayed in the unused space of live pages (5 of 5 such deletions), out of
    reach of secure_delete and of the log's truncation. A rewrite (VACUUM) leaves none."""
    path, db = _wal_file(tmp_path)
    db.close()
    _left_in_free_space(path, b"Zqxresidue")
    SqliteFileCompactor(path).compact()
    assert b"Zqxresidue" in path.read_bytes()  # a checkpoint moves pages; it does not clear their unused space
    SqliteFileCompactor(path).compact(rewrite=True)
    assert b"Zqxresidue" not in path.read_bytes() and b"secret" in path.read_bytes()
    assert not (tmp_path / "t.db-wal").exists() or (tmp_path / "t.db-wal").stat().st_size == 0


def test_the_embedded_index_rewritten_keeps_its_document_ids_and_answers_alike(tmp_path):
    """The index's graphs and vector caches are keyed by `docs.id`: a rewrite must keep every id (AUTOINCREMENT keys
    are kept by VACUUM; an implicit rowid would not be)."""
    from datetime import datetime, timezone

    from memlane.adapters.local.embedded_index import EmbeddedIndex
    from memlane.domain.models import Memory
    from memlane.domain.scope import Scope
    from memlane.ports import IndexQuery
    from memlane.domain.scope import ScopeFilter

    index = EmbeddedIndex(tmp_path / "index.db")
    index.ensure_store("s", 3)
    when = datetime(2025, 1, 1, tzinfo=timezone.utc)
    docs = [(Memory(memory_id=f"m{i}", scope=Scope(app_id="a", tenant_id="t"), text=f"note {i} about cats",
                    created_at=when, updated_at=when), [1.0, float(i), 0.5]) for i in range(30)]
    index.upsert("s", docs)
    index.delete("s", [f"m{i}" for i in range(0, 30, 3)], app_id="a", tenant_id="t")
    ids = index._db.execute("SELECT id, memory_id FROM docs ORDER BY id").fetchall()
    asked = IndexQuery(scope=ScopeFilter(app_id="a", tenant_id="t"), text="cats", vector=[1.0, 2.0, 0.5], k=10)
    before = index.search("s", asked)
    _left_in_free_space(tmp_path / "index.db", b"Zqxresidue")
    index.compact(rewrite=True)
    assert b"Zqxresidue" not in (tmp_path / "index.db").read_bytes()
    assert index._db.execute("SELECT id, memory_id FROM docs ORDER BY id").fetchall() == ids
    assert index.search("s", asked) == before
    index.close()


def _until(check, seconds=5.0):
    end = time.monotonic() + seconds
    while not check() and time.monotonic() < end:
        time.sleep(0.02)
    return check()


def test_rewrites_close_together_are_one_more_later_not_one_each(tmp_path, monkeypatch):
    """A regression trial (session 31): each erasure rewrote both files at once, an empty tenant's too; 47 erasures in
    25 s held another tenant's writes (754 → 100 write+search pairs). The second of two rewrites within
    REWRITE_EVERY_SECONDS waits for it to pass, in the background, and the residue goes then."""
    monkeypatch.setattr(compaction, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(compaction, "REWRITE_EVERY_SECONDS", 0.5)
    path, db = _wal_file(tmp_path)
    db.close()
    compactor = SqliteFileCompactor(path)
    made: list[float] = []
    vacuum = compactor.rewrites._rewrite
    compactor.rewrites._rewrite = lambda: (vacuum(), made.append(time.monotonic()))  # counted once made
    compactor.compact(rewrite=True)
    _left_in_free_space(path, b"Zqxresidue")
    for _ in range(5):
        compactor.compact(rewrite=True)
    assert len(made) == 1 and b"Zqxresidue" in path.read_bytes()  # not at once
    assert _until(lambda: len(made) == 2) and b"Zqxresidue" not in path.read_bytes()
    assert made[1] - made[0] >= 0.5
    time.sleep(0.7)
    assert len(made) == 2  # the five asks made one rewrite


def test_a_rewrite_waits_for_a_reader_to_let_go_of_the_log(tmp_path, monkeypatch):
    """A regression trial (session 31): with a reader holding the file, each erasure's VACUUM went into the log — a
    copy of the whole file each time (table.db-wal 0.2 → 117 MB after 6 erasures). Now the first may (a reader of an
    empty log does not show), the next ones wait for the reader, however soon they come."""
    monkeypatch.setattr(compaction, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(compaction, "CHECKPOINT_ATTEMPTS", 2)
    monkeypatch.setattr(compaction, "REWRITE_EVERY_SECONDS", 0.0)
    path, db = _wal_file(tmp_path)
    db.executemany("INSERT INTO t VALUES (?)", [("x" * 2000,) for _ in range(500)])  # a file of ~1 MB
    db.close()
    _left_in_free_space(path, b"Zqxresidue")
    reader = _reader(path)
    wal = tmp_path / "t.db-wal"
    logged = wal.stat().st_size if wal.exists() else 0
    compactor = SqliteFileCompactor(path)
    for _ in range(3):
        compactor.compact(rewrite=True)
    assert wal.stat().st_size - logged < 1.5 * path.stat().st_size  # one copy of the file in the log at most
    assert b"Zqxresidue" in path.read_bytes()
    reader.close()
    assert _until(lambda: b"Zqxresidue" not in path.read_bytes())


def test_a_compaction_owed_in_the_background_is_logged_once_not_at_every_try(monkeypatch, caplog):
    """A trial (session 32): after an erasure, "rewritten in the background ..." was logged every five seconds for up
    to a minute: every failed try scheduled the next one with the same warning."""
    import logging

    monkeypatch.setattr(compaction, "RETRY_SECONDS", 0.01)
    tries = []

    def attempt():
        tries.append(1)
        return len(tries) >= 5

    later = compaction.Later(attempt, "t.db")
    with caplog.at_level(logging.WARNING, logger=compaction.__name__):
        later.schedule()
        deadline = time.monotonic() + 2.0
        while later.pending and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(tries) == 5 and not later.pending
    assert len([r for r in caplog.records if "t.db" in r.getMessage()]) == 1
