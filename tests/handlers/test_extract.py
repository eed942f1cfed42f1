"""The extract function: SQS batches of jobs, partial batch failures, giving up before the DLQ."""

from __future__ import annotations

import json

import pytest

from tests.handlers.conftest import Aws, Bedrock, parameter_default, unit
from tests.handlers.events import load_event, with_body

TENANT_PK = "demo#support#u-42"
BEAGLE = "Ann adopted a beagle named Max on 2024-03-09."
NURSE = "Ann works as a nurse at St. Mary's hospital in Denver."


@pytest.fixture()
def extract(aws: Aws, bedrock: Bedrock):
    return aws.load("extract")


def add(ingest, request_id: str, content: str) -> None:
    event = load_event("ingest", "add")
    payload = {**json.loads(event["body"]), "request_id": request_id,
               "messages": [{"role": "user", "name": "Ann", "content": content,
                             "created_at": "2024-03-11T10:00:00Z"}]}
    assert ingest(with_body(event, payload))["statusCode"] == 202


def task(aws: Aws, request_id: str) -> dict:
    [item] = aws.items(TENANT_PK, f"TASK#{request_id}")
    return item


def test_sample_batch_extracts_both_jobs(aws: Aws, bedrock: Bedrock, store: str, ingest, extract) -> None:
    for sample in ("add", "add_text"):  # the adds whose jobs the sample batch carries (tests/handlers/test_events.py)
        assert ingest(load_event("ingest", sample))["statusCode"] == 202
    for text, axis in ((BEAGLE, 0), (NURSE, 1)):  # records run in order: one Converse, then its embedding
        bedrock.extraction([{"text": text, "memory_type": "event" if axis == 0 else "fact", "evidence": [0],
                             "event_time": "2024-03-09" if axis == 0 else None, "importance": 0.7}])
        bedrock.embedding(text, unit(axis))
    # the second job's statement has a neighbour (the first's): one consolidation call decides it
    bedrock.consolidation([{"candidate": 1, "action": "ADD", "reason": "unrelated", "confidence": 0.9}])

    result = extract(load_event("extract", "batch"))

    assert result == {"batchItemFailures": []}
    assert task(aws, "req-7f3a9c")["status"] == task(aws, "req-8b21d0")["status"] == "SUCCEEDED"
    memories = aws.items(TENANT_PK, "MEM#")
    assert sorted(m["text"] for m in memories) == sorted([BEAGLE, NURSE])
    beagle = next(m for m in memories if m["text"] == BEAGLE)
    assert beagle["event_time"].startswith("2024-03-09")
    assert beagle["evidence"] == task(aws, "req-7f3a9c")["message_ids"][:1]  # the user's turn of the two


def test_poison_record_is_the_only_failure_of_its_batch(aws: Aws, bedrock: Bedrock, store: str, ingest,
                                                        extract) -> None:
    add(ingest, "req-7f3a9c", "I adopted a beagle named Max last Saturday.")
    bedrock.extraction([{"text": BEAGLE, "memory_type": "event", "evidence": [0]}])
    bedrock.embedding(BEAGLE, unit(0))
    event = load_event("extract", "batch")
    poison = event["Records"][1]
    poison["body"] = '{"kind": "extract", "store": "demo"'  # cut short: not a Job

    result = extract(event)

    assert result == {"batchItemFailures": [{"itemIdentifier": poison["messageId"]}]}
    assert task(aws, "req-7f3a9c")["status"] == "SUCCEEDED"


def test_failed_job_is_retried_then_given_up_on_its_last_receive(aws: Aws, bedrock: Bedrock, store: str, ingest,
                                                                  extract) -> None:
    add(ingest, "req-7f3a9c", "I adopted a beagle named Max last Saturday.")
    last = parameter_default("ExtractMaxReceives")
    event = load_event("extract", "batch")
    event["Records"] = event["Records"][:1]
    # The last delivery only gives up (a timed-out one may have come before it): the one before it is
    # the last that works, and its failure gives up at once, with its own reason.
    for receive in (1, last - 1, last):
        if receive < last:
            bedrock.runtime.add_client_error("converse", service_error_code="ValidationException",
                                             service_message="The provided model identifier is invalid.",
                                             http_status_code=400)
        event["Records"][0]["attributes"]["ApproximateReceiveCount"] = str(receive)

        result = extract(event)

        assert result == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
        expected = "RUNNING" if receive == 1 else "FAILED"  # SQS retries until the last working receive
        assert task(aws, "req-7f3a9c")["status"] == expected
        assert receive == 1 or "model_rejected_input" in task(aws, "req-7f3a9c")["error"]  # the first reason kept
    assert aws.items(TENANT_PK, "MEM#") == []
