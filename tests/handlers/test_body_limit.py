"""The API's body limit (domain/limits.MAX_BODY_BYTES, README: "A body is at most 2 MB") holds on AWS too: the
local server refuses a larger body at its socket, and API Gateway and Lambda let ~6 MB through — past the 4 MB
one add's DynamoDB transaction may carry, where the answer was a 400 from the table and the add's request-id
pointer stayed until the sweeper's deadline (AWS adversarial trial: fails before)."""

from __future__ import annotations

import base64
import json

import pytest

from tests.handlers.conftest import Aws
from tests.handlers.events import load_event

TENANT_PK = "demo#support#u-42"


@pytest.fixture()
def no_models(monkeypatch):
    for name, value in {"MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "none", "MEMLANE_RERANKER": "heuristic"}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("encoded", [False, True])
def test_a_body_over_the_limit_is_413_and_writes_nothing(aws: Aws, bedrock, granted, no_models, encoded) -> None:
    ingest = aws.load("ingest")
    assert ingest(load_event("ingest", "create_store"))["statusCode"] == 201
    event = load_event("ingest", "add")
    body = {**json.loads(event["body"]), "request_id": "huge-1",
            "messages": [{"role": "user", "content": chr(0x4E00 + i) * 32_000} for i in range(60)]}  # 5.7 MB
    raw = json.dumps(body, ensure_ascii=False).encode()
    sent = {**event, "body": base64.b64encode(raw).decode() if encoded else raw.decode(), "isBase64Encoded": encoded}
    response = ingest(sent)
    assert response["statusCode"] == 413 and json.loads(response["body"])["error"]["code"] == "payload_too_large"
    assert aws.items(TENANT_PK, "MSG#") == [] and aws.items(TENANT_PK, "TASK#") == []
