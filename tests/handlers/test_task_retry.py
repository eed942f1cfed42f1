"""The Tasks function retries a FAILED task: its last delivery gave the extraction up (moto's SQS and DynamoDB), the
retry answers 202 with the task PENDING and puts one job on the queue, which the Extract function runs to SUCCEEDED;
a second retry is 409 and queues nothing. The models are the hashing embedder, no LLM (nothing here calls one)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.handlers.conftest import Aws, parameter_default
from tests.handlers.events import load_event

SCOPE = {"app_id": "support", "tenant_id": "u-42", "agent_id": "helpdesk", "run_id": "r-1"}
LAST = parameter_default("ExtractMaxReceives")


@pytest.fixture()
def deps(aws: Aws, granted: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "none", "MEMLANE_RERANKER": "none"}.items():
        monkeypatch.setenv(name, value)
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import stores

    deps = bootstrap.build(Settings.from_env())
    stores.create(deps, name="demo")
    return deps


def retry_event(request_id: str) -> dict[str, Any]:
    event = load_event("tasks", "task_status")
    path = f"/v1/stores/demo/tasks/{request_id}/retry"
    event["routeKey"] = event["requestContext"]["routeKey"] = "POST /v1/stores/{store}/tasks/{request_id}/retry"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = "POST"
    event["pathParameters"] = {"store": "demo", "request_id": request_id}
    return event


def status_of(deps: Any, request_id: str) -> tuple[str, str | None]:
    task = deps.repo.locate_task("demo", request_id)
    return str(task.status), task.error


def test_the_tasks_function_retries_a_given_up_extraction_with_one_job(aws: Aws, deps: Any) -> None:
    from memlane.services import ingest

    task = ingest.add(deps, "demo", scope=SCOPE, text="I adopted a beagle named Max.")
    extract = aws.load("extract")
    [message] = aws.queued()
    message["Attributes"]["ApproximateReceiveCount"] = str(LAST)  # every delivery before it timed out
    assert extract(aws.sqs_event([message]))["batchItemFailures"]
    aws.sqs.purge_queue(QueueUrl=aws.queue_url)  # on to the dead-letter queue
    assert status_of(deps, task.request_id)[0] == "FAILED"
    tasks = aws.load("tasks")

    response = tasks(retry_event(task.request_id))

    assert response["statusCode"] == 202, response
    body = json.loads(response["body"])
    assert (body["request_id"], body["status"], body["attempts"], body.get("error")) == (task.request_id, "PENDING",
                                                                                           0, None)
    [job] = aws.queued()
    assert (json.loads(job["Body"])["kind"], json.loads(job["Body"])["request_id"]) == ("extract", task.request_id)
    assert [i["request_id"] for i in aws.items("demo#~open")] == [task.request_id]  # the sweeper's net
    again = tasks(retry_event(task.request_id))  # PENDING now
    assert again["statusCode"] == 409 and json.loads(again["body"])["error"]["code"] == "task_not_failed"
    assert len(aws.queued()) == 1

    assert extract(aws.sqs_event([job])) == {"batchItemFailures": []}
    assert status_of(deps, task.request_id) == ("SUCCEEDED", None)
    audit = [i for i in aws.items("demo#~audit") if i["operation"] == "POST /v1/stores/{store}/tasks/{id}/retry"]
    assert sorted((int(i["status"]), i.get("target_id")) for i in audit) == [(202, task.request_id), (409, None)]
