"""The handlers reach tenant partitions only with the tenant's STS-scoped credentials: every DynamoDB
request on a `store#app#tenant` key is signed with the assumed role's temporary key, tagged with
that tenant; only global partitions (keys with '~') are signed with the function's own key."""

from __future__ import annotations

import json
from typing import Any

import botocore.auth
import pytest

from tests.handlers.conftest import Aws, Bedrock, unit
from tests.handlers.events import load_event


@pytest.fixture()
def signed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, dict[str, Any]]]:
    """(access key, operation, request body) of every signed DynamoDB / STS request."""
    seen: list[tuple[str, str, dict[str, Any]]] = []
    add_auth = botocore.auth.SigV4Auth.add_auth

    def spy(self: botocore.auth.SigV4Auth, request: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        body = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        if target.startswith("DynamoDB_"):
            seen.append((self.credentials.access_key, target.split(".")[-1], json.loads(body or "{}")))
        elif "Action=AssumeRole" in body:
            seen.append((self.credentials.access_key, "AssumeRole", {"body": body}))
        add_auth(self, request)

    monkeypatch.setattr(botocore.auth.SigV4Auth, "add_auth", spy)
    return seen


def partition_keys(body: dict[str, Any]) -> set[str]:
    """The partition keys a DynamoDB request names (Key, Item, KeyConditions, batches, transactions)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            pk = node.get("pk")
            if isinstance(pk, dict) and "S" in pk:
                found.add(pk["S"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    if "KeyConditionExpression" in body:
        found.add(body["ExpressionAttributeValues"][":pk"]["S"] if ":pk" in body.get("ExpressionAttributeValues", {})
                  else next(v["S"] for v in body["ExpressionAttributeValues"].values()))
    return found


def test_tenant_items_are_only_touched_with_the_tenants_credentials(aws: Aws, bedrock: Bedrock, store: str,
                                                                      ingest, signed) -> None:
    signed.clear()
    assert ingest(load_event("ingest", "add"))["statusCode"] == 202
    extract = aws.load("extract")
    bedrock.extraction([{"text": "Ann adopted a beagle.", "memory_type": "event", "evidence": [0]}])
    bedrock.embedding("Ann adopted a beagle.", unit(3))
    assert extract(aws.sqs_event(aws.queued())) == {"batchItemFailures": []}
    search = aws.load("search")
    bedrock.embedding(json.loads(load_event("search", "search")["body"])["query"], unit(3))
    assert search(load_event("search", "search"))["statusCode"] == 200

    assumed = {key for key, op, _ in signed if op == "AssumeRole"}
    assert len(assumed) == 1  # the function assumes the tenant role with its own key
    [own] = assumed
    assert not own.startswith("ASIA")
    tenant_requests = [(key, op) for key, op, body in signed if op != "AssumeRole"
                       and any("~" not in pk for pk in partition_keys(body))]
    global_requests = [(key, op) for key, op, body in signed if op != "AssumeRole"
                       and partition_keys(body) and all("~" in pk for pk in partition_keys(body))]
    assert tenant_requests and global_requests
    assert all(key.startswith("ASIA") for key, _ in tenant_requests), tenant_requests  # temporary, assumed
    assert all(key == own for key, _ in global_requests), global_requests
    # and no single request mixes a tenant partition with a global one
    assert not [op for _, op, body in signed
                if len({"~" in pk for pk in partition_keys(body)}) > 1]
