"""Every request — including those refused before a route runs — is written to the audit log."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

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
    except (ValueError, RecursionError):  # a malformed body is answered 400; its record has no scope
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


def record_request(deps: Deps, gate: Gate, event: dict[str, Any], result: dict[str, Any], latency_ms: float,
                   retention_days: int) -> None:
    """Write one audit record for a resolved request; a failure to write is logged, never raised."""
    path = event.get("rawPath") or "/"
    if path in ("/health", "/openapi.json"):
        return
    try:
        _record(deps, gate, event, result, path, latency_ms, retention_days)
    except MemlaneError as error:  # the answer stands even if its log line cannot be written
        log.error("audit record not written: %s", error.message)


def _record(deps: Deps, gate: Gate, event: dict[str, Any], result: dict[str, Any], path: str, latency: float,
            retention_days: int) -> None:
    status = int(result.get("statusCode", 500))
    error_code = None
    if status >= 400:
        try:
            error_code = json.loads(result.get("body") or "{}").get("error", {}).get("code")
        except (ValueError, AttributeError):
            error_code = None
    try:
        principal = gate.caller(event).principal
    except MemlaneError:
        principal = "anonymous"
    m = _STORE_PATH.match(path)
    store = m.group(1) if m and re.fullmatch(r"[a-z0-9][a-z0-9\-]{0,62}", m.group(1)) else audit.GLOBAL_STORE
    context = event.get("requestContext") or {}
    method = (context.get("http") or {}).get("method", "GET")
    entry = AuditRecord(request_id=context.get("requestId") or "-", store=store, operation=operation(method, path),
                        principal=principal, status=status, error_code=error_code, latency_ms=round(latency, 3),
                        at=deps.clock.now(), **_scope(event))
    audit.record(deps, entry, retention_days)
