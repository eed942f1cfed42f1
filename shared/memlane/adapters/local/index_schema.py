"""The embedded index's SQLite schema, its statements, and the migration of older files.

One SQLite file holds everything:

- ``stores``   store name → embedding dimension (set by ``ensure_store``).
- ``docs``     one row per (store, memory_id): what it is (``record_type``: memory, message or
               summary), scope, filter fields, text. Kept small, so a filter that reads 10k rows
               of a tenant stays fast.
- ``vectors``  docs.id → float32 embedding, apart from ``docs`` for the same reason.
- ``ann_graphs`` which HNSW graph file (``<file>.ann/``) holds a large tenant, up to which docs.id,
               with the file's digest (index_ann.py, docs/adr/0002-ann-index.md).
- ``docs_fts`` an external-content FTS5 table over ``docs.text`` + ``docs.keywords``
               (``porter unicode61``: English stemming, Unicode case folding), kept in sync
               by triggers so no write path can forget it. A third column holds one token
               per (store, app, tenant), so FTS5 skips other tenants' rows before BM25.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ...domain.errors import DependencyFailed

SCHEMA_VERSION = 2  # 2: docs.record_type (absent in 1: every document of a version-1 file is a memory)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stores (
    store TEXT PRIMARY KEY,
    dim   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS docs (
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
    tkey        TEXT NOT NULL,                      -- tenant_key(store, app_id, tenant_id)
    record_type TEXT NOT NULL DEFAULT 'memory',     -- memory | message | summary
    UNIQUE (store, memory_id)
);
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
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    text, keywords, tkey, content='docs', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts (rowid, text, keywords, tkey) VALUES (new.id, new.text, new.keywords, new.tkey);
END;
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, text, keywords, tkey)
        VALUES ('delete', old.id, old.text, old.keywords, old.tkey);
    DELETE FROM vectors WHERE doc_id = old.id;
END;
CREATE TRIGGER IF NOT EXISTS docs_au AFTER UPDATE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, text, keywords, tkey)
        VALUES ('delete', old.id, old.text, old.keywords, old.tkey);
    INSERT INTO docs_fts (rowid, text, keywords, tkey) VALUES (new.id, new.text, new.keywords, new.tkey);
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

INSERT = """
INSERT INTO docs (store, memory_id, app_id, tenant_id, agent_id, run_id, memory_type, status,
                  created_at, event_time, time, metadata, importance, text, keywords, tkey, record_type)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_VECTOR = "INSERT INTO vectors (doc_id, embedding) SELECT id, ? FROM docs WHERE store = ? AND memory_id = ?"


def open_schema(db: sqlite3.Connection, path: str | Path) -> None:
    """Create the schema, or bring a file of an older version up to this one (in one transaction)."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version not in (0, 1, SCHEMA_VERSION):
        # The index is derived data: the fix is to delete the file and run `memlane reindex`.
        raise DependencyFailed(f"index file {path} has schema version {version}, this code expects "
                               f"{SCHEMA_VERSION}; delete it and rebuild the index")
    db.execute("BEGIN IMMEDIATE")
    try:
        if version == 1:
            for statement in filter(str.strip, _MIGRATE_1.split(";")):
                db.execute(statement)
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        db.execute(_SCOPE_INDEX)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


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
