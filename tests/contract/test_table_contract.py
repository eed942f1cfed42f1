"""Contract of the Table port (memlane/ports.py): every backend must pass every test here.

Backends come from tests/contract/table_backends.py: sqlite, dynamodb-moto and, in the
integration suite, dynamodb-local. A few adapter-specific tests at the end cover what the
contract cannot reach (SDK error translation, retries, short DynamoDB pages, threads).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memlane.domain.errors import ConditionFailed, DependencyFailed, InvalidInput, Retryable
from memlane.ports import MAX_QUERY_LIMIT, MAX_TRANSACT_ITEMS, Check, Delete, Put, Table, Update

from .table_backends import table  # noqa: F401  (the parametrised fixture)

PK = "s#a#t"


def item(sk: str, pk: str = PK, **attrs: Any) -> dict[str, Any]:
    return {"pk": pk, "sk": sk, **attrs}


def fill(table: Table, sks: list[str], pk: str = PK) -> None:
    for sk in sks:
        table.put(item(sk, pk, n=sk))


def walk(table: Table, limit: int, **query: Any) -> tuple[list[str], int]:
    """Follow cursors to the end; return every sk seen and the number of pages."""
    seen: list[str] = []
    cursor, pages = None, 0
    while True:
        page = table.query(PK, limit=limit, cursor=cursor, **query)
        pages += 1
        assert len(page.items) <= limit
        seen += [i["sk"] for i in page.items]
        if page.cursor is None:
            return seen, pages
        assert page.items, "a page with a cursor must not be empty"
        cursor = page.cursor
        assert pages < 1000


# -- get / put --------------------------------------------------------------------------------


def test_get_missing_is_none(table: Table) -> None:
    assert table.get(PK, "nope") is None


def test_put_then_get_returns_the_item(table: Table) -> None:
    table.put(item("k", a="x", b=2))
    assert table.get(PK, "k") == {"pk": PK, "sk": "k", "a": "x", "b": 2}


def test_put_overwrites_the_whole_item(table: Table) -> None:
    table.put(item("k", a="x", b=2))
    table.put(item("k", c=True))
    assert table.get(PK, "k") == {"pk": PK, "sk": "k", "c": True}


def test_if_absent_refuses_an_existing_item(table: Table) -> None:
    table.put(item("k", v=1), if_absent=True)
    with pytest.raises(ConditionFailed):
        table.put(item("k", v=2), if_absent=True)
    assert table.get(PK, "k")["v"] == 1


def test_expect_match_writes(table: Table) -> None:
    table.put(item("k", status="PENDING", v=1))
    table.put(item("k", status="DONE", v=2), expect={"status": "PENDING", "v": 1})
    assert table.get(PK, "k") == item("k", status="DONE", v=2)


def test_expect_mismatch_fails_and_writes_nothing(table: Table) -> None:
    table.put(item("k", status="PENDING", v=1))
    with pytest.raises(ConditionFailed):
        table.put(item("k", status="DONE"), expect={"status": "RUNNING"})
    with pytest.raises(ConditionFailed):  # one of two conditions failing is enough
        table.put(item("k", status="DONE"), expect={"status": "PENDING", "v": 2})
    assert table.get(PK, "k") == item("k", status="PENDING", v=1)


def test_expect_none_means_attribute_absent(table: Table) -> None:
    table.put(item("k", a=1))
    table.put(item("k", a=2, lock="me"), expect={"lock": None})
    with pytest.raises(ConditionFailed):
        table.put(item("k", a=3, lock="you"), expect={"lock": None})
    assert table.get(PK, "k") == item("k", a=2, lock="me")


def test_expect_on_a_missing_item(table: Table) -> None:
    with pytest.raises(ConditionFailed):  # a missing item has no attribute equal to anything
        table.put(item("k", a=1), expect={"a": 0})
    assert table.get(PK, "k") is None
    table.put(item("k", a=1), expect={"a": None})  # ...but every attribute is absent
    assert table.get(PK, "k") == item("k", a=1)


def test_expect_compares_types_like_dynamodb(table: Table) -> None:
    table.put(item("k", flag=1, s="1", b=True))
    for wrong in ({"flag": True}, {"s": 1}, {"b": 1}, {"flag": "1"}):
        with pytest.raises(ConditionFailed):
            table.put(item("k"), expect=wrong)
    table.put(item("k", ok=True), expect={"flag": 1, "s": "1", "b": True})
    assert table.get(PK, "k") == item("k", ok=True)


def test_attribute_names_are_never_spliced_into_expressions(table: Table) -> None:
    odd = {"status": "a", "a.b": "c", "#x": "d", ":v0": "e", "size": "f", "with space": "g"}
    table.put(item("k", **odd))
    table.put(item("k", **odd, done=True), expect=odd)
    new = table.update(PK, "k", {"a.b": "z", "#x": None}, expect={":v0": "e", "size": "f"})
    expected = item("k", **{**odd, "a.b": "z", "done": True})
    del expected["#x"]
    assert new == expected == table.get(PK, "k")


def test_key_attributes_are_validated(table: Table) -> None:
    for bad in ({"pk": "", "sk": "x"}, {"pk": PK, "sk": ""}, {"pk": PK}, {"sk": "x"}, {"pk": 1, "sk": "x"}):
        with pytest.raises(InvalidInput):
            table.put(bad)
    with pytest.raises(InvalidInput):
        table.get(PK, "")


def test_unstorable_values_are_refused(table: Table) -> None:
    for bad in (float("nan"), float("inf"), {1: "x"}, object(), 10**40, 1e200, "\ud800"):
        with pytest.raises(InvalidInput):
            table.put(item("k", v=bad))
    with pytest.raises(InvalidInput):
        table.put({**item("k"), "": 1})
    assert table.get(PK, "k") is None


# -- update -----------------------------------------------------------------------------------


def test_update_sets_and_removes_and_returns_the_new_item(table: Table) -> None:
    table.put(item("k", a=1, b="x", c=[1]))
    new = table.update(PK, "k", {"a": 2, "b": None, "d": {"e": 1.5}, "gone": None})
    assert new == item("k", a=2, c=[1], d={"e": 1.5})
    assert table.get(PK, "k") == new


def test_update_of_a_missing_item_fails_and_creates_nothing(table: Table) -> None:
    with pytest.raises(ConditionFailed):
        table.update(PK, "k", {"a": 1})
    with pytest.raises(ConditionFailed):
        table.update(PK, "k", {"a": None})
    assert table.get(PK, "k") is None


def test_update_with_expect(table: Table) -> None:
    table.put(item("k", status="PENDING"))
    with pytest.raises(ConditionFailed):
        table.update(PK, "k", {"status": "DONE"}, expect={"status": "RUNNING"})
    assert table.get(PK, "k")["status"] == "PENDING"
    assert table.update(PK, "k", {"status": "DONE"}, expect={"status": "PENDING", "x": None})["status"] == "DONE"


def test_update_with_no_changes_checks_and_returns_the_item(table: Table) -> None:
    table.put(item("k", a=1))
    assert table.update(PK, "k", {}) == item("k", a=1)
    with pytest.raises(ConditionFailed):
        table.update(PK, "k", {}, expect={"a": 2})
    with pytest.raises(ConditionFailed):
        table.update(PK, "missing", {})


def test_update_cannot_change_the_key(table: Table) -> None:
    table.put(item("k"))
    for changes in ({"pk": "other"}, {"sk": "other"}, {"sk": None}):
        with pytest.raises(InvalidInput):
            table.update(PK, "k", changes)
    assert table.get(PK, "k") == item("k")


# -- delete -----------------------------------------------------------------------------------


def test_delete(table: Table) -> None:
    table.put(item("k"))
    table.delete(PK, "k")
    assert table.get(PK, "k") is None
    table.delete(PK, "k")  # absent, no condition: a no-op


def test_delete_with_expect(table: Table) -> None:
    table.put(item("k", status="DONE"))
    with pytest.raises(ConditionFailed):
        table.delete(PK, "k", expect={"status": "PENDING"})
    assert table.get(PK, "k") is not None
    table.delete(PK, "k", expect={"status": "DONE"})
    assert table.get(PK, "k") is None
    with pytest.raises(ConditionFailed):  # absent item: the expected value is not there
        table.delete(PK, "k", expect={"status": "DONE"})
    table.delete(PK, "k", expect={"status": None})


# -- batch_get --------------------------------------------------------------------------------


def test_batch_get_keeps_key_order_and_skips_missing(table: Table) -> None:
    fill(table, ["a", "b", "c"])
    table.put(item("a", pk="s#a#t2"))
    got = table.batch_get([(PK, "c"), (PK, "zz"), (PK, "a"), ("s#a#t2", "a"), (PK, "b")])
    assert [(i["pk"], i["sk"]) for i in got] == [(PK, "c"), (PK, "a"), ("s#a#t2", "a"), (PK, "b")]
    assert got[0] == item("c", n="c")
    assert table.batch_get([]) == []


def test_batch_get_repeats_a_repeated_key(table: Table) -> None:
    fill(table, ["a", "b"])
    assert [i["sk"] for i in table.batch_get([(PK, "a"), (PK, "b"), (PK, "a")])] == ["a", "b", "a"]


def test_batch_get_more_than_100_keys(table: Table) -> None:
    present = [f"k{i:03d}" for i in range(0, 250, 2)]  # 125 items
    fill(table, present)
    keys = [(PK, f"k{i:03d}") for i in reversed(range(250))]
    got = table.batch_get(keys)
    assert [i["sk"] for i in got] == sorted(present, reverse=True)


# -- query ------------------------------------------------------------------------------------

SKS = ["MEM", "MEM#", "MEM#01", "MEM#02", "MEM#10", "MEM#1a", "MEN#01", "MSG#x#1", "MSG#x#2", "TASK#1"]


def test_query_prefix(table: Table) -> None:
    fill(table, SKS)
    page = table.query(PK, prefix="MEM#")
    assert [i["sk"] for i in page.items] == ["MEM#", "MEM#01", "MEM#02", "MEM#10", "MEM#1a"]
    assert page.cursor is None
    assert page.items[1] == item("MEM#01", n="MEM#01")


def test_query_range_is_inclusive(table: Table) -> None:
    fill(table, SKS)
    assert [i["sk"] for i in table.query(PK, start="MEM#01", end="MEM#10").items] == ["MEM#01", "MEM#02", "MEM#10"]
    assert [i["sk"] for i in table.query(PK, start="MSG#").items] == ["MSG#x#1", "MSG#x#2", "TASK#1"]
    assert [i["sk"] for i in table.query(PK, end="MEM#").items] == ["MEM", "MEM#"]
    assert [i["sk"] for i in table.query(PK, start="MEM#03", end="MEM#09").items] == []


def test_query_whole_partition_forward_and_backward(table: Table) -> None:
    fill(table, list(reversed(SKS)))
    assert [i["sk"] for i in table.query(PK).items] == sorted(SKS)
    assert [i["sk"] for i in table.query(PK, forward=False).items] == sorted(SKS, reverse=True)
    assert [i["sk"] for i in table.query(PK, prefix="MEM#", forward=False, limit=2).items] == ["MEM#1a", "MEM#10"]


def test_query_on_a_prefix_that_matches_nothing(table: Table) -> None:
    fill(table, SKS)
    for prefix in ("NOPE#", "MEM#3", "A"):
        page = table.query(PK, prefix=prefix)
        assert page.items == [] and page.cursor is None
    page = table.query("s#empty#partition")
    assert page.items == [] and page.cursor is None


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("query", [{}, {"prefix": "MEM#"}, {"start": "MEM#02", "end": "MSG#x#2"}], ids=str)
def test_pagination_walks_everything_once(table: Table, limit: int, forward: bool, query: dict[str, Any]) -> None:
    fill(table, SKS + [f"MEM#{i:02d}x" for i in range(12)])
    full = table.query(PK, limit=MAX_QUERY_LIMIT, forward=forward, **query)
    assert full.cursor is None
    seen, _ = walk(table, limit, forward=forward, **query)
    assert seen == [i["sk"] for i in full.items]
    assert len(seen) == len(set(seen))


def test_pagination_ends_without_an_empty_page(table: Table) -> None:
    fill(table, [f"k{i:02d}" for i in range(20)])
    seen, pages = walk(table, 5)
    assert len(seen) == 20 and pages == 4  # an exact multiple: the 4th page says "no more"
    page = table.query(PK, limit=20)
    assert len(page.items) == 20 and page.cursor is None
    page = table.query(PK, limit=19)
    assert len(page.items) == 19 and page.cursor is not None
    last = table.query(PK, limit=19, cursor=page.cursor)
    assert [i["sk"] for i in last.items] == ["k19"] and last.cursor is None


def test_query_limit_is_clamped(table: Table) -> None:
    fill(table, ["a", "b", "c"])
    for low in (0, -5):
        page = table.query(PK, limit=low)
        assert [i["sk"] for i in page.items] == ["a"] and page.cursor is not None
    page = table.query(PK, limit=10**9)
    assert len(page.items) == 3 and page.cursor is None


def test_more_than_max_query_limit_items_page_at_the_limit(table: Table) -> None:
    fill(table, [f"k{i:04d}" for i in range(MAX_QUERY_LIMIT + 50)])  # puts: moto's transactions copy the table
    page = table.query(PK, limit=10**9)
    assert len(page.items) == MAX_QUERY_LIMIT and page.cursor is not None
    rest = table.query(PK, limit=10**9, cursor=page.cursor)
    assert len(rest.items) == 50 and rest.cursor is None


def test_bad_query_arguments_are_refused(table: Table) -> None:
    with pytest.raises(InvalidInput):
        table.query(PK, prefix="MEM#", start="MEM#0")
    with pytest.raises(InvalidInput):
        table.query(PK, start="b", end="a")
    for cursor in ("not base64 !!", "e30", "bnVsbA", ""):  # garbage, {}, null, empty
        with pytest.raises(InvalidInput):
            table.query(PK, cursor=cursor)


def test_a_cursor_only_continues_its_own_partition(table: Table) -> None:
    fill(table, ["a", "b", "c"], pk="s#a#t2")
    fill(table, ["a", "b", "c"])
    cursor = table.query("s#a#t2", limit=1).cursor
    assert cursor is not None
    assert [i["sk"] for i in table.query("s#a#t2", cursor=cursor).items] == ["b", "c"]
    with pytest.raises(InvalidInput):
        table.query(PK, cursor=cursor)


def test_a_cursor_only_continues_its_own_listing(table: Table) -> None:
    """A cursor of one listing of a partition (its prefix or range) given to another is refused: before, a tasks
    cursor given to the memories list answered an empty last page, and a list that wanted all started over."""
    fill(table, ["MEM#1", "MEM#2", "MEM#3", "TASK#1", "TASK#2", "TASK#3"])
    tasks = table.query(PK, prefix="TASK#", limit=1).cursor
    memories = table.query(PK, prefix="MEM#", limit=1).cursor
    assert [i["sk"] for i in table.query(PK, prefix="TASK#", cursor=tasks).items] == ["TASK#2", "TASK#3"]
    for prefix, cursor in (("MEM#", tasks), ("TASK#", memories)):
        with pytest.raises(InvalidInput) as caught:
            table.query(PK, prefix=prefix, cursor=cursor)
        assert caught.value.code == "invalid_cursor"
    with pytest.raises(InvalidInput):
        table.query(PK, start="MEM#", end="MEM#~", cursor=tasks)
    assert [i["sk"] for i in table.query(PK, cursor=memories).items][:2] == ["MEM#2", "MEM#3"]  # the whole partition


def test_partition_isolation(table: Table) -> None:
    neighbours = ["s#a#t2", "s#a#t#x", "s#a#", "s#a#T", "s#a#t "]
    for pk in [PK, *neighbours]:
        fill(table, ["MEM#1", "MEM#2", "TASK#1"], pk=pk)
    for pk in [PK, *neighbours]:
        for query in ({}, {"prefix": "MEM#"}, {"start": "A", "end": "Z"}, {"forward": False}):
            got = table.query(pk, **query).items
            assert got and {i["pk"] for i in got} == {pk}
        seen: set[str] = set()
        cursor = None
        while True:  # paging never crosses into a neighbour either
            page = table.query(pk, limit=1, cursor=cursor)
            seen |= {i["pk"] for i in page.items}
            if not (cursor := page.cursor):
                break
        assert seen == {pk}
    assert table.get("s#a#t2", "MEM#3") is None


# -- transact ---------------------------------------------------------------------------------


def test_transact_commits_every_kind_of_write(table: Table) -> None:
    fill(table, ["upd", "del", "chk"])
    table.transact([
        Put(item("new", v=1), if_absent=True),
        Update(PK, "upd", {"v": 2, "n": None}, expect={"n": "upd"}),
        Delete(PK, "del", expect={"n": "del"}),
        Check(PK, "chk", expect={"n": "chk"}),
        Check(PK, "ghost", exists=False),
    ])
    assert table.get(PK, "new") == item("new", v=1)
    assert table.get(PK, "upd") == item("upd", v=2)
    assert table.get(PK, "del") is None
    assert table.get(PK, "chk") == item("chk", n="chk")
    table.transact([])  # nothing to do


@pytest.mark.parametrize("failing", [
    Check(PK, "chk", expect={"n": "other"}),
    Check(PK, "chk", exists=False),
    Check(PK, "ghost"),
    Put(item("chk"), if_absent=True),
    Put(item("chk"), expect={"n": None}),
    Update(PK, "ghost", {"v": 1}),
    Update(PK, "chk", {"v": 1}, expect={"v": 0}),
    Delete(PK, "chk", expect={"n": "x"}),
], ids=repr)
def test_transact_rolls_back_when_any_condition_fails(table: Table, failing: Any) -> None:
    fill(table, ["upd", "del", "chk"])
    before = table.query(PK).items
    with pytest.raises(ConditionFailed):
        table.transact([
            Put(item("new", v=1)),
            Update(PK, "upd", {"v": 2}),
            Delete(PK, "del"),
            failing,
        ])
    assert table.query(PK).items == before


def test_transact_limits(table: Table) -> None:
    table.transact([Put(item(f"k{i:03d}")) for i in range(MAX_TRANSACT_ITEMS)])
    assert len(table.query(PK, limit=MAX_QUERY_LIMIT).items) == MAX_TRANSACT_ITEMS
    with pytest.raises(InvalidInput):
        table.transact([Put(item(f"x{i:03d}")) for i in range(MAX_TRANSACT_ITEMS + 1)])
    assert table.get(PK, "x000") is None


def test_transact_refuses_two_writes_to_one_key(table: Table) -> None:
    fill(table, ["a"])
    for pair in (
        [Put(item("b", v=1)), Put(item("b", v=2))],
        [Put(item("b")), Check(PK, "b", exists=False)],
        [Update(PK, "a", {"v": 1}), Delete(PK, "a")],
    ):
        with pytest.raises(InvalidInput):
            table.transact([Put(item("c")), *pair])
    assert [i["sk"] for i in table.query(PK).items] == ["a"]
    table.transact([Put(item("a", pk="s#a#t2")), Put(item("a", v=1))])  # same sk, other pk: fine


# -- values -----------------------------------------------------------------------------------

VALUES: dict[str, Any] = {
    "float": 0.1,
    "float_sum": 0.1 + 0.2,
    "tiny": 1.5e-7,
    "negative": -2.75,
    "precise": 3.141592653589793,
    "int": 42,
    "zero": 0,
    "negative_int": -7,
    "big_int": 2**63 + 1,
    "bool_true": True,
    "bool_false": False,
    "null": None,
    "empty_str": "",
    "text": "héllo wörld — 中文 — 😀 — \u0301e",
    "list": [1, 2.5, "x", False, None, [], {}],
    "nested": {"a": {"b": [{"c": 0.25, "d": [True, {"e": "ü"}]}]}, "f": []},
    "empty_dict": {},
    "ttl": 4102444800,  # expires_at-style attribute: just data here
}


def test_values_round_trip_exactly(table: Table) -> None:
    table.put(item("k", **VALUES))
    got = table.get(PK, "k")
    assert got == item("k", **VALUES)
    for name, value in VALUES.items():  # == says 1 == 1.0 == True; the types must hold too
        assert _types(got[name]) == _types(value), name
    assert table.query(PK).items == [got] == table.batch_get([(PK, "k")])
    assert table.update(PK, "k", {"more": VALUES["nested"]})["more"] == VALUES["nested"]


def test_integral_floats_keep_their_value(table: Table) -> None:
    # Real DynamoDB normalises 2.0 to 2, so only the value (not float-ness) is contract here.
    table.put(item("k", a=2.0, b=-0.0, c=1e20))
    got = table.get(PK, "k")
    assert got["a"] == 2 and got["b"] == 0 and got["c"] == 10**20


def test_unicode_keys_sort_by_code_point(table: Table) -> None:
    sks = ["a", "z", "é", "中", "😀", "Z", "a\u0301", "~", "\uffff"]
    fill(table, sks)
    assert [i["sk"] for i in table.query(PK).items] == sorted(sks)
    assert [i["sk"] for i in table.query(PK, prefix="a").items] == ["a", "a\u0301"]
    assert table.get(PK, "😀") == item("😀", n="😀")
    fill(table, ["x"], pk="s#ü#😀")
    assert table.query("s#ü#😀").items == [item("x", pk="s#ü#😀", n="x")]


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


# ---------------------------------------------------------------------------------------------
# Adapter specifics
# ---------------------------------------------------------------------------------------------


def test_sqlite_persists_across_reopen(tmp_path: Path) -> None:
    from memlane.adapters.local.sqlite_table import SqliteTable

    path = tmp_path / "sub" / "t.sqlite3"
    first = SqliteTable(path)
    first.put(item("k", v=1.5))
    first.close()
    second = SqliteTable(path)
    assert second.get(PK, "k") == item("k", v=1.5)
    second.close()


def test_sqlite_conditional_writes_are_atomic_across_threads(tmp_path: Path) -> None:
    from memlane.adapters.local.sqlite_table import SqliteTable

    table = SqliteTable(tmp_path / "t.sqlite3")
    table.put(item("counter", n=0))
    wins = []

    def bump() -> None:
        for _ in range(50):
            while True:
                n = table.get(PK, "counter")["n"]
                try:
                    table.update(PK, "counter", {"n": n + 1}, expect={"n": n})
                    wins.append(1)
                    break
                except ConditionFailed:
                    continue

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 400 and table.get(PK, "counter")["n"] == 400
    table.close()


class _Stub:
    """A DynamoDB client that raises a ClientError with the given code."""

    def __init__(self, code: str, **extra: Any):
        self.code, self.extra = code, extra

    def __getattr__(self, operation: str) -> Any:
        from botocore.exceptions import ClientError

        def call(**_: Any) -> Any:
            raise ClientError({"Error": {"Code": self.code, "Message": "stub"}, **self.extra}, operation)

        return call


@pytest.mark.parametrize(("code", "extra", "expected"), [
    ("ConditionalCheckFailedException", {}, ConditionFailed),
    ("TransactionCanceledException",
     {"CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}]}, ConditionFailed),
    ("TransactionCanceledException", {"CancellationReasons": [{"Code": "TransactionConflict"}]}, Retryable),
    ("ProvisionedThroughputExceededException", {}, Retryable),
    ("ThrottlingException", {}, Retryable),
    ("RequestLimitExceeded", {}, Retryable),
    ("TransactionConflictException", {}, Retryable),
    ("ValidationException", {}, InvalidInput),
    ("ResourceNotFoundException", {}, DependencyFailed),
    ("SomethingNew", {}, DependencyFailed),
    # a DynamoDB-compatible server's error page (a shared-engines trial: its HTML was the client's 502 message)
    ("500", {"ResponseMetadata": {"HTTPStatusCode": 500}}, Retryable),
    ("AccessDeniedException", {"ResponseMetadata": {"HTTPStatusCode": 500}}, DependencyFailed),  # an error of the API
])
def test_dynamodb_errors_are_translated(code: str, extra: dict[str, Any], expected: type) -> None:
    from memlane.adapters.dynamodb.table import DynamoDBTable

    t = DynamoDBTable("t", client=_Stub(code, **extra))
    for call in (lambda: t.get(PK, "k"), lambda: t.put(item("k")), lambda: t.query(PK),
                 lambda: t.transact([Put(item("k"))]), lambda: t.batch_get([(PK, "k")])):
        with pytest.raises(expected) as info:
            call()
        assert type(info.value) is expected


@pytest.fixture
def moto_client(monkeypatch: pytest.MonkeyPatch) -> Any:
    import boto3
    from moto import mock_aws

    from memlane.adapters.dynamodb.table import create_table

    for name, value in (("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t"), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "t")
        yield client


class _Flaky:
    """Wraps a real client: BatchGetItem leaves all but one key unprocessed; Query stops after
    two items with a LastEvaluatedKey, like a 1 MB page would."""

    def __init__(self, client: Any):
        self.client = client
        self.batch_calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.batch_calls += 1
        (name, request), = RequestItems.items()
        keys = request["Keys"]
        resp = self.client.batch_get_item(RequestItems={name: {**request, "Keys": keys[:1]}})
        if len(keys) > 1:
            resp["UnprocessedKeys"] = {name: {**request, "Keys": keys[1:]}}
        return resp

    def query(self, **params: Any) -> dict[str, Any]:
        resp = self.client.query(**{**params, "Limit": min(params.get("Limit", 2), 2)})
        if resp.get("Items") and "LastEvaluatedKey" not in resp:
            # DynamoDB may hand back a LastEvaluatedKey even on the last page.
            resp["LastEvaluatedKey"] = {k: resp["Items"][-1][k] for k in ("pk", "sk")}
        return resp

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_dynamodb_batch_get_retries_unprocessed_keys(moto_client: Any) -> None:
    from memlane.adapters.dynamodb import table as module

    flaky = _Flaky(moto_client)
    t = module.DynamoDBTable("t", client=flaky)
    delays: list[float] = []
    t._sleep = delays.append
    fill(t, ["a", "b", "c", "d"])
    assert [i["sk"] for i in t.batch_get([(PK, s) for s in "dcbax"])] == ["d", "c", "b", "a"]
    assert flaky.batch_calls == 5 and len(delays) == 4 and delays[0] < delays[-1]
    # Keys that never get processed end in Retryable, not in a silently short answer.
    fill(t, [f"k{i}" for i in range(20)])
    with pytest.raises(Retryable):
        t.batch_get([(PK, f"k{i}") for i in range(20)])
    assert len(delays) == 4 + module.BATCH_GET_ATTEMPTS - 1


def test_dynamodb_query_survives_short_pages_and_stray_last_keys(moto_client: Any) -> None:
    from memlane.adapters.dynamodb.table import DynamoDBTable

    t = DynamoDBTable("t", client=_Flaky(moto_client))
    fill(t, [f"k{i:02d}" for i in range(11)])
    page = t.query(PK, limit=5)
    assert [i["sk"] for i in page.items] == [f"k{i:02d}" for i in range(5)] and page.cursor
    seen, pages = walk(t, 5)
    assert seen == [f"k{i:02d}" for i in range(11)] and pages == 3
    page = t.query(PK, limit=11)
    assert len(page.items) == 11 and page.cursor is None


def test_create_table_is_idempotent_and_enables_ttl(moto_client: Any) -> None:
    from memlane.adapters.dynamodb.table import KEY_SCHEMA, TTL_ATTRIBUTE, create_table

    create_table(moto_client, "t")  # already there: fine
    described = moto_client.describe_table(TableName="t")["Table"]
    assert described["KeySchema"] == KEY_SCHEMA
    ttl = moto_client.describe_time_to_live(TableName="t")["TimeToLiveDescription"]
    assert ttl["AttributeName"] == TTL_ATTRIBUTE and ttl["TimeToLiveStatus"] == "ENABLED"
