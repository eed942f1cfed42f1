"""The tasks function: an add's status by request id; unknown ids; the health route."""

from __future__ import annotations

import json

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
