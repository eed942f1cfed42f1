"""The `table` fixture: every implementation of the Table port, for the same contract tests.

- ``sqlite``: SqliteTable over a file in tmp_path. Always runs.
- ``dynamodb-moto``: DynamoDBTable over moto's in-process DynamoDB. Always runs.
- ``dynamodb-local``: DynamoDBTable against the DynamoDB endpoint ``MEMLANE_DYNAMODB_ENDPOINT``
  (scripts/engines.sh starts one; DynamoDB Local works too), integration suite only, on a
  uniquely named table that is deleted afterwards.

Import the fixture into a test module with ``from tests.contract.table_backends import table``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from collections.abc import Iterator

import pytest

from memlane.ports import Table

REGION = "us-east-1"


def _sqlite(tmp_path: Path) -> Iterator[Table]:
    from memlane.adapters.local.sqlite_table import SqliteTable

    table = SqliteTable(tmp_path / "table.sqlite3")
    yield table
    table.close()


def _dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    # Never let a test reach a real account with the developer's own credentials.
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


def _moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[Table]:
    import boto3
    from moto import mock_aws

    from memlane.adapters.dynamodb.table import DynamoDBTable, create_table

    _dummy_credentials(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client, "memlane-contract")
        yield DynamoDBTable("memlane-contract", client=client)


def _dynamodb_local(monkeypatch: pytest.MonkeyPatch) -> Iterator[Table]:
    endpoint = os.environ.get("MEMLANE_DYNAMODB_ENDPOINT")
    if not endpoint:
        pytest.skip("MEMLANE_DYNAMODB_ENDPOINT is not set; the DynamoDB-compatible server runs in the integration suite")
    import boto3

    from memlane.adapters.dynamodb.table import DynamoDBTable, create_table

    _dummy_credentials(monkeypatch)
    client = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
    name = f"memlane-contract-{uuid.uuid4().hex[:10]}"
    create_table(client, name)
    try:
        yield DynamoDBTable(name, client=client)
    finally:
        client.delete_table(TableName=name)


@pytest.fixture(params=["sqlite", "dynamodb-moto", pytest.param("dynamodb-local", marks=pytest.mark.integration)])
def table(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Table]:
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    elif request.param == "dynamodb-moto":
        yield from _moto(monkeypatch)
    else:
        yield from _dynamodb_local(monkeypatch)
