"""The DynamoDB table's schema under moto: described, validated, created where missing, never changed."""

from __future__ import annotations

from typing import Any, Iterator

import boto3
import pytest

from memlane.adapters.dynamodb.table import DynamoDBTable
from memlane.domain.schema import differences
from tests.handlers.template import create_table as create_from_template

REGION = "us-east-1"


@pytest.fixture()
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield boto3.client("dynamodb", region_name=REGION)


def test_the_templates_table_is_what_this_version_expects(dynamodb: Any) -> None:
    create_from_template(dynamodb, "Table", "memlane")
    assert differences(DynamoDBTable("memlane", client=dynamodb).describe()) == []


def test_a_missing_table_is_a_difference_and_create_makes_it(dynamodb: Any) -> None:
    table = DynamoDBTable("memlane", client=dynamodb)
    assert [str(d) for d in differences(table.describe())] == ["table memlane: a table expected, missing"]
    assert table.create_missing() == ["table memlane", "table memlane: TTL on expires_at"]
    assert differences(table.describe()) == []
    assert table.create_missing() == []  # nothing left to make


def test_ttl_off_is_missing_and_create_turns_it_on(dynamodb: Any) -> None:
    dynamodb.create_table(TableName="memlane", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                                          {"AttributeName": "sk", "KeyType": "RANGE"}],
                          AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                {"AttributeName": "sk", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    table = DynamoDBTable("memlane", client=dynamodb)
    assert [str(d) for d in differences(table.describe())] == [
        "table memlane: TTL attribute expires_at expected, missing"]
    assert table.create_missing() == ["table memlane: TTL on expires_at"]
    assert differences(table.describe()) == []


def test_another_key_schema_and_a_gsi_are_named_and_left_alone(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName="memlane", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"},
                              {"AttributeName": "when", "AttributeType": "N"}],
        GlobalSecondaryIndexes=[{"IndexName": "by-when", "KeySchema": [{"AttributeName": "when", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "KEYS_ONLY"}}],
        BillingMode="PAY_PER_REQUEST")
    dynamodb.update_time_to_live(TableName="memlane",
                                 TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})
    table = DynamoDBTable("memlane", client=dynamodb)
    found = [str(d) for d in differences(table.describe())]
    assert found == [
        "table memlane: key schema pk HASH S, sk RANGE S expected, id HASH S found",
        "table memlane: index by-when not expected, when HASH N found",
        "table memlane: TTL attribute expires_at expected, ttl found",
    ]
    assert table.create_missing() == []  # what differs is not missing: create touches nothing
    assert [str(d) for d in differences(table.describe())] == found
