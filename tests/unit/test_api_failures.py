"""`validation_failure`: the field a refused value is named by, whether the failure came located (the API's request
validation: body, query string or path first) or straight from a model (the SDK's check before sending)."""

from __future__ import annotations

from pydantic import ValidationError

from memlane.api import models as m
from memlane.api.failures import validation_failure


def _model_failures(body: dict) -> list:
    try:
        m.SearchIn.model_validate(body)
    except ValidationError as invalid:
        return invalid.errors()
    raise AssertionError("the body was accepted")


def test_a_body_field_named_query_keeps_its_name_whether_checked_by_the_model_or_the_api() -> None:
    """A trial: the SDK's refusal of an over-long search query said field None, "request: ...", because the leading
    "query" of the model's own location was taken for the query string; the API answers field "query". The API's
    located failures (where the value came from first) keep naming a query-string, path or body field by itself."""
    scope = {"app_id": "a", "tenant_id": "t"}
    for query in ("x" * 4001, ""):
        status, code, message, field = validation_failure(_model_failures({"query": query, "scope": scope}),
                                                          located=False)
        assert (status, code, field) == (400, "invalid_input", "query")
        assert message.startswith("query: ")

    def field_of(*loc: object) -> str | None:
        return validation_failure([{"loc": loc, "msg": "bad", "type": "value_error"}])[3]

    assert field_of("query", "limit") == "limit"
    assert field_of("path", "store") == "store"
    assert field_of("body", "query") == "query"
    assert field_of("body", "scope", "app_id") == "scope.app_id"
    assert field_of("body") is None  # the whole body: no field
    too_many = {"loc": ("messages",), "msg": "List should have at most 96 items", "type": "too_long"}
    assert validation_failure([too_many], located=False)[:2] == (413, "payload_too_large")  # either way, 413
    assert validation_failure([{**too_many, "loc": ("body", "messages")}])[:2] == (413, "payload_too_large")

