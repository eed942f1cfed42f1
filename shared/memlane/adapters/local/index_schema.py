"""The embedded index's SQLite schema, its statements, and the migration of older files.

One SQLite file holds everything:

- ``stores``   store name → embedding dimension (set by ``ensure_store``).
- ``docs``     one row per (store, app, tenant, memory_id): what it is (``record_type``: memory, message or
               summary), scope, filter fields, text. Kept small, so a filter that reads 10k rows
               of a tenant stays fast.
- ``vectors``  docs.id → float32 embedding, apart from ``docs`` for the same reason.
- ``ann_graphs`` which HNSW graph file (``<file>.ann/``) holds a large tenant, up to which docs.id,
               with the file's digest (index_ann.py, docs/adr/0002-ann-index.md).

Keyword search has no table: each tenant's term index is built in memory from ``docs.text`` and
``docs.keywords`` (index_terms.py), so its BM25 statistics are the tenant's own. Files of version 2
and before had an FTS5 table for it, dropped by the migration.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from ...domain.errors import DependencyFailed

log = logging.getLogger(__name__)

# How long an opening waits for another process holding the file's write lock: that process may be
# migrating a large file (schema 4 rewrites the docs table: about 8 s for 10⁶ documents on this machine).
OPEN_WAIT_SECONDS = 600.0

# 2: docs.record_type (absent in 1: every document of a version-1 file is a memory)
# 3: no FTS5 table, and no docs.tkey (its tenant token)
# 4: a document's id is unique within its tenant, not its store (UNIQUE (store, memory_id) before)
SCHEMA_VERSION = 4

_DOCS = """(
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: the vector cache is keyed by it
    store       TEXT NOT NULL,
    memory_id   TEXT NOT NULL,
    app_id      TEXT NOT NULL,
    tenant_id   TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    event_time  TEXT,
    time        TEXT NOT NULL,                      -- event_time, else created_at (UTC ISO, fixed width)
    metadata    TEXT NOT NULL,                      -- JSON object
    importance  REAL NOT NULL,
    text        TEXT NOT NULL,
    keywords    TEXT NOT NULL,
    record_type TEXT NOT NULL DEFAULT 'memory',     -- memory | message | summary
    UNIQUE (store, app_id, tenant_id, memory_id)    -- two tenants may each hold an id (docs/security.md)
)"""

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS stores (
    store TEXT PRIMARY KEY,
    dim   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS docs {_DOCS};
CREATE TABLE IF NOT EXISTS vectors (
    doc_id    INTEGER PRIMARY KEY,                  -- docs.id
    embedding BLOB NOT NULL                         -- float32, unit length
);
-- The ANN graph file of a large tenant (index_ann.py): trusted only while this row names it.
CREATE TABLE IF NOT EXISTS ann_graphs (
    store      TEXT NOT NULL,
    app_id     TEXT NOT NULL,
    tenant_id  TEXT NOT NULL,
    file       TEXT NOT NULL,                      -- name in <index file>.ann/
    high_water INTEGER NOT NULL,                   -- largest docs.id in the graph: later rows are added from here
    digest     TEXT NOT NULL,                      -- blake2b of the file: a changed or foreign file is not trusted
    nodes      INTEGER NOT NULL,                   -- vectors in the file: fewer live rows up to high_water = tombstones
    PRIMARY KEY (store, app_id, tenant_id)
);
CREATE TRIGGER IF NOT EXISTS docs_vectors_ad AFTER DELETE ON docs BEGIN
    DELETE FROM vectors WHERE doc_id = old.id;
END;
"""

# Covers the scope + status + record-type part of every filter: the default search reads no table rows for it.
_SCOPE_INDEX = ("CREATE INDEX IF NOT EXISTS docs_scope "
                "ON docs (store, app_id, tenant_id, status, record_type, agent_id, run_id)")

# Version 1 → 2: the column (its default makes every existing document a memory) and the index that covers it.
_MIGRATE_1 = """
ALTER TABLE docs ADD COLUMN record_type TEXT NOT NULL DEFAULT 'memory';
DROP INDEX IF EXISTS docs_scope;
"""

# Version 2 → 3: the FTS5 table and the triggers that kept it (docs_ad deleted the vectors too: the schema's
# docs_vectors_ad does that now), then the tenant token column it was for. Freed pages are zeroed (secure_delete).
_MIGRATE_2 = """
DROP TRIGGER IF EXISTS docs_ai;
DROP TRIGGER IF EXISTS docs_ad;
DROP TRIGGER IF EXISTS docs_au;
DROP TABLE IF EXISTS docs_fts;
ALTER TABLE docs DROP COLUMN tkey;
"""

_COLUMNS = ("id, store, memory_id, app_id, tenant_id, agent_id, run_id, memory_type, status, created_at, event_time, "
            "time, metadata, importance, text, keywords, record_type")

# Version 3 → 4: the table made again under its new UNIQUE (SQLite alters no constraint), with every row's id
# (vectors and graphs are keyed by it) and the table's id counter (its sqlite_sequence row), so no id is reused.
_MIGRATE_3 = f"""
DROP TRIGGER IF EXISTS docs_vectors_ad;
DROP INDEX IF EXISTS docs_scope;
CREATE TABLE docs_v4 {_DOCS};
INSERT INTO docs_v4 ({_COLUMNS}) SELECT {_COLUMNS} FROM docs;
DELETE FROM sqlite_sequence WHERE name = 'docs_v4';
UPDATE sqlite_sequence SET name = 'docs_v4' WHERE name = 'docs';
DROP TABLE docs;
ALTER TABLE docs_v4 RENAME TO docs;
"""

INSERT = """
INSERT INTO docs (store, memory_id, app_id, tenant_id, agent_id, run_id, memory_type, status,
                  created_at, event_time, time, metadata, importance, text, keywords, record_type)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_VECTOR = ("INSERT INTO vectors (doc_id, embedding) SELECT id, ? FROM docs "
                 "WHERE store = ? AND app_id = ? AND tenant_id = ? AND memory_id = ?")


def open_schema(db: sqlite3.Connection, path: str | Path) -> None:
    """Create the schema, or bring a file of an older version up to this one (in one transaction, whose
    lock a process opening the file at the same time waits for: it then reads the version migrated)."""
    _begin(db, path)
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version not in (0, 1, 2, 3, SCHEMA_VERSION):
            # The index is derived data: the fix is to delete the file and run `memlane reindex`.
            raise DependencyFailed(f"index file {path} has schema version {version}, this code expects "
                                   f"{SCHEMA_VERSION}; delete it and rebuild the index")
        for migration in (_MIGRATE_1, _MIGRATE_2, _MIGRATE_3)[version - 1:] if version else ():
            for statement in _statements(migration):
                db.execute(statement)
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        db.execute(_SCOPE_INDEX)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _begin(db: sqlite3.Connection, path: str | Path) -> None:
    """BEGIN IMMEDIATE, waiting past the connection's busy timeout while another process holds the lock."""
    deadline = time.monotonic() + OPEN_WAIT_SECONDS
    while True:
        try:
            db.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            log.warning("index file %s is locked by another process (migrating it?): waiting", path)


def _statements(script: str) -> list[str]:
    """Split a script into statements (a trigger body's inner ';' belongs to its statement)."""
    out: list[str] = []
    current = ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            out.append(current)
            current = ""
    return out
