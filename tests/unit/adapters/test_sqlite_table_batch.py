"""The SQLite table reads a batch of keys in a few statements, not one per key: a search loads its
~100 candidates with `batch_get`, and a statement per key was a sixth of a context card's time."""

from __future__ import annotations

from memlane.adapters.local.sqlite_table import SqliteTable

PK = "s#app#t1"


def _selects(table: SqliteTable, keys: list[tuple[str, str]]) -> tuple[list[dict], list[str]]:
    statements: list[str] = []
    table.database.conn.set_trace_callback(statements.append)
    try:
        got = table.batch_get(keys)
    finally:
        table.database.conn.set_trace_callback(None)
    return got, [s for s in statements if s.lstrip().upper().startswith("SELECT")]


def test_a_batch_of_one_partition_is_read_in_one_statement(tmp_path) -> None:
    table = SqliteTable(tmp_path / "table.db")
    for i in range(0, 100, 2):
        table.put({"pk": PK, "sk": f"MEM#{i:03d}", "n": i})
    keys = [(PK, f"MEM#{i:03d}") for i in reversed(range(100))]
    got, selects = _selects(table, keys)
    assert [i["n"] for i in got] == list(range(98, -1, -2))  # the keys' order, missing ones skipped
    assert len(selects) == 1


def test_a_batch_over_two_partitions_takes_a_statement_each(tmp_path) -> None:
    table = SqliteTable(tmp_path / "table.db")
    table.put({"pk": PK, "sk": "a", "n": 1})
    table.put({"pk": "s#app#t2", "sk": "a", "n": 2})
    got, selects = _selects(table, [("s#app#t2", "a"), (PK, "a"), (PK, "b"), (PK, "a")])
    assert [(i["pk"], i["n"]) for i in got] == [("s#app#t2", 2), (PK, 1), (PK, 1)]
    assert len(selects) == 2


def test_a_batch_larger_than_sqlites_variable_limit(tmp_path) -> None:
    # More keys than a statement may bind (999 on older SQLite builds): read in chunks, none lost.
    table = SqliteTable(tmp_path / "table.db")
    with table.database.transaction() as conn:
        conn.executemany("INSERT INTO items (pk, sk, body) VALUES (?, ?, ?)",
                         [(PK, f"k{i:05d}", f'{{"n":{i}}}') for i in range(2500)])
    got = table.batch_get([(PK, f"k{i:05d}") for i in range(2500)])
    assert [i["n"] for i in got] == list(range(2500))
