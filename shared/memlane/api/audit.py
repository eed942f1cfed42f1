"""Every request — including those refused before a route runs — is written to the audit log."""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from ..domain.errors import MemlaneError
from ..domain.models import AuditRecord
from ..services import audit
from ..services.deps import Deps
from .access import Gate

log = logging.getLogger("memlane.audit")
_STORE_PATH = re.compile(r"^/v1/stores/([^/]+)(/.*)?$")
_ID_AFTER = re.compile(r"/(tasks|memories|dream-tasks|dream-actions|profiles|runs|tenants)/[^/]+")
_SCOPE_FIELDS = ("app_id", "tenant_id", "agent_id", "run_id")


def operation(method: str, path: str) -> str:
    m = _STORE_PATH.match(path)
    if m:
        path = "/v1/stores/{store}" + _ID_AFTER.sub(r"/\1/{id}", m.group(2) or "")
    return f"{method} {path}"


def _scope(event: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    query = event.get("queryStringParameters") or {}
    try:
        body = json.loads(event.get("body") or "null")
    except ValueError:
        body = None
    sources = [query]
    if isinstance(body, dict):
        sources += [body.get("scope") if isinstance(body.get("scope"), dict) else {}, body]
    for source in sources:
        for f in _SCOPE_FIELDS:
            value = source.get(f)
            if f not in found and isinstance(value, str) and len(value) <= 256:
                found[f] = value
    return found


class AuditedResolver:
    """Resolves an event with `app` and records the outcome. Same interface as the resolver's resolve."""

    def __init__(self, app: APIGatewayHttpResolver, deps: Deps, gate: Gate, retention_days: int):
        self.app, self.deps, self.gate, self.retention_days = app, deps, gate, retention_days

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        result = self.app.resolve(event, context)
        latency = (time.perf_counter() - started) * 1000
        path = event.get("rawPath") or "/"
        if path in ("/health", "/openapi.json"):
            return result
        try:
            self._record(event, result, path, latency)
        except MemlaneError as error:  # the answer stands even if its log line cannot be written
            log.error("audit record not written: %s", error.message)
        return result

    def _record(self, event: dict[str, Any], result: dict[str, Any], path: str, latency: float) -> None:
        status = int(result.get("statusCode", 500))
        error_code = None
        if status >= 400:
            try:
                error_code = json.loads(result.get("body") or "{}").get("error", {}).get("code")
            except (ValueError, AttributeError):
                error_code = None
        try:
            principal = self.gate.caller(event).principal
        except MemlaneError:
            principal = "anonymous"
        m = _STORE_PATH.match(path)
        store = m.group(1) if m and re.fullmatch(r"[a-z0-9][a-z0-9\-]{0,62}", m.group(1)) else audit.GLOBAL_STORE
        context = event.get("requestContext") or {}
        method = (context.get("http") or {}).get("method", "GET")
        entry = AuditRecord(request_id=context.get("requestId") or "-", store=store, operation=operation(method, path),
                            principal=principal, status=status, error_code=error_code, latency_ms=round(latency, 3),
                            at=self.deps.clock.now(), **_scope(event))
        audit.record(self.deps, entry, self.retention_days)
