"""Fixtures of the service tests: a local service without a model, and the services on more than one table."""

import dataclasses

import pytest

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.services import stores


@pytest.fixture()
def svc(tmp_path):
    """A local service on a fresh data dir, with the hashing embedder (no model), no reranker, and a store 'demo'."""
    service = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", reranker="none"),
                          embedder=HashingEmbedder())
    stores.create(service.deps, name="demo")
    yield service
    service.close()


@pytest.fixture()
def dynamo(deps, monkeypatch):
    """The same services over DynamoDB (moto) as the shared table: a tenant's consolidation held by a lease."""
    import boto3
    from moto import mock_aws

    from memlane.adapters.dynamodb.table import DynamoDBTable, create_table

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "memlane-services")
        d = dataclasses.replace(deps, table=DynamoDBTable("memlane-services", client=client),
                                settings=dataclasses.replace(deps.settings, shared_table=True))
        stores.create(d, name="demo")
        yield d
