"""The `Table` port over one SQLite file: the embedded twin of adapters/dynamodb/table.py.

Semantics follow DynamoDB (see ports.py); tests/contract/test_table_contract.py runs the same
suite against both, so anything that differs here is a bug in one of them.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ...domain.errors import ConditionFailed, DependencyFailed, InvalidInput
from ...domain.schema import Described
from ...ports import MAX_QUERY_LIMIT, MAX_TRANSACT_ITEMS, Check, Delete, Item, Page, Put, Update, Write
from .database import Database

KEY_ATTRIBUTES = ("pk", "sk")
_BATCH_KEYS = 500  # keys per statement of batch_get: under 999, the variable limit of older SQLite builds
# The file's layout (PRAGMA user_version of table.db; the durable queue's tables share the file and this number).
SCHEMA_VERSION = 1
# The attribute DynamoDB's TTL reads (epoch seconds), as in adapters/dynamodb/table.py: `expire` does its work here.
TTL_ATTRIBUTE = "expires_at"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    pk   TEXT NOT NULL,
    sk   TEXT NOT NULL,
    body TEXT NOT NULL,  -- JSON object of the item's non-key attributes
    PRIMARY KEY (pk, sk)
) WITHOUT ROWID
"""
# The items that expire (audit rows, deletion markers), for `expire`; made on the first open of an older file too.
_EXPIRY_INDEX = """
CREATE INDEX IF NOT EXISTS items_expiry ON items (json_extract(body, '$.{ttl}'))
    WHERE json_extract(body, '$.{ttl}') IS NOT NULL
"""


class SqliteTable:
    """A single-table key/value store in one SQLite file.

    One connection shared by the worker threads and the HTTP threads, serialised by a lock;
    writes run in `BEGIN IMMEDIATE` transactions, so nothing interleaves between a condition
    check and its write. The durable queue shares the file (adapters/local/database.py).
    """

    def __init__(self, path: str | Path | Database):
        # A Database given: the table shares its file and connection with the durable queue.
        self.database = path if isinstance(path, Database) else Database(path)
        self.path = self.database.path
        self._db, self._lock = self.database.conn, self.database.lock
        with self._lock:
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:  # a newer memlane's file: this code would misread it
                raise DependencyFailed(f"table file {self.path} has schema version {version}, this code expects "
                                       f"{SCHEMA_VERSION}; run the memlane version that wrote it")
            self._db.execute(_SCHEMA)
            self._db.execute(_EXPIRY_INDEX.format(ttl=TTL_ATTRIBUTE))
            if version < SCHEMA_VERSION:
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self.database.close()

    # -- schema (services/schema.py) ---------------------------------------------------------
    def describe(self) -> Described:
        with self._lock:
            found = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        return Described(Path(self.path).name, SCHEMA_VERSION, found)

    def create_missing(self) -> list[str]:
        return []  # opening the file made it

    # -- reads -----------------------------------------------------------------------------
    def get(self, pk: str, sk: str) -> Item | None:
        check_key(pk, sk)
        with self._lock:
            return self._get(pk, sk)

    def batch_get(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        wanted = [(pk, sk) for pk, sk in keys]
        for pk, sk in wanted:
            check_key(pk, sk)
        by_pk: dict[str, list[str]] = {}
        for pk, sk in dict.fromkeys(wanted):
            by_pk.setdefault(pk, []).append(sk)
        found: dict[tuple[str, str], Item] = {}
        with self._lock:
            # One statement per partition (a search's candidates share the tenant's), in chunks that
            # stay under SQLite's bound-variable limit, instead of one statement per key.
            for pk, sks in by_pk.items():
                for i in range(0, len(sks), _BATCH_KEYS):
                    chunk = sks[i:i + _BATCH_KEYS]
                    rows = self._db.execute(f"SELECT pk, sk, body FROM items WHERE pk = ? AND sk IN "
                                            f"({','.join('?' * len(chunk))})", (pk, *chunk)).fetchall()
                    found.update(((row[0], row[1]), _row_to_item(row)) for row in rows)
        return [found[key] for key in wanted if key in found]

    def query(
        self,
        pk: str,
        *,
        prefix: str | None = None,
        start: str | None = None,
        end: str | None = None,
        forward: bool = True,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        check_query(pk, prefix, start, end)
        limit = clamp_limit(limit)
        where, args = ["pk = ?"], [pk]
        if prefix:
            # A range instead of LIKE/GLOB: no escaping and it uses the primary key index.
            where.append("sk >= ?")
            args.append(prefix)
            upper = _prefix_upper_bound(prefix)
            if upper is not None:
                where.append("sk < ?")
                args.append(upper)
        if start is not None:
            where.append("sk >= ?")
            args.append(start)
        if end is not None:
            where.append("sk <= ?")
            args.append(end)
        if cursor is not None:
            where.append("sk > ?" if forward else "sk < ?")
            args.append(decode_cursor(pk, cursor, prefix, start, end))
        sql = (f"SELECT pk, sk, body FROM items WHERE {' AND '.join(where)} "
               f"ORDER BY sk {'ASC' if forward else 'DESC'} LIMIT ?")
        with self._lock:
            rows = self._db.execute(sql, (*args, limit + 1)).fetchall()  # +1: is there more?
        items = [_row_to_item(row) for row in rows[:limit]]
        more = len(rows) > limit
        return Page(items=items, cursor=encode_cursor(pk, items[-1]["sk"]) if more else None)

    # -- writes ----------------------------------------------------------------------------
    def put(self, item: Item, *, if_absent: bool = False, expect: dict[str, Any] | None = None) -> None:
        self._apply([Put(item, if_absent=if_absent, expect=expect)])

    def update(self, pk: str, sk: str, changes: dict[str, Any], *, expect: dict[str, Any] | None = None) -> Item:
        new = self._apply([Update(pk, sk, changes, expect=expect)])[0]
        assert new is not None
        return new

    def delete(self, pk: str, sk: str, *, expect: dict[str, Any] | None = None) -> None:
        self._apply([Delete(pk, sk, expect=expect)])

    def expire(self, now: int, *, limit: int = 1000) -> int:
        """Delete up to `limit` items whose TTL attribute is at or before `now` (epoch seconds), as DynamoDB's TTL
        does on AWS: audit rows past their retention, deletion markers no job can need any more; how many."""
        with self._lock, self._transaction():
            keys = self._db.execute(
                f"SELECT pk, sk FROM items WHERE json_extract(body, '$.{TTL_ATTRIBUTE}') IS NOT NULL"
                f" AND json_extract(body, '$.{TTL_ATTRIBUTE}') <= ? LIMIT ?", (now, limit)).fetchall()
            self._db.executemany("DELETE FROM items WHERE pk = ? AND sk = ?", keys)
        return len(keys)

    def transact(self, writes: Sequence[Write]) -> None:
        validate_transaction(writes)
        if writes:
            self._apply(writes)

    def _apply(self, writes: Sequence[Write]) -> list[Item | None]:
        """Check every condition, then write everything, in one transaction. Returns the new items."""
        for write in writes:
            validate_write(write)  # refuse bad input before touching the file
        with self._lock, self._transaction():
            currents = [self._get(*write_key(w)) for w in writes]
            for write, current in zip(writes, currents):
                if not condition_holds(write, current):
                    raise ConditionFailed(f"condition failed on item {write_key(write)!r}")
            # Keys are distinct (validate_transaction), so the order of the writes is irrelevant.
            results: list[Item | None] = []
            for write, current in zip(writes, currents):
                new: Item | None = None
                if isinstance(write, Put):
                    new = dict(write.item)
                elif isinstance(write, Update):
                    assert current is not None  # condition_holds requires it
                    new = apply_changes(current, write.changes)
                elif isinstance(write, Delete):
                    self._db.execute("DELETE FROM items WHERE pk = ? AND sk = ?", write_key(write))
                if new is not None:
                    self._db.execute("INSERT OR REPLACE INTO items (pk, sk, body) VALUES (?, ?, ?)",
                                     (*write_key(write), _dump_body(new)))
                results.append(new)
            return results

    def _transaction(self) -> AbstractContextManager[Any]:
        # BEGIN IMMEDIATE, or a savepoint inside the queue's commit (the job joins this transaction).
        return self.database.transaction()

    def _get(self, pk: str, sk: str) -> Item | None:
        row = self._db.execute("SELECT pk, sk, body FROM items WHERE pk = ? AND sk = ?", (pk, sk)).fetchone()
        return _row_to_item(row) if row else None


# ---------------------------------------------------------------------------------------------
# Shared rules. The DynamoDB adapter imports the validators below, so both refuse the same
# input with the same error before any I/O.
# ---------------------------------------------------------------------------------------------


def clamp_limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_QUERY_LIMIT))


def write_key(write: Write) -> tuple[str, str]:
    if isinstance(write, Put):
        return write.item.get("pk"), write.item.get("sk")  # type: ignore[return-value]
    return write.pk, write.sk


def validate_transaction(writes: Sequence[Write]) -> None:
    if len(writes) > MAX_TRANSACT_ITEMS:
        raise InvalidInput(f"a transaction holds at most {MAX_TRANSACT_ITEMS} writes, got {len(writes)}",
                           code="too_many_writes")
    seen: set[tuple[str, str]] = set()
    for write in writes:
        key = write_key(write)
        if key in seen:  # DynamoDB refuses two operations on one item in a transaction
            raise InvalidInput(f"item {key!r} appears twice in one transaction", code="duplicate_write")
        seen.add(key)


def validate_write(write: Write) -> None:
    if isinstance(write, Put):
        if not isinstance(write.item, dict):
            raise InvalidInput("an item must be a dict")
        check_key(write.item.get("pk"), write.item.get("sk"))
        check_value(write.item)
    elif isinstance(write, Update):
        check_key(write.pk, write.sk)
        if any(k in KEY_ATTRIBUTES for k in write.changes):
            raise InvalidInput("an update cannot change the key attributes pk or sk")
        check_value(write.changes)
    elif isinstance(write, (Delete, Check)):
        check_key(write.pk, write.sk)
    else:
        raise InvalidInput(f"unknown write {type(write).__name__}")
    if write.expect:
        check_value(write.expect)
    names = [*(write.item if isinstance(write, Put) else write.changes if isinstance(write, Update) else ()),
             *(write.expect or ())]
    if "" in names:  # DynamoDB refuses empty attribute names
        raise InvalidInput("attribute names must not be empty")


def condition_holds(write: Write, current: Item | None) -> bool:
    """Evaluate a write's condition against the item as it is now (None: absent)."""
    if isinstance(write, Put) and write.if_absent and current is not None:
        return False
    if isinstance(write, Update) and current is None:
        return False
    if isinstance(write, Check) and (current is not None) != write.exists:
        return False
    attrs = current or {}
    for name, expected in (write.expect or {}).items():
        if expected is None:
            if name in attrs:
                return False
        elif name not in attrs or not same_value(attrs[name], expected):
            return False
    return True


def same_value(a: Any, b: Any) -> bool:
    """Equality as DynamoDB sees it: True is not 1, but 1 equals 1.0 (both are Numbers)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def apply_changes(item: Item, changes: dict[str, Any]) -> Item:
    new = dict(item)
    for name, value in changes.items():
        if value is None:
            new.pop(name, None)
        else:
            new[name] = value
    return new


def check_value(value: Any, depth: int = 0) -> None:
    """Refuse what one backend could store and the other could not (NaN, odd types, deep nesting)."""
    if depth > 32:  # DynamoDB's nesting limit
        raise InvalidInput("value nested more than 32 levels")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _utf8(value)
        return
    if isinstance(value, int):
        if abs(value) >= 10**38:  # DynamoDB numbers hold 38 significant digits
            raise InvalidInput("integers must have at most 38 digits")
        return
    if isinstance(value, float):
        if not math.isfinite(value) or not (value == 0 or 1e-130 <= abs(value) < 1e126):
            raise InvalidInput("floats must be finite and within DynamoDB's range (1e-130 to 1e126)")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidInput("attribute names must be strings")
            check_value(v, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            check_value(v, depth + 1)
        return
    raise InvalidInput(f"values of type {type(value).__name__} cannot be stored")


def check_query(pk: str, prefix: str | None, start: str | None, end: str | None) -> None:
    check_key(pk, "x")
    if prefix and (start is not None or end is not None):
        raise InvalidInput("query takes a prefix or a range, not both")
    if start is not None and end is not None and start > end:
        raise InvalidInput("query range start is after its end")


def check_key(pk: Any, sk: Any) -> None:
    # DynamoDB refuses empty, non-string and over-long key attributes; refuse them here too.
    if not isinstance(pk, str) or not isinstance(sk, str) or not pk or not sk:
        raise InvalidInput("pk and sk must be non-empty strings")
    if len(_utf8(pk)) > 2048 or len(_utf8(sk)) > 1024:
        raise InvalidInput("pk is limited to 2048 bytes and sk to 1024 bytes")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        raise InvalidInput("text must be valid Unicode") from None


def encode_cursor(pk: str, sk: str) -> str:
    """The opaque cursor both adapters hand out: base64url of the JSON of the last key returned."""
    raw = json.dumps({"pk": pk, "sk": sk}, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(pk: str, cursor: str, prefix: str | None = None, start: str | None = None,
                  end: str | None = None) -> str:
    """The sk to continue after; a cursor of another partition, or of another listing of it (an sk outside
    this query's prefix or range: a tasks cursor given to the memories list), is refused, not reinterpreted."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError):
        key = None
    if not (isinstance(key, dict) and key.get("pk") == pk and isinstance(key.get("sk"), str) and key["sk"]):
        raise InvalidInput("malformed cursor", code="invalid_cursor", field="cursor")
    sk = str(key["sk"])
    if (prefix and not sk.startswith(prefix)) or (start is not None and sk < start) or (end is not None and sk > end):
        raise InvalidInput("this cursor is another list's: pass a cursor back to the list that gave it",
                           code="invalid_cursor", field="cursor")
    return sk


def _prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string that starts with `prefix` (None: no bound).

    SQLite's BINARY collation compares UTF-8 bytes, which orders like code points.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates cannot appear in stored text
            code = 0xE000
        if code <= 0x10FFFF:
            return "".join(chars) + chr(code)
    return None


def _row_to_item(row: tuple[str, str, str]) -> Item:
    pk, sk, body = row
    return {**json.loads(body), "pk": pk, "sk": sk}


def _dump_body(item: Item) -> str:
    body = {k: v for k, v in item.items() if k not in KEY_ATTRIBUTES}
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
