"""Every route of the API has an SDK method, with the API's own request and response models: the
OpenAPI document the server publishes is walked, so a route added without its SDK method fails here."""

from __future__ import annotations

import json

from memlane.api.app import api_description
from memlane.sdk import AsyncMemlane, Memlane
from memlane.sdk.routes import ROUTES

METHODS = ("get", "put", "post", "delete", "patch")


def _ref_name(schema: dict | None) -> object:
    if not schema:
        return None
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return frozenset(_ref_name(s) for s in schema["anyOf"])
    return schema


def _model_name(model: object) -> object:
    if model is None:
        return None
    args = getattr(model, "__args__", None)
    if args:  # a union of models
        return frozenset(a.__name__ for a in args)
    return model.__name__  # type: ignore[attr-defined]


def _documented() -> dict[tuple[str, str], dict]:
    paths = json.loads(api_description())["paths"]
    return {(method.upper(), path): op for path, item in paths.items() for method, op in item.items()
            if method in METHODS}


def test_every_documented_route_has_an_sdk_route_and_no_sdk_route_is_undocumented() -> None:
    documented = set(_documented())
    covered = {(route.method, route.path) for route in ROUTES}
    assert documented - covered == set(), "routes of /openapi.json without an SDK method"
    assert covered - documented == set(), "SDK routes the API does not have"


def test_each_route_uses_the_apis_own_models() -> None:
    documented = _documented()
    for route in ROUTES:
        op = documented[(route.method, route.path)]
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        assert _ref_name(body) == _model_name(route.request), route.sdk
        answers = {int(status): _ref_name(a.get("content", {}).get("application/json", {}).get("schema"))
                   for status, a in op["responses"].items() if status.startswith("2")}
        assert answers == {status: _model_name(model) for status, model in route.responses.items()}, route.sdk


def test_each_route_names_a_method_of_both_clients() -> None:
    sync, asynchronous = Memlane("http://127.0.0.1:9"), AsyncMemlane("http://127.0.0.1:9")
    for client in (sync, asynchronous):
        for route in ROUTES:
            group, method = route.sdk.split(".")
            assert callable(getattr(getattr(client, group), method, None)), route.sdk


def test_every_route_documents_the_error_body_it_answers_and_no_422() -> None:
    """A new user's trial: every operation declared only the framework's 422 HTTPValidationError, which the API never
    answers (a bad body is 400 invalid_input), and no 4xx of its own: a generated client handled no error right."""
    document = json.loads(api_description())
    for (method, path), op in _documented().items():
        responses = op["responses"]
        assert "422" not in responses, (method, path)
        for status in ("4XX", "5XX"):
            assert responses[status]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorOut"}, (method, path, status)
    assert document["components"]["schemas"]["ErrorOut"]["properties"]["error"] == {
        "$ref": "#/components/schemas/ErrorBody"}
    assert "ValidationError" not in json.dumps(document)
