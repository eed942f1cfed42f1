"""Issue 16, done when: a sync add whose extraction outlives its deadline answers within the API limit with
an asynchronous task that later ends SUCCEEDED — the ingest and extract functions under moto, Bedrock a
Stubber whose first Converse call is slowed past a small deadline (the test asserts states, never times)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.handlers.conftest import Aws, Bedrock, unit
from tests.handlers.events import load_event, with_body

TENANT_PK = "demo#support#u-42"
DEADLINE = 1.5  # seconds: MEMLANE_SYNC_DEADLINE_SECONDS for this test's functions (a Bedrock call needs 1 s left)
BEAGLE = "Ann adopted a beagle named Max on 2024-03-09."
EXTRACTED = [{"text": BEAGLE, "memory_type": "event", "evidence": [0], "event_time": "2024-03-09"}]


@pytest.fixture()
def slow_converse(aws: Aws, bedrock: Bedrock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bedrock's Converse answers the extraction, the first call only after the sync deadline has passed.
    (If a slow machine passes the deadline even before that call, the job's call is the slow one: same end.)"""
    from tests.handlers.conftest import AnswersReferenceTexts

    calls = {"n": 0}

    def converse(self: AnswersReferenceTexts, **params: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            time.sleep(DEADLINE * 2)
        return {"output": {"message": {"role": "assistant", "content": [{"toolUse": {
            "toolUseId": f"tooluse_{uuid.uuid4().hex[:22]}", "name": "ExtractionResult",
            "input": {"memories": EXTRACTED}}}]}}, "stopReason": "tool_use"}

    monkeypatch.setattr(AnswersReferenceTexts, "converse", converse, raising=False)
    aws.monkeypatch.setenv("MEMLANE_SYNC_DEADLINE_SECONDS", str(DEADLINE))
    aws.monkeypatch.setenv("MEMLANE_SYNC_MARGIN_SECONDS", "0")


def delivered(aws: Aws, tries: int = 50) -> list[dict[str, Any]]:
    """The queued job once SQS delivers it (it is sent delayed until the deadline)."""
    for _ in range(tries):
        messages = aws.queued()
        if messages:
            return messages
        time.sleep(0.1)
    return []


def test_a_sync_add_past_its_deadline_answers_202_then_its_job_ends_it_succeeded(
        aws: Aws, bedrock: Bedrock, slow_converse: None, store: str, ingest) -> None:
    event = load_event("ingest", "add")
    body = {**json.loads(event["body"]), "request_id": "req-slow", "sync": True,
            "messages": [{"role": "user", "name": "Ann", "content": "I adopted a beagle named Max last Saturday.",
                          "created_at": "2024-03-11T10:00:00Z"}]}

    response = ingest(with_body(event, body))

    assert response["statusCode"] == 202, response
    assert json.loads(response["body"]) == {"request_id": "req-slow", "status": "RUNNING"}
    [task] = aws.items(TENANT_PK, "TASK#req-slow")
    assert task["status"] == "RUNNING" and aws.items(TENANT_PK, "MEM#") == []

    # The job queued with the task, delivered to the extract function, finishes the work.
    queued = delivered(aws)
    assert [json.loads(m["Body"])["request_id"] for m in queued] == ["req-slow"]
    bedrock.embedding(BEAGLE, unit(0))
    assert aws.load("extract")(aws.sqs_event(queued)) == {"batchItemFailures": []}

    [task] = aws.items(TENANT_PK, "TASK#req-slow")
    assert task["status"] == "SUCCEEDED"
    assert [m["text"] for m in aws.items(TENANT_PK, "MEM#")] == [BEAGLE]
