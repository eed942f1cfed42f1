"""The tasks function: an add's status by request id; unknown ids; the health route."""

from __future__ import annotations

import io
import json
import logging

from tests.handlers.conftest import Aws, Bedrock
from tests.handlers.events import load_event


def test_task_status_of_an_add(aws: Aws, bedrock: Bedrock, store: str, ingest) -> None:
    ingest(load_event("ingest", "add"))
    tasks = aws.load("tasks")

    response = tasks(load_event("tasks", "task_status"))

    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    assert (body["request_id"], body["status"]) == ("req-7f3a9c", "PENDING")
    assert len(body["message_ids"]) == 2


def test_unknown_task_is_404(aws: Aws, bedrock: Bedrock, store: str) -> None:
    tasks = aws.load("tasks")
    event = load_event("tasks", "task_status")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/stores/demo/tasks/req-unknown"
    event["pathParameters"]["request_id"] = "req-unknown"

    response = tasks(event)

    assert response["statusCode"] == 404
    assert json.loads(response["body"])["error"]["code"] == "task_not_found"


def test_health(aws: Aws, bedrock: Bedrock) -> None:
    tasks = aws.load("tasks")
    event = load_event("tasks", "task_status")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/health"
    event["routeKey"] = event["requestContext"]["routeKey"] = "GET /health"
    event["pathParameters"] = None

    response = tasks(event)

    assert response["statusCode"] == 200 and json.loads(response["body"])["status"] == "ok"


def test_openapi_document_of_the_deployed_api_describes_every_route(aws: Aws, bedrock: Bedrock) -> None:
    from memlane.api.app import FAMILIES
    from tests.handlers.test_template import family_routes

    tasks = aws.load("tasks")  # serves GET /openapi.json beside GET /health; no grant needed, SigV4 is

    response = tasks(load_event("tasks", "openapi"))

    assert response["statusCode"] == 200
    document = json.loads(response["body"])
    routes = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    # the whole API, not only the routes of the function that happens to serve the document
    assert routes == family_routes(list(FAMILIES))
    assert document["info"]["title"] == "memlane"


def test_deleting_a_run_through_the_tasks_function_reinstates_what_it_superseded(aws: Aws, bedrock: Bedrock,
                                                                                  store: str) -> None:
    """DynamoDB (moto) and the Tasks function: the reinstate's conditional write and its index write (one
    embedding: the function may call the embedding model for it, nothing else)."""
    import urllib.parse
    from datetime import datetime, timezone

    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.domain.models import Memory, MemoryStatus, RecordType
    from memlane.domain.scope import Scope, ScopeFilter
    from memlane.ports import IndexQuery
    from tests.handlers.conftest import unit

    tenant = {"app_id": "support", "tenant_id": "u-42"}
    deps = bootstrap.build(Settings.from_env()).for_tenant(store, **tenant)
    said = datetime(2025, 1, 1, tzinfo=timezone.utc)
    moved = datetime(2025, 2, 1, tzinfo=timezone.utc)
    paris = Memory(memory_id="home-1", scope=Scope(**tenant, agent_id="helpdesk", run_id="a"),
                   text="Ann lives in Paris.", created_at=said, updated_at=moved, valid_to=moved,
                   status=MemoryStatus.SUPERSEDED, superseded_by="home-2")
    berlin = Memory(memory_id="home-2", scope=Scope(**tenant, agent_id="helpdesk", run_id="b"),
                    text="Ann moved to Berlin.", created_at=moved, updated_at=moved, supersedes="home-1")
    for m, axis in ((paris, 3), (berlin, 4)):
        deps.repo.put_memory(store, m)
        deps.index.upsert(store, [(m, unit(axis))])
    bedrock.embedding("Ann lives in Paris.", unit(3))  # the reinstate's index write

    event = load_event("tasks", "task_status")
    path = f"/v1/stores/{store}/runs/b"
    query = {**tenant, "agent_id": "helpdesk"}
    event["routeKey"] = event["requestContext"]["routeKey"] = "DELETE /v1/stores/{store}/runs/{run_id}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = "DELETE"
    event["rawQueryString"], event["queryStringParameters"] = urllib.parse.urlencode(query), query
    event["pathParameters"] = {"store": store, "run_id": "b"}
    response = aws.load("tasks")(event)

    assert response["statusCode"] == 200, response
    (item,) = aws.items(f"{store}#support#u-42", "MEM#")
    assert item["memory_id"] == "home-1" and item["status"] == "active"
    assert item.get("superseded_by") is None and item.get("valid_to") is None
    found = deps.index.search(store, IndexQuery(scope=ScopeFilter(**tenant), text="Paris", vector=unit(3), k=5,
                                                statuses=(MemoryStatus.ACTIVE,), record_types=(RecordType.MEMORY,)))
    assert {h.memory_id for h in found.vector} == {"home-1"}


def test_the_sweepers_run_logs_under_its_own_correlation_id_not_the_last_callers(aws: Aws, bedrock: Bedrock,
                                                                                 store: str, ingest,
                                                                                 monkeypatch) -> None:
    """A trial of warm containers: the sweeper logged its work (another tenant's request ids) under the API request
    id of the container's previous HTTP caller, so tracing that request showed the scheduler's work on others."""
    ingest(load_event("ingest", "add"))
    aws.sqs.purge_queue(QueueUrl=aws.queue_url)  # its job lost: the sweeper has something to log
    monkeypatch.setenv("MEMLANE_TASK_DEADLINE_SECONDS", "0")
    tasks = aws.load("tasks")
    # What the sweeper's logger writes (its handler may hold another test's stdout: Powertools keeps the first one).
    written = io.StringIO()
    for name in ("memlane.services.sweep", "memlane.services", "memlane"):
        for handler in logging.getLogger(name).handlers:
            monkeypatch.setattr(handler, "stream", written)
    caller = load_event("tasks", "task_status")
    assert tasks(caller)["statusCode"] == 200
    assert tasks(load_event("tasks", "sweep"))["requeued"] == 1
    lines = [json.loads(line) for line in written.getvalue().splitlines() if line.startswith("{")]
    logged = [line for line in lines if line.get("message", "").startswith("sweeper:")]
    assert logged and all(line.get("correlation_id") != caller["requestContext"]["requestId"] for line in logged)
    assert {line.get("correlation_id") for line in logged} == {load_event("tasks", "sweep")["id"]}
