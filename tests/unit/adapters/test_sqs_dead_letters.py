"""The ingestion queue's dead letters (adapters/sqs/dead_letters.py) on moto's SQS: an erasure drops the tenant's
refused adds — redriven after the erasure, they wrote its data back (an AWS-path trial) — and leaves the rest."""

from __future__ import annotations

import json
from typing import Any, Iterator

import boto3
import pytest
from moto import mock_aws

from memlane.adapters.sqs.dead_letters import SqsDeadLetters
from memlane.services import erase, ingest, stores

REGION = "us-east-1"


def add(tenant: str, text: str) -> str:
    return json.dumps({"store": "demo", "request_id": f"q-{tenant}-{len(text)}",
                       "scope": {"app_id": "app", "tenant_id": tenant},
                       "messages": [{"role": "user", "content": text}]})


@pytest.fixture()
def queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("sqs", region_name=REGION)
        yield client, client.create_queue(QueueName="memlane-ingest-dlq")["QueueUrl"]


def bodies(client: Any, url: str) -> list[str]:
    """Every message the queue shows now (each received once, then made visible again)."""
    seen: dict[str, dict[str, Any]] = {}
    while batch := client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60).get("Messages"):
        seen.update((m["MessageId"], m) for m in batch)
    for m in seen.values():
        client.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    return sorted(m["Body"] for m in seen.values())


def test_the_tenants_messages_go_and_the_others_show_again_at_once(queue) -> None:
    client, url = queue
    kept = [add("bob", "I keep bees."), add("alice-2", "not alice"), "not json", json.dumps(["a", "list"])]
    for body in [add("alice", "My card is 4111 1111."), *kept, add("alice", "I live at 5 Elm St.")]:
        client.send_message(QueueUrl=url, MessageBody=body)

    dropped = SqsDeadLetters(url, client).drop(erase._queued_for("app", "alice"))

    assert dropped == 2
    assert bodies(client, url) == sorted(kept)  # visible again at once, not after the hold


def test_a_scan_stops_at_its_bound_puts_back_what_it_read_and_fails(queue) -> None:
    """A review: a scan stopped at its bound answered as if read through — the erasure SUCCEEDED, and a redrive wrote
    back the tenant's adds it had not read. It fails (retryable) instead; what it read is visible again."""
    from memlane.domain.errors import Retryable

    client, url = queue
    for i in range(15):
        client.send_message(QueueUrl=url, MessageBody=add("bob", "x" * i))

    with pytest.raises(Retryable, match="not read through"):
        SqsDeadLetters(url, client, max_messages=10).drop(lambda body: False)
    assert len(bodies(client, url)) == 15


def test_an_erasure_drops_the_tenants_refused_adds_and_says_how_many(queue, service, deps) -> None:
    client, url = queue
    stores.create(deps, name="demo")
    ingest.add(deps, "demo", scope={"app_id": "app", "tenant_id": "alice"},
               messages=[{"role": "user", "content": "I keep bees."}])
    for body in (add("alice", "My card is 4111 1111."), add("bob", "I keep bees.")):
        client.send_message(QueueUrl=url, MessageBody=body)
    deps.dead_letters = SqsDeadLetters(url, client)

    started = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    service.drain()

    done = deps.repo.get_erasure(started.erasure_id)
    assert done.status == "SUCCEEDED" and done.dead_letters == 1
    assert ["bob"] == [json.loads(b)["scope"]["tenant_id"] for b in bodies(client, url)]


def test_a_body_nested_past_the_parsers_depth_is_left_alone_not_the_end_of_every_erasure(queue) -> None:
    """A regression trial: any producer may send `[[[...]]]` 5,000 deep; refused, it waits in the dead letters, and
    reading it raised RecursionError — every tenant's erasure failed on it."""
    client, url = queue
    deep = "[" * 5000 + "]" * 5000
    for body in (deep, add("bob", "I keep bees.")):
        client.send_message(QueueUrl=url, MessageBody=body)

    assert SqsDeadLetters(url, client).drop(erase._queued_for("app", "bob")) == 1
    assert bodies(client, url) == [deep]


def test_an_add_that_names_no_tenant_is_the_default_tenants(queue) -> None:
    client, url = queue
    body = json.dumps({"store": "demo", "request_id": "q-1", "scope": {"app_id": "app"},
                       "messages": [{"role": "user", "content": "I keep bees."}]})
    client.send_message(QueueUrl=url, MessageBody=body)

    assert SqsDeadLetters(url, client).drop(erase._queued_for("app", "__default__")) == 1


def test_one_erasure_reads_the_dead_letters_at_a_time(queue, service, deps) -> None:
    """A regression trial: a scan holds every message it reads out of sight, so a second erasure reading beside it
    found the queue empty and kept its tenant's adds. The second waits (its job is retried) until the first is done."""
    from memlane.domain.errors import Retryable

    client, url = queue
    stores.create(deps, name="demo")
    client.send_message(QueueUrl=url, MessageBody=add("bob", "I keep bees."))
    deps.dead_letters = SqsDeadLetters(url, client)
    assert deps.repo.take_dead_letter_lease("alice-erasure", deps.clock.now(), erase.DEAD_LETTER_LEASE)
    bobs = erase.request_erasure(deps, app_id="app", tenant_id="bob", principal="ops")

    with pytest.raises(Retryable):
        erase.run_erasure(deps, bobs.erasure_id)
    assert len(bodies(client, url)) == 1

    deps.repo.release_dead_letter_lease("alice-erasure")
    assert erase.run_erasure(deps, bobs.erasure_id).dead_letters == 1
    assert bodies(client, url) == []
    assert deps.repo.take_dead_letter_lease("next", deps.clock.now(), erase.DEAD_LETTER_LEASE)  # released again
