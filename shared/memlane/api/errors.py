"""Domain errors → HTTP, in one place."""

from __future__ import annotations

import logging
import re
from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from ..domain import errors
from .failures import validation_failure

log = logging.getLogger("memlane.api")

STATUS: list[tuple[type[errors.MemlaneError], int]] = [
    (errors.PayloadTooLarge, 413),
    (errors.InvalidInput, 400),
    (errors.Unauthenticated, 401),
    (errors.Forbidden, 403),
    (errors.NotFound, 404),
    (errors.Conflict, 409),
    (errors.Overloaded, 429),
    (errors.Retryable, 503),
    (errors.DependencyFailed, 502),
]


def error_response(status: int, code: str, message: str, field: str | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if field:
        body["field"] = field
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body={"error": body},
                    headers=headers)


def status_of(error: errors.MemlaneError) -> int:
    return next((status for cls, status in STATUS if isinstance(error, cls)), 500)


def register(app: ApiGatewayResolver) -> None:
    @app.exception_handler(errors.MemlaneError)
    def _domain(error: errors.MemlaneError) -> Response:
        status = status_of(error)
        if status >= 500:
            log.error("request failed: %s %s", error.code, error.message)
        retry = {"Retry-After": str(error.retry_after)} if isinstance(error, errors.Overloaded) else None
        return error_response(status, error.code, error.message, error.field, retry)

    @app.exception_handler(RequestValidationError)
    def _validation(error: RequestValidationError) -> Response:
        status, code, message, field = validation_failure(error.errors())
        return error_response(status, code, message, field)

    @cache
    def routes() -> list[tuple[re.Pattern[str], str]]:
        """(path pattern, method) of every documented route, from the API's own OpenAPI paths."""
        paths = app.get_openapi_schema().paths or {}
        return [(re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(path)) + "$"), method.upper())
                for path, item in paths.items() for method in ("get", "put", "post", "delete", "patch")
                if getattr(item, method, None) is not None]

    @app.not_found
    def _not_found(_: Exception) -> Response:
        path = app.current_event.path
        allowed = sorted({method for pattern, method in routes() if pattern.match(path)})
        if app.current_event.http_method.upper() in allowed:
            # The route takes this method, but the router refused a segment: a character no id may hold ("#",
            # which API Gateway hands over decoded from "%23"). The same answer as an id checked by its route.
            return error_response(400, "invalid_input", f"{path}: a path segment holds a character no id may hold")
        if allowed:  # the resource exists, the method does not: 405 with what it does take
            response = error_response(405, "method_not_allowed", f"{path} takes {', '.join(allowed)}")
            response.headers["Allow"] = ", ".join(allowed)
            return response
        return error_response(404, "route_not_found", "no such route")
