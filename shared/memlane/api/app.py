"""Build the HTTP application: the same resolver serves API Gateway and `memlane serve`."""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import json
import logging
import threading
import time
from typing import Any, Callable, Iterable

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from .. import __version__
from ..domain.errors import MemlaneError
from ..domain.limits import MAX_BODY_BYTES
from ..domain.validation import parse_body
from ..services.deps import Deps
from . import errors
from ..services.access import AuthMode
from .access import Gate
from .audit import operation, record_change, record_request
from .models import ErrorOut

log = logging.getLogger(__name__)

# The route families, each a module of api/routes with a `routes(deps, gate)`. A Lambda function imports
# only the families it serves (their services and models are much of its cold start: docs/benchmarks.md §9).
FAMILIES = ("stores", "ingest", "search", "tasks", "dream", "threads", "profiles", "context", "summaries")


def routes_of(family: str) -> Callable[[Deps, Gate], Router]:
    if family not in FAMILIES:
        raise ValueError(f"no route family {family!r} (one of {', '.join(FAMILIES)})")
    return importlib.import_module(f"{__package__}.routes.{family}").routes


class RequestScopedResolver(APIGatewayHttpResolver):
    """Powertools' resolver with its per-request state kept per thread.

    The framework assigns the current event and Lambda context to the `BaseRouter` *class* — sound in
    Lambda, one request per process, but `memlane serve` resolves many requests at once, and a class
    attribute let one thread read another's caller, scope and body. Here the event, the context and the
    route state (`context`) live in a thread-local; every router reaches them through this resolver.
    """

    def __init__(self, **kwargs: Any):
        self._request = threading.local()
        super().__init__(**kwargs)

    @property  # type: ignore[override]
    def current_event(self) -> Any:
        return self._request.event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._request.event = value

    @property  # type: ignore[override]
    def lambda_context(self) -> Any:
        return self._request.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._request.lambda_context = value

    @property  # type: ignore[override]
    def context(self) -> dict[str, Any]:
        if not hasattr(self._request, "context"):
            self._request.context = {}
        return self._request.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context = value

    def build_routes(self) -> None:
        """Build every route's middleware chain now, once all routes are registered. Powertools builds it on
        the route's first call with an unlocked check-then-build: two first calls at once both built it, the
        second wrapping the first's chain, and the route answered 500 until the process restarted."""
        for route in [*self._static_routes, *self._dynamic_routes]:
            route._build_middleware_stack(router_middlewares=self._router_middlewares, app=self)

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        # The base class also writes the event to the shared class attribute; nothing here reads it.
        self.current_event, self.lambda_context, self.context = self._to_proxy_event(event), context, {}
        return super().resolve(event, context)


def build_app(deps: Deps, families: Iterable[str] = tuple(FAMILIES), *, auth: AuthMode = "none",
              gate: Gate | None = None) -> APIGatewayHttpResolver:
    # Bodies go through one parser that answers every malformed one with 400 invalid_input.
    app = RequestScopedResolver(enable_validation=True, json_body_deserializer=parse_body)
    gate = gate or Gate(deps, auth)
    for family in families:
        app.include_router(routes_of(family)(deps, gate))
    errors.register(app)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi():  # type: ignore[no-untyped-def]
        # The whole API, whichever families this app serves: on AWS one function (Tasks) answers for all.
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=api_description())

    @app.get("/health", include_in_schema=False)
    def health():  # type: ignore[no-untyped-def]  # (a Response annotation breaks the OpenAPI model)
        # 503 when the local workers are dead: accepted adds would never be extracted.
        q = deps.queue.health()
        ok = q.worker_alive is not False
        body = {"status": "ok" if ok else "worker_dead", "version": __version__,
                "embedder": {"name": deps.embedder.name, "dim": deps.embedder.dim},
                "worker": {"alive": q.worker_alive, "queue_depth": q.depth,
                           "oldest_pending_seconds": q.oldest_pending_seconds, "dead_letters": q.dead}}
        return Response(status_code=200 if ok else 503, content_type=content_types.APPLICATION_JSON, body=body)

    app.build_routes()
    return app


class Api:
    """The application as served, on AWS and locally: JSON bodies only, every request audited."""

    def __init__(self, deps: Deps, families: Iterable[str] = tuple(FAMILIES), *, auth: AuthMode = "none",
                 audit_retention_days: int = 30):
        # one gate for the routes and the audit record: it keeps what it checked for each request
        self.gate = Gate(deps, auth, audit_retention_days=audit_retention_days,
                         before_change=lambda checked: record_change(deps, checked, audit_retention_days))
        self.app = build_app(deps, families, auth=auth, gate=self.gate)
        self.deps, self.retention_days = deps, audit_retention_days

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        self.gate.checked(event).at = self.deps.clock.now()
        try:
            result = (self._refuse_stranger(event) or self._refuse_non_json(event) or self._refuse_oversized(event)
                      or self.app.resolve(event, context))
        except Exception:  # noqa: BLE001 — a bug answers 500 and is audited like any other answer
            # The route's shape: ids are the data's, which no erasure takes out of a log.
            log.exception("unhandled error on %s", operation(event.get("requestContext", {}).get("http", {}).get(
                "method", "-"), event.get("rawPath") or "/"))
            result = _error_result(500, "internal_error", "internal error")
        record_request(self.deps, self.gate, event, result, (time.perf_counter() - started) * 1000,
                       self.retention_days)
        return result

    def record_refusal(self, event: dict[str, Any], result: dict[str, Any]) -> None:
        """Audit a request the HTTP server refused before it reached the API (bad framing, foreign Host)."""
        record_request(self.deps, self.gate, event, result, 0.0, self.retention_days)

    def refuse_unauthenticated(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The answer (audited) to a caller its headers do not identify — no key, an unknown key, no grant —
        or None. The local server asks before it reads a body, so no stranger's body is read or parsed;
        the routes check the same `Gate` again, with the scope, once the body is in."""
        started = time.perf_counter()
        try:
            self.gate.caller(event)
            return None
        except MemlaneError as error:
            result = _error_result(errors.status_of(error), error.code, error.message)
        record_request(self.deps, self.gate, event, result, (time.perf_counter() - started) * 1000,
                       self.retention_days)
        return result

    def _refuse_stranger(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """401 (or 403 without a grant) to a caller its headers do not identify, whatever the path — before a route
        is matched or a body validated, so no answer (404 route_not_found, 405, 400) tells a stranger what exists (a
        new user's trial). Not /health and /openapi.json: a load balancer's probe, and the public API description."""
        if event.get("rawPath") in _OPEN_PATHS:
            return None
        try:
            self.gate.caller(event)
        except MemlaneError as error:
            return _error_result(errors.status_of(error), error.code, error.message)
        return None

    @staticmethod
    def _refuse_oversized(event: dict[str, Any]) -> dict[str, Any] | None:
        """The body limit the local server holds its socket to, for every way in: API Gateway and Lambda let
        ~6 MB through, past what one add's transaction may carry on DynamoDB (4 MB)."""
        body = event.get("body") or ""
        too_large = _error_result(413, "payload_too_large", f"the body exceeds {MAX_BODY_BYTES} bytes")
        if not event.get("isBase64Encoded"):
            return too_large if len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES else None
        if len(body) > 4 * (MAX_BODY_BYTES // 3 + 1):  # more than any encoding of MAX_BODY_BYTES: not decoded
            return too_large
        try:
            size = len(base64.b64decode(body, validate=True))
        except (binascii.Error, ValueError):
            return _error_result(400, "invalid_input", "the body is marked base64 but is not valid base64")
        return too_large if size > MAX_BODY_BYTES else None

    @staticmethod
    def _refuse_non_json(event: dict[str, Any]) -> dict[str, Any] | None:
        """A body sent as anything but JSON (curl -d sends a form) gets a clear 415 before any parsing."""
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        if not event.get("body") or headers.get("content-type", "").lower().startswith("application/json"):
            return None
        return _error_result(415, "unsupported_media_type",
                             "send the body as JSON with the header Content-Type: application/json")


_OPEN_PATHS = frozenset({"/health", "/openapi.json"})


def _error_result(status: int, code: str, message: str) -> dict[str, Any]:
    body = {"error": {"code": code, "message": message}}
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body),
            "isBase64Encoded": False}


def build_api(deps: Deps, families: Iterable[str] = tuple(FAMILIES), *, auth: AuthMode = "none",
              audit_retention_days: int = 30) -> Api:
    return Api(deps, families, auth=auth, audit_retention_days=audit_retention_days)


@functools.cache
def api_description() -> str:
    """The OpenAPI document of every route family (built once; no route runs, so no deps are needed)."""
    return openapi_json(build_app(None, FAMILIES))  # type: ignore[arg-type]


def openapi_json(app: APIGatewayHttpResolver) -> str:
    """The document, with the errors the API answers: `{"error": {code, message, field?}}` for every 4xx and 5xx,
    never the framework's 422 (a bad body is 400 `invalid_input`: a client generated from it handled no error
    right — a new user's trial)."""
    document = json.loads(app.get_openapi_json_schema(title="memlane", version=__version__,
                                                      summary="Durable, scoped memory for agents"))
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}
    for item in document["paths"].values():
        for route in item.values():
            responses = route.get("responses", {})
            responses.pop("422", None)
            responses["4XX"] = {"description": "Refused: the error's `code` says why", **error}
            responses["5XX"] = {"description": "Failed or unavailable (503 with Retry-After: retry)", **error}
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    error_out = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(error_out.pop("$defs"), ErrorOut=error_out)
    return json.dumps(document)
