"""Who is calling: the principal of an HTTP event, checked against its grant by every route."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from ..services import access
from ..services.deps import Deps


class Gate:
    """Identifies the caller of the current event (API key locally, IAM identity on AWS) and checks scopes."""

    def __init__(self, deps: Deps, mode: access.AuthMode):
        self.deps, self.mode = deps, mode

    def caller(self, event: APIGatewayProxyEventV2 | dict[str, Any]) -> access.Caller:
        raw = event.raw_event if isinstance(event, APIGatewayProxyEventV2) else event
        headers = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
        authorization = headers.get("authorization", "")
        api_key = authorization[7:].strip() if authorization.lower().startswith("bearer ") else None
        iam = ((raw.get("requestContext") or {}).get("authorizer") or {}).get("iam") or {}
        return access.identify(self.deps, self.mode, api_key=api_key, iam_principal=iam.get("userArn"))

    def require(self, event: Any, app_id: str | None, tenant_id: str | None) -> access.Caller:
        caller = self.caller(event)
        access.require(caller, app_id, tenant_id)
        return caller

    def bind(self, event: Any, store: str, app_id: str | None, tenant_id: str | None) -> Deps:
        """Check the caller's grant, then the deps to serve it with: bound to that one tenant, so its
        partition is reached with that tenant's credentials only (STS-scoped on AWS)."""
        self.require(event, app_id, tenant_id)
        if app_id is None or tenant_id is None:
            return self.deps  # the service refuses the missing scope with a clear 400
        return self.deps.for_tenant(store, app_id, tenant_id)

    def require_admin(self, event: Any) -> access.Caller:
        caller = self.caller(event)
        access.require_admin(caller)
        return caller
