"""The ingest function on its SQS ingestion queue: each message is an add (the body of POST .../memories plus
`store`, with a required `request_id`) from the IAM principal SQS names in `SenderId`, checked against the
grant table, written, audited like an HTTP add; refusals and transient failures are handed back per record."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.handlers.conftest import Aws, Bedrock, unit
from tests.handlers.events import load_event

TENANT_PK = "demo#support#u-42"
PRODUCER = "AROAQX7EXAMPLEPRODUCER"  # the RoleId of the producer's role; its sessions send as PRODUCER:<session>
BEAGLE = "Ann adopted a beagle named Max on 2024-03-09."


def event_with(*bodies: Any, sender: str = f"{PRODUCER}:crm-sync", receive: int = 1) -> dict[str, Any]:
    """The sample batch with these message bodies (a dict is sent as JSON, a str as it is)."""
    sample = load_event("ingest", "queue")
    template = sample["Records"][0]
    records = []
    for i, body in enumerate(bodies):
        record = copy.deepcopy(template)
        record["messageId"] = f"{template['messageId'][:-2]}{i:02d}"
        record["body"] = body if isinstance(body, str) else json.dumps(body)
        record["attributes"].update(SenderId=sender, ApproximateReceiveCount=str(receive))
        records.append(record)
    return {"Records": records}


def sample_body(**changes: Any) -> dict[str, Any]:
    return {**json.loads(load_event("ingest", "queue")["Records"][0]["body"]), **changes}


def failed(result: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in result["batchItemFailures"]]


def audit(aws: Aws, store: str = "demo") -> list[dict[str, Any]]:
    return aws.items(f"{store}#~audit")


@pytest.fixture()
def producer(aws: Aws, bedrock: Bedrock) -> None:
    """The producer's role may write tenant u-42 of app support: granted by its RoleId, as an operator does."""
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import access

    access.grant(bootstrap.build(Settings.from_env()), PRODUCER, {"support": ["u-42"]})


@pytest.fixture()
def queue(aws: Aws, bedrock: Bedrock):
    handler = aws.load("ingest")

    def call(event: dict[str, Any]) -> dict[str, Any]:
        for record in event["Records"]:  # the messages of an add are indexed on add: answer their embeddings
            try:
                body = json.loads(record["body"])
            except ValueError:
                continue
            if isinstance(body, dict):
                bedrock.said.update(m.get("content") for m in body.get("messages") or [] if isinstance(m, dict))
        return handler(event)

    return call


def test_a_queued_add_ends_as_a_succeeded_task_with_searchable_memories(aws: Aws, bedrock: Bedrock, store: str,
                                                                       producer: None, queue) -> None:
    assert queue(load_event("ingest", "queue")) == {"batchItemFailures": []}

    [task] = aws.items(TENANT_PK, "TASK#")
    assert (task["request_id"], task["status"]) == ("crm-0001", "PENDING")
    bedrock.extraction([{"text": BEAGLE, "memory_type": "event", "evidence": [0], "event_time": "2024-03-09",
                         "importance": 0.8}])
    bedrock.embedding(BEAGLE, unit(3))
    assert aws.load("extract")(aws.sqs_event(aws.queued())) == {"batchItemFailures": []}
    assert aws.items(TENANT_PK, "TASK#")[0]["status"] == "SUCCEEDED"

    search = load_event("search", "search")
    bedrock.embedding(json.loads(search["body"])["query"], unit(3))
    response = aws.load("search")(search)
    [hit] = json.loads(response["body"])["results"]
    assert hit["text"] == BEAGLE and hit["metadata"] == {"channel": "crm"}
    # audited as the HTTP path audits an add: who (the sender), the scope, the status
    [record] = [r for r in audit(aws) if r["principal"].startswith(PRODUCER)]
    assert (record["principal"], record["status"], record["operation"]) == (
        f"{PRODUCER}:crm-sync", 202, "SQS /v1/stores/{store}/memories")
    assert (record["app_id"], record["tenant_id"], record["request_id"]) == (
        "support", "u-42", load_event("ingest", "queue")["Records"][0]["messageId"])


def test_a_sender_without_a_grant_is_refused_and_audited(aws: Aws, store: str, producer: None, queue) -> None:
    event = event_with(sample_body(), sender="AROAQX7EXAMPLESTRANGER:probe")
    other_tenant = event_with(sample_body(scope={"app_id": "support", "tenant_id": "u-43"}, request_id="crm-2"))

    assert failed(queue(event)) == [event["Records"][0]["messageId"]]
    assert failed(queue(other_tenant)) == [other_tenant["Records"][0]["messageId"]]

    assert aws.items(TENANT_PK, "TASK#") == [] and aws.items("demo#support#u-43") == []
    assert aws.queued() == []
    refusals = sorted((r["principal"], r["status"], r.get("error_code")) for r in audit(aws) if r["status"] >= 400)
    assert refusals == [(f"{PRODUCER}:crm-sync", 403, "outside_grant"),
                        ("AROAQX7EXAMPLESTRANGER:probe", 403, "no_grant")]


def test_a_poison_message_does_not_block_its_batch(aws: Aws, store: str, producer: None, queue) -> None:
    event = event_with('{"store": "demo", "scope": ', sample_body(messages=[{"role": "user"}]),
                       {k: v for k, v in sample_body().items() if k != "request_id"},  # no idempotency: refused
                       sample_body())
    ids = [r["messageId"] for r in event["Records"]]

    assert failed(queue(event)) == ids[:3]

    [task] = aws.items(TENANT_PK, "TASK#")
    assert task["request_id"] == "crm-0001"
    codes = sorted((r["status"], r.get("error_code")) for r in audit(aws) if r["status"] >= 400)
    assert codes == [(400, "invalid_input"), (400, "request_id_required")]  # the bad JSON names no store
    assert [r["principal"] for r in audit(aws, "~global") if r.get("error_code") == "invalid_input"] == \
        [f"{PRODUCER}:crm-sync"]


def test_a_redelivered_message_is_replayed_not_duplicated(aws: Aws, store: str, producer: None, queue) -> None:
    first = queue(event_with(sample_body()))
    again = queue(event_with(sample_body(), receive=2))  # e.g. the function timed out after the write

    assert first == again == {"batchItemFailures": []}
    assert len(aws.items(TENANT_PK, "TASK#")) == 1 and len(aws.items(TENANT_PK, "MSG#")) == 2
    assert len(aws.queued()) == 1  # one extraction job


def test_a_transient_failure_is_handed_back_for_redelivery(aws: Aws, store: str, producer: None, ingest,
                                                           bedrock: Bedrock) -> None:
    assert ingest(load_event("ingest", "add"))["statusCode"] == 202  # one job waiting
    aws.monkeypatch.setenv("MEMLANE_QUEUE_LIMIT", "1")  # extraction is "behind": adds get 429 queue_full
    handler = aws.load("ingest")
    bedrock.said.update(m["content"] for m in sample_body()["messages"])
    event = event_with(sample_body())

    assert failed(handler(event)) == [event["Records"][0]["messageId"]]
    assert [t["request_id"] for t in aws.items(TENANT_PK, "TASK#")] == ["req-7f3a9c"]  # nothing of it written
    assert [(r["status"], r["error_code"]) for r in audit(aws) if r["principal"].startswith(PRODUCER)] == \
        [(429, "queue_full")]
