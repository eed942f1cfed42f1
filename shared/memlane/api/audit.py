"""Every request of an identified caller — including those refused before a route runs — is written to
the audit log of the store it named, with the scope the grant check decided on (see api/access.Gate).

A request whose caller cannot be identified (no or an unknown key, no IAM identity) or has no grant at all
writes nothing into any store's log: whoever is anonymous could otherwise fill any store's log, so it is
one warning line in the application log (`memlane.audit`), where the log platform bounds its volume.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ..domain.errors import MemlaneError, NotFound
from ..domain.models import AuditRecord
from ..domain.scope import is_id
from ..services import audit
from ..services.deps import Deps
from .access import Checked, Gate
from .models import AddResult

log = logging.getLogger("memlane.audit")
_STORE_PATH = re.compile(r"^/v1/stores/([^/]+)(/.*)?$")
_ID_AFTER = re.compile(r"/(tasks|memories|dream-tasks|dream-actions|profiles|runs|tenants|threads|agents)/([^/]+)")
# The literal segments of the API's routes (tests/isolation/test_audit_trust.py checks them against the routes'
# paths): any other segment is a caller's — an id, or any text sent to a route that does not exist — and the
# log keeps a request's shape, never its words ("never message content": docs/security.md).
ROUTE_WORDS = frozenset("v1 stores memories memories:batch runs threads context summary tasks search messages scopes "
                        "access-policy dream dream-tasks dream-actions actions apply reject undo profiles agents "
                        "profile requests tenants erase erasures retry".split())
_METHODS = frozenset("GET HEAD POST PUT PATCH DELETE OPTIONS".split())


def operation(method: str, path: str) -> str:
    """The request's method and route, every caller-given segment as `{store}` or `{id}`."""
    m = _STORE_PATH.match(path)
    segments = ["v1", "stores", "{store}", *(m.group(2) or "").split("/")[1:]] if m else path.split("/")[1:]
    shape = "/".join(s if s in ROUTE_WORDS or not s or (i == 2 and s == "{store}") else "{id}"
                     for i, s in enumerate(segments))
    return f"{method if method in _METHODS else 'OTHER'} /{shape}"


_ERASURE_PATH = re.compile(r"^/v1/erasures/([^/]+)$")


def target(path: str, result: dict[str, Any] | None = None) -> str | None:
    """The id of the one record a route addresses (the memory deleted, the task read, the erasure read, the store
    itself), or made (the erasure a tenant's erase request started, the store created), when well formed."""
    m = _STORE_PATH.match(path)
    found = _ID_AFTER.search(m.group(2) or "") if m else _ERASURE_PATH.match(path)
    made: Any
    if found:
        made = found.group(found.lastindex or 0)
    elif m and not m.group(2):  # the store read, changed or deleted: its deletion is logged globally, by name
        made = m.group(1)
    elif path in _MAKING and result is not None:
        made = _answered(result).get(_MAKING[path])
    else:
        return None
    return made if isinstance(made, str) and is_id(made) else None


_MAKING = {"/v1/tenants/erase": "erasure_id", "/v1/stores": "name"}  # routes that make a record: its id's field


def _answered(result: dict[str, Any]) -> dict[str, Any]:
    try:
        body = json.loads(result.get("body") or "{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


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
    error = _answered(result).get("error") if status >= 400 else None
    error_code = error.get("code") if isinstance(error, dict) else None
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    op = operation(http.get("method", "GET"), path)
    try:
        principal = gate.caller(event).principal  # established by the route already, or identified now
    except MemlaneError as refused:
        named = refused.details.get("principal")  # authenticated, only without a grant: audited by name
        if not named:  # unidentified (401): no row anywhere, anyone could fill a store's log
            log.warning("refused %s: %s %s from %s (request %s)", op, status,
                        error_code or refused.code, http.get("sourceIp", "-"), context.get("requestId") or "-")
            return
        principal = str(named)
    m = _STORE_PATH.match(path)
    checked = gate.checked(event)
    # A change's answer replaces the row it wrote before it ran (same time, same request id, same log: its store
    # deleted meanwhile, the answer is a 404 the global log would otherwise take — two rows, one at status 0).
    store = checked.audit_log or _log_of(m.group(1) if m else None, error_code, op)
    # Only a record that was there: the id of a refused request is any text its caller chose (a regression trial).
    entry = AuditRecord(request_id=context.get("requestId") or "-", store=store, operation=op,
                        target_id=target(path, result) if status < 400 else None,
                        principal=principal, status=status, error_code=error_code, latency_ms=round(latency, 3),
                        at=checked.at or deps.clock.now(), **_storable(checked.scope))
    audit.record(deps, entry, retention_days)


def record_change(deps: Deps, checked: Checked, retention_days: int) -> None:
    """The row of a request that deletes or changes what is stored, written once its grant allows it and before
    it runs, with no answer (status 0): if the server dies before answering — the deletion finished later by its
    job — the log still holds who asked for what. The answer's row replaces it. Raises if it cannot be written:
    then nothing is changed."""
    context = checked.event.get("requestContext") or {}
    path = checked.event.get("rawPath") or "/"
    op = operation((context.get("http") or {}).get("method", "GET"), path)
    m = _STORE_PATH.match(path)
    assert checked.caller is not None and checked.at is not None  # the grant allowed it; `Api.resolve` stamped it
    # In the log its answer's row will be in: a store that does not exist has none (its 404 is logged globally).
    store = _log_of(m.group(1) if m else None, None, op)
    if store != audit.GLOBAL_STORE and not _exists(deps, store):
        store = audit.GLOBAL_STORE
    entry = AuditRecord(request_id=context.get("requestId") or "-", store=store, operation=op, target_id=target(path),
                        principal=checked.caller.principal, status=0, latency_ms=0.0, at=checked.at,
                        **_storable(checked.scope))
    audit.record(deps, entry, retention_days)
    checked.audit_log = store


def _exists(deps: Deps, store: str) -> bool:
    try:
        deps.repo.get_store(store)
    except NotFound:
        return False
    return True


def _storable(scope: dict[str, Any]) -> dict[str, Any]:
    """The scope a request named, as the log can store it: a refused request may name ids that are not
    Unicode (a lone surrogate), and its row is written all the same, with those escaped."""
    return {k: v.encode("utf-8", "backslashreplace").decode() if isinstance(v, str) else v for k, v in scope.items()}


def _log_of(store: str | None, error_code: str | None, op: str) -> str:
    """The store whose audit log records a request naming `store`: the global log when it names none, an
    invalid name, or a store that does not exist (no rows under its name) — and for a store's deletion, which
    is found where its creation is, not in a log no route reads once the store is gone."""
    if store is None or not re.fullmatch(r"[a-z0-9][a-z0-9\-]{0,62}", store) or error_code == "store_not_found" \
            or op == _STORE_DELETE:
        return audit.GLOBAL_STORE
    return store


_STORE_DELETE = "DELETE /v1/stores/{store}"


def record_add(deps: Deps, *, operation: str, request_id: str, principal: str, store: str | None, result: AddResult,
               scope: dict[str, str], latency_ms: float, retention_days: int) -> None:
    """The audit record of an add that was not its own HTTP request (a message of the ingestion queue)."""
    code = result.error.code if result.error else None
    entry = AuditRecord(request_id=request_id, store=_log_of(store, code, operation), operation=operation,
                        principal=principal, status=result.status, error_code=code, latency_ms=round(latency_ms, 3),
                        at=deps.clock.now(), **scope)
    try:
        audit.record(deps, entry, retention_days)
    except MemlaneError as error:  # the outcome stands even if its log line cannot be written
        log.error("audit record not written: %s", error.message)
