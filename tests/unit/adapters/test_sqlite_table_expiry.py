"""The SQLite table deletes what has expired, as DynamoDB's TTL does on AWS: the local service's sweeper calls it."""

from __future__ import annotations

import sqlite3

from memlane.adapters.local.sqlite_table import TTL_ATTRIBUTE, SqliteTable

PK = "s#app#t1"


def test_only_items_expired_at_the_time_go_at_most_limit_at_a_time(tmp_path) -> None:
    table = SqliteTable(tmp_path / "table.db")
    for i in range(10):
        table.put({"pk": PK, "sk": f"GONE#{i}", TTL_ATTRIBUTE: 1000 + i})
    table.put({"pk": PK, "sk": "MEM#kept", "text": "no expiry"})
    assert table.expire(999) == 0
    assert table.expire(1004, limit=3) == 3 and table.expire(1004, limit=3) == 2 and table.expire(1004) == 0
    left = [i["sk"] for i in table.query(PK, limit=100).items]
    assert left == [f"GONE#{i}" for i in range(5, 10)] + ["MEM#kept"]


def test_an_item_written_again_without_expiry_is_kept(tmp_path) -> None:
    table = SqliteTable(tmp_path / "table.db")
    table.put({"pk": PK, "sk": "GONE#m", TTL_ATTRIBUTE: 1000})
    table.put({"pk": PK, "sk": "GONE#m", "evidence": ["msg"]})
    assert table.expire(2000) == 0 and table.get(PK, "GONE#m") is not None


def test_a_file_written_before_expiry_gets_its_index_on_open_and_the_search_uses_it(tmp_path) -> None:
    path = tmp_path / "table.db"
    old = sqlite3.connect(path)  # the layout of a file from before: the table alone
    old.execute("CREATE TABLE items (pk TEXT NOT NULL, sk TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (pk, sk))"
                " WITHOUT ROWID")
    old.execute("INSERT INTO items VALUES (?, ?, ?)", (PK, "GONE#m", '{"expires_at": 1000}'))
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()
    table = SqliteTable(path)
    plan = table.database.conn.execute(
        f"EXPLAIN QUERY PLAN SELECT pk, sk FROM items WHERE json_extract(body, '$.{TTL_ATTRIBUTE}') IS NOT NULL"
        f" AND json_extract(body, '$.{TTL_ATTRIBUTE}') <= 1 LIMIT 1").fetchall()
    assert "items_expiry" in str(plan)  # not a scan of every item
    assert table.expire(1000) == 1 and table.get(PK, "GONE#m") is None
