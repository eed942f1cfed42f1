"""The `Table` port over one DynamoDB table (single-table design, see memlane/repository.py).

The same contract suite as the SQLite adapter runs against this one (tests/contract). Input
rules are shared with it (adapters/local/sqlite_table.py) so both refuse the same things with
the same errors; SDK errors are translated into domain errors here, once, by error code.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, cast

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, ParamValidationError
from botocore.exceptions import ConnectionError as BotoConnectionError

from ...domain.errors import ConditionFailed, DependencyFailed, InvalidInput, MemlaneError, Retryable
from ...domain.schema import Described, KeyPart, TableSchema
from ...ports import Check, Delete, Item, Page, Put, Update, Write
from ..local.sqlite_table import (
    check_key,
    check_query,
    clamp_limit,
    condition_holds,
    decode_cursor,
    encode_cursor,
    validate_transaction,
    validate_write,
)

# The key schema, defined once. template.yaml mirrors these (and TTL_ATTRIBUTE) by hand.
KEY_SCHEMA: list[dict[str, str]] = [
    {"AttributeName": "pk", "KeyType": "HASH"},
    {"AttributeName": "sk", "KeyType": "RANGE"},
]
ATTRIBUTE_DEFINITIONS: list[dict[str, str]] = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "S"},
]
# Epoch seconds; DynamoDB deletes the item some time (up to days) after it passes.
TTL_ATTRIBUTE = "expires_at"

# This version's table, as domain/schema.py compares it: keys (pk, sk strings), no secondary index, TTL.
EXPECTED_SCHEMA = TableSchema(
    keys=tuple((k["AttributeName"], k["KeyType"], next(a["AttributeType"] for a in ATTRIBUTE_DEFINITIONS
                                                     if a["AttributeName"] == k["AttributeName"]))
               for k in KEY_SCHEMA),
    ttl_attribute=TTL_ATTRIBUTE,
)

BATCH_GET_CHUNK = 100  # BatchGetItem's limit
BATCH_GET_ATTEMPTS = 8
BACKOFF_BASE_SECONDS = 0.05
BACKOFF_CAP_SECONDS = 2.0

_RETRYABLE_CODES = {
    "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "TransactionConflictException", "TransactionInProgressException",
    "InternalServerError", "ServiceUnavailable",
}
# Codes inside TransactionCanceledException.CancellationReasons.
_RETRYABLE_REASONS = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded",
                      "RequestLimitExceeded"}

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class DynamoDBTable:
    """Every read is strongly consistent, so a read after a write sees it, as with SQLite."""

    def __init__(self, table_name: str, client: Any = None):
        self.table_name = table_name
        self.client = client if client is not None else boto3.client("dynamodb")
        self._sleep: Callable[[float], None] = time.sleep  # replaceable in tests

    # -- schema (services/schema.py) --------------------------------------------------------
    def describe(self) -> Described:
        """The table's keys, global secondary indexes and TTL attribute (two cheap control-plane calls)."""
        try:
            table = self.client.describe_table(TableName=self.table_name)["Table"]
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return Described(self.table_name, EXPECTED_SCHEMA, None)
            raise translate_error(err) from err
        except BotoCoreError as err:
            raise translate_error(err) from err
        types = {a["AttributeName"]: a["AttributeType"] for a in table.get("AttributeDefinitions", [])}

        def keys(schema: list[dict[str, str]]) -> tuple[KeyPart, ...]:
            return tuple((k["AttributeName"], k["KeyType"], types.get(k["AttributeName"], "?")) for k in schema)

        ttl = self._call("describe_time_to_live", TableName=self.table_name)["TimeToLiveDescription"]
        return Described(self.table_name, EXPECTED_SCHEMA, TableSchema(
            keys=keys(table["KeySchema"]),
            indexes={i["IndexName"]: keys(i["KeySchema"]) for i in table.get("GlobalSecondaryIndexes", [])},
            ttl_attribute=ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") else None,
        ))

    def create_missing(self) -> list[str]:
        """Create the table if there is none, and turn TTL on if it is off; change nothing that exists."""
        made: list[str] = []
        found = self.describe().found
        if found is None:
            create_table(self.client, self.table_name, ttl=False)
            made.append(f"table {self.table_name}")
            found = self.describe().found
        if isinstance(found, TableSchema) and found.ttl_attribute is None:
            self._call("update_time_to_live", TableName=self.table_name,
                       TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
            made.append(f"table {self.table_name}: TTL on {TTL_ATTRIBUTE}")
        return made

    # -- reads -----------------------------------------------------------------------------
    def get(self, pk: str, sk: str) -> Item | None:
        check_key(pk, sk)
        resp = self._call("get_item", TableName=self.table_name, Key=_key(pk, sk), ConsistentRead=True)
        return _from_item(resp["Item"]) if "Item" in resp else None

    def batch_get(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        wanted = [(pk, sk) for pk, sk in keys]
        for pk, sk in wanted:
            check_key(pk, sk)
        unique = list(dict.fromkeys(wanted))  # BatchGetItem refuses duplicate keys
        found: dict[tuple[str, str], Item] = {}
        for i in range(0, len(unique), BATCH_GET_CHUNK):
            pending = [_key(pk, sk) for pk, sk in unique[i:i + BATCH_GET_CHUNK]]
            attempt = 0
            while pending:
                resp = self._call("batch_get_item",
                                  RequestItems={self.table_name: {"Keys": pending, "ConsistentRead": True}})
                for raw in resp.get("Responses", {}).get(self.table_name, []):
                    item = _from_item(raw)
                    found[(item["pk"], item["sk"])] = item
                # Keys DynamoDB did not get to (throttling, response size): retry with backoff.
                pending = resp.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
                if pending:
                    attempt += 1
                    if attempt >= BATCH_GET_ATTEMPTS:
                        raise Retryable(f"batch_get left {len(pending)} keys unprocessed after {attempt} attempts")
                    delay = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** attempt)
                    self._sleep(random.uniform(delay / 2, delay))
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
        expr = _Expressions()
        condition = f"{expr.name('pk')} = {expr.value(pk)}"
        sk = expr.name("sk") if prefix or start is not None or end is not None else ""  # no unused names
        if prefix:
            condition += f" AND begins_with({sk}, {expr.value(prefix)})"
        elif start is not None and end is not None:
            condition += f" AND {sk} BETWEEN {expr.value(start)} AND {expr.value(end)}"
        elif start is not None:
            condition += f" AND {sk} >= {expr.value(start)}"
        elif end is not None:
            condition += f" AND {sk} <= {expr.value(end)}"
        params = {"TableName": self.table_name, "KeyConditionExpression": condition,
                  "ScanIndexForward": forward, "ConsistentRead": True, **expr.params()}
        start_key = _key(pk, decode_cursor(pk, cursor, prefix, start, end)) if cursor is not None else None
        # Read limit+1 items to know whether more remain: DynamoDB's LastEvaluatedKey may be set
        # when nothing is left, and a page may stop short (1 MB), so keep reading until sure.
        raw: list[dict[str, Any]] = []
        while len(raw) <= limit:
            resp = self._call("query", **params, Limit=limit + 1 - len(raw),
                              **({"ExclusiveStartKey": start_key} if start_key else {}))
            raw.extend(resp.get("Items", []))
            start_key = resp.get("LastEvaluatedKey")
            if not start_key:
                break
        items = [_from_item(r) for r in raw[:limit]]
        more = len(raw) > limit
        return Page(items=items, cursor=encode_cursor(pk, items[-1]["sk"]) if more else None)

    # -- writes ----------------------------------------------------------------------------
    def put(self, item: Item, *, if_absent: bool = False, expect: dict[str, Any] | None = None) -> None:
        put = Put(item, if_absent=if_absent, expect=expect)
        validate_write(put)
        _, params = self._request(put)
        self._call("put_item", **params)

    def update(self, pk: str, sk: str, changes: dict[str, Any], *, expect: dict[str, Any] | None = None) -> Item:
        update = Update(pk, sk, changes, expect=expect)
        validate_write(update)
        kind, params = self._request(update)
        if kind == "ConditionCheck":
            # Nothing to change: UpdateItem needs an update expression, so check by reading.
            current = self.get(pk, sk)
            if not condition_holds(update, current):
                raise ConditionFailed(f"condition failed on item {(pk, sk)!r}")
            assert current is not None
            return current
        resp = self._call("update_item", **params, ReturnValues="ALL_NEW")
        return _from_item(resp["Attributes"])

    def delete(self, pk: str, sk: str, *, expect: dict[str, Any] | None = None) -> None:
        delete = Delete(pk, sk, expect=expect)
        validate_write(delete)
        _, params = self._request(delete)
        self._call("delete_item", **params)

    def transact(self, writes: Sequence[Write]) -> None:
        validate_transaction(writes)
        for write in writes:
            validate_write(write)
        if not writes:
            return  # TransactWriteItems refuses an empty list
        items = [{kind: params} for kind, params in map(self._request, writes)]
        # botocore fills ClientRequestToken, so its own retries cannot apply a transaction twice.
        self._call("transact_write_items", TransactItems=items)

    def _request(self, write: Write) -> tuple[str, dict[str, Any]]:
        """A write as (TransactWriteItems kind, parameters); the parameters also suit PutItem etc."""
        expr = _Expressions()
        if isinstance(write, Put):
            condition = expr.condition(exists=False if write.if_absent else None, expect=write.expect)
            return "Put", {"TableName": self.table_name, "Item": _to_item(write.item), **expr.params(condition)}
        key = {"TableName": self.table_name, "Key": _key(write.pk, write.sk)}
        if isinstance(write, Update):
            sets = [f"{expr.name(n)} = {expr.value(v)}" for n, v in write.changes.items() if v is not None]
            removes = [expr.name(n) for n, v in write.changes.items() if v is None]
            update = " ".join(part for part in (
                "SET " + ", ".join(sets) if sets else "",
                "REMOVE " + ", ".join(removes) if removes else "",
            ) if part)
            condition = expr.condition(exists=True, expect=write.expect)
            if not update:
                return "ConditionCheck", {**key, **expr.params(condition)}
            return "Update", {**key, "UpdateExpression": update, **expr.params(condition)}
        if isinstance(write, Delete):
            return "Delete", {**key, **expr.params(expr.condition(exists=None, expect=write.expect))}
        if isinstance(write, Check):
            return "ConditionCheck", {**key, **expr.params(expr.condition(exists=write.exists, expect=write.expect))}
        raise InvalidInput(f"unknown write {type(write).__name__}")

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        try:
            return cast(dict[str, Any], getattr(self.client, operation)(**params))
        except (ClientError, BotoCoreError) as err:
            raise translate_error(err) from err


def create_table(client: Any, table_name: str, *, ttl: bool = True) -> None:
    """Create the table (on-demand, TTL on `TTL_ATTRIBUTE` unless `ttl` is False) and wait until it is usable."""
    try:
        client.create_table(TableName=table_name, KeySchema=KEY_SCHEMA,
                            AttributeDefinitions=ATTRIBUTE_DEFINITIONS, BillingMode="PAY_PER_REQUEST")
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ResourceInUseException":  # already there
            raise translate_error(err) from err
    client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    if not ttl:
        return
    try:
        client.update_time_to_live(TableName=table_name,
                                   TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
    except ClientError as err:
        # Enabling twice is refused with a ValidationException; anything else is real.
        if err.response.get("Error", {}).get("Code") != "ValidationException":
            raise translate_error(err) from err


def translate_error(err: Exception) -> MemlaneError:
    """Map an SDK error to the domain hierarchy, by error code."""
    if isinstance(err, (BotoConnectionError, HTTPClientError)):
        return Retryable(f"DynamoDB unreachable: {err}")
    if isinstance(err, ParamValidationError):
        return InvalidInput(f"DynamoDB refused the request: {err}")
    if not isinstance(err, ClientError):
        return DependencyFailed(f"DynamoDB call failed: {err}")
    error = err.response.get("Error", {})
    # A message reaches the client's answer: cut (a compatible server may send a whole error page).
    code, message = error.get("Code", ""), error.get("Message", str(err))[:_MESSAGE_CHARS]
    if code == "ConditionalCheckFailedException":
        return ConditionFailed("condition failed", aws_code=code)
    if code == "TransactionCanceledException":
        reasons = {r.get("Code") for r in err.response.get("CancellationReasons", [])}
        if "ConditionalCheckFailed" in reasons or (not reasons and "ConditionalCheckFailed" in message):
            return ConditionFailed("transaction condition failed", aws_code=code)
        if reasons & _RETRYABLE_REASONS or "TransactionConflict" in message:
            return Retryable(f"transaction cancelled: {message}", aws_code=code)
        if "ValidationError" in reasons:
            return InvalidInput(f"transaction refused: {message}", aws_code=code)
        return DependencyFailed(f"transaction cancelled: {message}", aws_code=code)
    if code in _RETRYABLE_CODES:
        return Retryable(f"DynamoDB is busy: {message}", aws_code=code)
    if code == "ValidationException":
        return InvalidInput(f"DynamoDB refused the request: {message}", aws_code=code)
    if code == "ResourceNotFoundException":
        return DependencyFailed(f"DynamoDB table not found: {message}", aws_code=code)
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    if status >= 500 and (not code or code.isdigit()):  # a server fault with no error of the API (an error page)
        return Retryable(f"DynamoDB failed (HTTP {status}); retry", aws_code=code)
    return DependencyFailed(f"DynamoDB error {code}: {message}", aws_code=code)


_MESSAGE_CHARS = 300


class _Expressions:
    """Placeholders for attribute names and values, so no name or value is ever spliced in."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attribute: str) -> str:
        for placeholder, existing in self.names.items():
            if existing == attribute:
                return placeholder
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = _serializer.serialize(_to_dynamo(value))
        return placeholder

    def condition(self, *, exists: bool | None, expect: dict[str, Any] | None) -> str | None:
        """`exists`: True item must exist, False item must be absent, None either."""
        parts = []
        if exists is not None:
            parts.append(f"attribute_{'exists' if exists else 'not_exists'}({self.name('pk')})")
        for attribute, expected in (expect or {}).items():
            n = self.name(attribute)
            if expected is None:
                parts.append(f"attribute_not_exists({n})")
                continue
            parts.append(f"{n} = {self.value(expected)}")
            if isinstance(expected, (bool, int, float)):
                # Redundant on DynamoDB (values of different types are never equal) but explicit,
                # so no emulator can let true match 1 (moto does).
                dynamo_type = "BOOL" if isinstance(expected, bool) else "N"
                parts.append(f"attribute_type({n}, {self.value(dynamo_type)})")
        return " AND ".join(parts) or None

    def params(self, condition: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if condition:
            out["ConditionExpression"] = condition
        if self.names:
            out["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            out["ExpressionAttributeValues"] = dict(self.values)
        return out


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _to_item(item: Item) -> dict[str, Any]:
    return {name: _serializer.serialize(_to_dynamo(value)) for name, value in item.items()}


def _from_item(raw: dict[str, Any]) -> Item:
    return {name: _from_dynamo(_deserializer.deserialize(value)) for name, value in raw.items()}


def _to_dynamo(value: Any) -> Any:
    """Floats become Decimals (via str, so 0.1 stays 0.1); the SDK refuses floats."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    """Decimals back to int (no fractional digits) or float, so values read like SQLite's."""
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamo(v) for v in value]
    return value
