"""The ingest function: create store, add (202, table + queue), idempotent replays, refusals.
request_id replays after authorization, reuse and per-tenant ids: test_request_ids.py."""

from __future__ import annotations

import json

from tests.handlers.conftest import ACCOUNT, Aws
from tests.handlers.events import load_event, with_body

TENANT_PK = "demo#support#u-42"


def body(response: dict) -> dict:
    return json.loads(response["body"])


def add_body(**changes: object) -> dict:
    return {**json.loads(load_event("ingest", "add")["body"]), **changes}


def test_create_store_writes_the_catalog_entry(aws: Aws, store: str) -> None:
    catalog = aws.items("~stores")
    assert [(i["sk"], i["embedding_model"], i["embedding_dim"]) for i in catalog] == \
        [("demo", "amazon.titan-embed-text-v2:0", 256)]
    assert catalog[0]["embedding_fingerprint"] and len(catalog[0]["embedding_probe"]) == 3  # embedder_guard
    assert store == "demo"


def test_add_writes_messages_and_task_and_enqueues_one_job(aws: Aws, store: str, ingest, capsys) -> None:
    response = ingest(load_event("ingest", "add"))

    assert response["statusCode"] == 202
    assert body(response) == {"request_id": "req-7f3a9c", "status": "PENDING"}
    messages = aws.items(TENANT_PK, "MSG#helpdesk#r-2024-03-11#")
    assert [m["content"] for m in messages] == ["I adopted a beagle named Max last Saturday.",
                                                "Congratulations! Beagles are lovely dogs."]
    [task] = aws.items(TENANT_PK, "TASK#")
    assert (task["request_id"], task["status"]) == ("req-7f3a9c", "PENDING")
    [queued] = aws.queued()
    assert json.loads(queued["Body"]) == {"kind": "extract", "store": "demo", "request_id": "req-7f3a9c",
                                          "app_id": "support", "tenant_id": "u-42",
                                          "group": "demo/support/u-42",  # the tenant: its fairness group
                                          "agent_id": None, "run_id": None}  # only a summarize job names a thread
    # EMF metrics, one blob per invocation, in the memlane namespace with the function's service name
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert blobs[-1]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "memlane"
    assert (blobs[-1]["service"], blobs[-1]["Requests"]) == ("ingest", [1.0])


def test_replayed_add_creates_no_second_task_and_no_second_message(aws: Aws, store: str, ingest) -> None:
    first = ingest(load_event("ingest", "add"))
    again = ingest(load_event("ingest", "add"))

    assert again["statusCode"] == first["statusCode"] == 202
    assert again["body"] == first["body"]
    assert len(aws.items(TENANT_PK, "TASK#")) == 1
    assert len(aws.items(TENANT_PK, "MSG#")) == 2
    assert len(aws.queued()) == 1


def test_a_refused_add_leaves_nothing_so_its_retry_runs(aws: Aws, granted: None, ingest) -> None:
    missing = ingest(load_event("ingest", "add"))  # the store does not exist yet
    assert missing["statusCode"] == 404 and body(missing)["error"]["code"] == "store_not_found"
    assert aws.items(TENANT_PK) == [] and aws.items("demo#~requests") == []

    assert ingest(load_event("ingest", "create_store"))["statusCode"] == 201
    retried = ingest(load_event("ingest", "add"))

    assert retried["statusCode"] == 202 and body(retried)["request_id"] == "req-7f3a9c"
    assert len(aws.queued()) == 1


def test_adds_without_request_id_are_two_tasks(aws: Aws, store: str, ingest) -> None:
    plain = {k: v for k, v in add_body().items() if k != "request_id"}

    first = ingest(with_body(load_event("ingest", "add"), plain))
    second = ingest(with_body(load_event("ingest", "add"), plain))

    assert first["statusCode"] == second["statusCode"] == 202
    assert body(first)["request_id"] != body(second)["request_id"]
    assert len(aws.items(TENANT_PK, "TASK#")) == 2


def test_caller_without_grant_is_refused_and_nothing_is_written(aws: Aws, store: str, ingest) -> None:
    event = load_event("ingest", "add")
    event["requestContext"]["authorizer"]["iam"]["userArn"] = f"arn:aws:sts::{ACCOUNT}:assumed-role/intruder/s1"

    response = ingest(event)

    assert response["statusCode"] == 403 and body(response)["error"]["code"] == "no_grant"
    assert aws.items(TENANT_PK) == [] and aws.queued() == []
