"""The schema policy at start-up and from `memlane schema`: local files' versions, the setting's
defaults per mode, the CLI's exit codes, and a start-up refusal that names the difference."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterator

import boto3
import pytest

from memlane import cli
from memlane.adapters.local import index_schema, sqlite_table
from memlane.adapters.local.sqlite_table import SqliteTable
from memlane.bootstrap import build, build_local
from memlane.config import Misconfigured, Settings
from memlane.domain.errors import DependencyFailed
from memlane.domain.schema import SchemaMismatch, differences

REGION = "us-east-1"


def local(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none", **overrides)


def set_version(path: Path, version: int) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {version}")


def test_the_policy_defaults_to_validate_on_aws_and_create_locally() -> None:
    assert Settings.from_env(env={}).schema_policy == "create"
    assert Settings.from_env(env={"MEMLANE_MODE": "aws"}).schema_policy == "validate"
    assert Settings.from_env(env={"MEMLANE_MODE": "aws", "MEMLANE_SCHEMA_POLICY": "create"}).schema_policy == "create"
    with pytest.raises(Misconfigured, match="MEMLANE_SCHEMA_POLICY='drop'"):
        Settings.from_env(env={"MEMLANE_SCHEMA_POLICY": "drop"})


def test_the_local_table_has_a_schema_version(tmp_path: Path) -> None:
    table = SqliteTable(tmp_path / "table.db")
    assert differences(table.describe()) == []
    assert table.describe().found == sqlite_table.SCHEMA_VERSION
    table.close()


def test_a_table_file_of_a_newer_version_is_refused(tmp_path: Path) -> None:
    SqliteTable(tmp_path / "table.db").close()
    set_version(tmp_path / "table.db", sqlite_table.SCHEMA_VERSION + 1)
    with pytest.raises(DependencyFailed, match="schema version 2, this code expects 1"):
        SqliteTable(tmp_path / "table.db")


def test_local_validate_on_a_fresh_directory_names_what_is_missing_and_makes_nothing(tmp_path: Path) -> None:
    with pytest.raises(SchemaMismatch) as refused:
        build_local(local(tmp_path, schema_policy="validate"))
    assert "table.db: schema version 1 expected, missing" in refused.value.message
    assert not (tmp_path / "data" / "table.db").exists() and not (tmp_path / "data" / "index.db").exists()


def test_local_validate_names_an_old_index_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    build_local(local(tmp_path)).close()  # create (the local default) made both files
    set_version(tmp_path / "data" / "index.db", 1)
    with pytest.raises(SchemaMismatch) as refused:
        build_local(local(tmp_path, schema_policy="validate"))
    assert f"index.db: schema version {index_schema.SCHEMA_VERSION} expected, 1 found" in refused.value.message
    with sqlite3.connect(tmp_path / "data" / "index.db") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1  # not migrated by a validate
    set_version(tmp_path / "data" / "index.db", index_schema.SCHEMA_VERSION)
    build_local(local(tmp_path, schema_policy="validate")).close()  # this version's files: content


@pytest.fixture()
def moto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield boto3.client("dynamodb", region_name=REGION)


def aws(tmp_path: Path, table: str, **overrides: Any) -> Settings:
    return Settings.from_env(env={}, mode="aws", table_name=table, index="embedded", data_dir=tmp_path / "idx",
                             embedder="hashing", reranker="none", queue_url="https://sqs.us-east-1.amazonaws.com/1/q",
                             aws_region=REGION, **overrides)


def test_aws_start_up_refuses_a_table_without_ttl_naming_it(moto: Any, tmp_path: Path) -> None:
    moto.create_table(TableName="no-ttl", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                                     {"AttributeName": "sk", "KeyType": "RANGE"}],
                      AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                            {"AttributeName": "sk", "AttributeType": "S"}],
                      BillingMode="PAY_PER_REQUEST")
    with pytest.raises(SchemaMismatch) as refused:
        build(aws(tmp_path, "no-ttl"))
    assert "table no-ttl: TTL attribute expires_at expected, missing" in refused.value.message
    build(aws(tmp_path, "no-ttl", schema_policy="create"))  # create turns TTL on
    assert moto.describe_time_to_live(TableName="no-ttl")["TimeToLiveDescription"]["TimeToLiveStatus"] == "ENABLED"
    build(aws(tmp_path, "no-ttl"))  # and validate is content


def test_off_skips_the_start_up_check(moto: Any, tmp_path: Path) -> None:
    """For a build's smoke import (no AWS to reach) or a pipeline that runs `memlane schema validate` itself."""
    moto.create_table(TableName="unchecked", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                      AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                      BillingMode="PAY_PER_REQUEST")
    assert Settings.from_env(env={"MEMLANE_MODE": "aws", "MEMLANE_SCHEMA_POLICY": "off"}).schema_policy == "off"
    build(aws(tmp_path, "unchecked", schema_policy="off"))  # would be refused under validate
    with pytest.raises(SchemaMismatch):
        build(aws(tmp_path, "unchecked"))


def test_aws_create_never_touches_a_table_that_differs(moto: Any, tmp_path: Path) -> None:
    moto.create_table(TableName="other", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                      AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                      BillingMode="PAY_PER_REQUEST")
    for policy in ("create", "recreate"):
        with pytest.raises(SchemaMismatch, match="key schema pk HASH S, sk RANGE S expected, id HASH S found"):
            build(aws(tmp_path, "other", schema_policy=policy))
    assert moto.describe_table(TableName="other")["Table"]["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]


def test_cli_schema_exit_codes(moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in {"MEMLANE_MODE": "aws", "MEMLANE_TABLE_NAME": "cli-table", "MEMLANE_INDEX": "embedded",
                        "MEMLANE_EMBEDDER": "hashing", "MEMLANE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/q",
                        "AWS_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--data-dir", str(tmp_path / "d"), "schema", "validate"]) == 1
    assert "table cli-table: a table expected, missing" in capsys.readouterr().out
    assert cli.main(["--data-dir", str(tmp_path / "d"), "schema", "create"]) == 0
    assert "created table cli-table" in capsys.readouterr().out
    assert cli.main(["--data-dir", str(tmp_path / "d"), "--json", "schema", "validate"]) == 0
    assert cli.main(["schema", "drop"]) == cli.EXIT_USAGE  # not 2, an API error's code


def test_cli_schema_recreate_rebuilds_the_local_index_from_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("MEMLANE_MODE", "MEMLANE_TABLE", "MEMLANE_INDEX", "MEMLANE_OPENSEARCH_URL", "MEMLANE_SCHEMA_POLICY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hashing")
    data = str(tmp_path / "data")
    from memlane.services import ingest, search, stores

    service = build_local(local(tmp_path))
    stores.create(service.deps, name="demo")
    ingest.add(service.deps, "demo", scope={"app_id": "a", "tenant_id": "t"}, sync=True,
               messages=[{"role": "user", "content": "I adopted a beagle named Max."}])
    service.deps.index.drop_store("demo")  # the index lost its documents; the table has them
    assert search.search(service.deps, "demo", query="beagle", scope={"app_id": "a", "tenant_id": "t"}) == []
    service.close()

    assert cli.main(["--data-dir", data, "schema", "recreate"]) == 0
    assert "rebuilt demo" in capsys.readouterr().out
    service = build_local(local(tmp_path))
    try:
        assert search.search(service.deps, "demo", query="beagle", scope={"app_id": "a", "tenant_id": "t"})
    finally:
        service.close()


@pytest.mark.parametrize("action", ["dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"])
def test_every_function_may_make_the_start_up_check(action: str) -> None:
    """A cold start in AWS mode describes the table (validate): every function's role must allow it, on the
    table only — and the tenant data role must not."""
    from tests.isolation import template_policies as tpl
    from tests.isolation.iam_eval import Request, is_allowed

    for function in tpl.FUNCTIONS:
        policy = tpl.function_role_policy(function)
        assert is_allowed(policy, Request(action=action, resource=tpl.TABLE_ARN)), function
        assert not is_allowed(policy, Request(action=action, resource=tpl.TABLE_ARN.replace("Table-", "Other-"))), function
    assert not is_allowed(tpl.tenant_data_policy(), Request(action=action, resource=tpl.TABLE_ARN))


def test_the_start_up_check_runs_once_per_process(moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlane.adapters.dynamodb.table import DynamoDBTable, create_table

    create_table(moto, "once")
    calls: list[str] = []
    real = DynamoDBTable.describe
    monkeypatch.setattr(DynamoDBTable, "describe", lambda self: calls.append(self.table_name) or real(self))
    build(aws(tmp_path, "once"))
    build(aws(tmp_path, "once"))  # a second build in the same process (tests, the CLI) checks no more
    assert calls == ["once"]
