"""Who is calling: the principal of an HTTP event, checked against its grant by every route.

The gate also remembers, per request, what it established — the caller and the scope its grant check
decided on — so the audit log records that scope, not one re-read from wherever a caller put it.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from ..domain.errors import InvalidInput, MemlaneError
from ..services import access
from ..services.deps import Deps

SCOPE_FIELDS = ("app_id", "tenant_id", "agent_id", "run_id")


@dataclass
class Checked:
    """What the gate established about one request (one event): who called and the scope it checked."""

    event: dict[str, Any]
    caller: access.Caller | None = None
    refusal: MemlaneError | None = None  # the caller could not be identified (401), or has no grant
    scope: dict[str, str] = field(default_factory=dict)
    at: datetime | None = None  # when the request arrived: its audit row's time
    announced: bool = False  # a change's audit row is written before it runs (`Gate.before_change`)
    audit_log: str | None = None  # the log that row went to: the answer's row replaces it there


class Gate:
    """Identifies the caller of the current event (API key locally, IAM identity on AWS) and checks scopes.

    Every route authenticates before it looks anything up, so without a valid key the answer is 401
    whether or not the store or id exists.
    """

    def __init__(self, deps: Deps, mode: access.AuthMode, *, audit_retention_days: int = 30,
                 before_change: Callable[[Checked], None] | None = None):
        self.deps, self.mode = deps, mode
        self.audit_retention_days = audit_retention_days  # for the rows a route writes itself (a batch's adds)
        # Called once the grant allows a request that deletes or changes what is stored (`changes`), before
        # it runs: its audit row must not depend on the server living to answer it.
        self.before_change = before_change
        self._local = threading.local()  # one request per thread at a time; keyed by the event itself

    def checked(self, event: APIGatewayProxyEventV2 | dict[str, Any]) -> Checked:
        raw = event.raw_event if isinstance(event, APIGatewayProxyEventV2) else event
        current: Checked | None = getattr(self._local, "checked", None)
        if current is None or current.event is not raw:
            current = self._local.checked = Checked(raw)
        return current

    def caller(self, event: APIGatewayProxyEventV2 | dict[str, Any]) -> access.Caller:
        checked = self.checked(event)
        if checked.caller is None and checked.refusal is None:
            try:
                checked.caller = self._identify(checked.event)
            except MemlaneError as error:
                checked.refusal = error
        if checked.refusal is not None:
            raise checked.refusal
        assert checked.caller is not None
        return checked.caller

    def _identify(self, raw: dict[str, Any]) -> access.Caller:
        headers = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
        authorization = headers.get("authorization", "")
        api_key = authorization[7:].strip() if authorization.lower().startswith("bearer ") else None
        iam = ((raw.get("requestContext") or {}).get("authorizer") or {}).get("iam") or {}
        return access.identify(self.deps, self.mode, api_key=api_key, iam_principal=iam.get("userArn"))

    def require(self, event: Any, app_id: str | None, tenant_id: str | None, **narrower: Any) -> access.Caller:
        """Check the caller's grant for app/tenant. `narrower` are the route's other scope fields (agent_id,
        run_id): recorded with it. The scope must come from one place: given again elsewhere in the
        request (query string, body, path) with another value, it is refused (400 `conflicting_scope`)."""
        caller = self.caller(event)
        checked = self.checked(event)
        bound = {"app_id": app_id, "tenant_id": tenant_id, **narrower}
        # a list (search may name several runs) is kept comma-joined: ids never contain a comma
        checked.scope = {k: ",".join(v) if isinstance(v, list) else v for k, v in bound.items()
                         if isinstance(v, (str, list))}
        access.require(caller, app_id, tenant_id)
        # After the grant check: a scope is refused as given twice only to a caller granted it (a row never
        # records a scope no check decided on, and the answer is the one naming that scope alone would get).
        _refuse_conflicts(checked.event, bound)
        self._announce(checked)
        return caller

    def bind(self, event: Any, store: str, app_id: str | None, tenant_id: str | None, **narrower: Any) -> Deps:
        """Check the caller's grant, then the deps to serve it with: bound to that one tenant, so its
        partition is reached with that tenant's credentials only (STS-scoped on AWS)."""
        self.require(event, app_id, tenant_id, **narrower)
        if app_id is None or tenant_id is None:
            return self.deps  # the service refuses the missing scope with a clear 400
        return self.deps.for_tenant(store, app_id, tenant_id)

    def bind_owner(self, event: Any, store: str, owner: Callable[[access.Visible], tuple[str, str]]) -> Deps:
        """For a route addressed by an id (task, dream task, action): authenticate first, then find the id's
        tenant with `owner(visible)`, which answers the same 404 for an id outside the caller's grant as for
        one that does not exist — neither the owner nor the existence of the id leaks."""
        caller = self.caller(event)
        app_id, tenant_id = owner(caller.may_use)
        return self.bind(event, store, app_id, tenant_id)

    def require_admin(self, event: Any) -> access.Caller:
        caller = self.caller(event)
        access.require_admin(caller)
        self._announce(self.checked(event))
        return caller

    def _announce(self, checked: Checked) -> None:
        if self.before_change is not None and not checked.announced and changes(checked.event):
            self.before_change(checked)
            checked.announced = True


def changes(raw: dict[str, Any]) -> bool:
    """Whether a request deletes or changes what is stored, rather than adding to it (an add is answered only once
    committed, and its retry is idempotent) or reading: a DELETE, PATCH or PUT, an erasure, a dream action applied,
    rejected or undone."""
    method = ((raw.get("requestContext") or {}).get("http") or {}).get("method", "GET")
    path = raw.get("rawPath") or ""
    return method in ("DELETE", "PATCH", "PUT") or method == "POST" and (
        path == "/v1/tenants/erase" or _DREAM_ACTION.match(path) is not None)


_DREAM_ACTION = re.compile(r"^/v1/stores/[^/]+/dream-actions/[^/]+/(?:apply|reject|undo)$")


def _refuse_conflicts(raw: dict[str, Any], bound: Mapping[str, Any]) -> None:
    """400 if a scope field the route reads appears elsewhere in the request with another value."""
    for source, values in _scope_sources(raw):
        for name, given in values.items():
            if name in bound and _norm(given, source == "query") != _norm(bound[name], False):
                raise InvalidInput(f"{name} is given twice with different values (in the {source} too); give the "
                                   "scope in one place", code="conflicting_scope", field=name)


def _scope_sources(raw: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    sources = [("query", raw.get("queryStringParameters") or {})]
    try:
        body = json.loads(raw.get("body") or "null")
    except (ValueError, RecursionError):  # a malformed body is answered 400 by the parser
        body = None
    if isinstance(body, dict):
        sources.append(("body", body))
        if isinstance(body.get("scope"), dict):
            sources.append(("body scope", body["scope"]))
    # an empty value is an absent one, as in the scope rules (domain/scope.py)
    return [(name, {f: v[f] for f in SCOPE_FIELDS if v.get(f) not in (None, "")}) for name, v in sources]


def _norm(value: Any, from_query: bool) -> tuple[str, ...] | None:
    """Compare scope values across sources: API Gateway joins a repeated query parameter with commas
    (ids never contain one); a body may carry a list."""
    if value is None:
        return None
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return tuple(str(value).split(",")) if from_query else (str(value),)
