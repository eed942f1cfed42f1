"""Build the HTTP application: the same resolver serves API Gateway and `memlane serve`."""

from __future__ import annotations

from typing import Iterable

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types

from .. import __version__
from ..services.deps import Deps
from . import errors
from ..services.access import AuthMode
from .access import Gate
from .audit import AuditedResolver
from .routes import ingest, search, stores, tasks

FAMILIES = {"stores": stores.routes, "ingest": ingest.routes, "search": search.routes, "tasks": tasks.routes}


def build_app(deps: Deps, families: Iterable[str] = tuple(FAMILIES), *, auth: AuthMode = "none") -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver(enable_validation=True)
    gate = Gate(deps, auth)
    for family in families:
        app.include_router(FAMILIES[family](deps, gate))
    errors.register(app)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi():  # type: ignore[no-untyped-def]
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=openapi_json(app))

    @app.get("/health", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    return app


def build_api(deps: Deps, families: Iterable[str] = tuple(FAMILIES), *, auth: AuthMode = "none",
              audit_retention_days: int = 30) -> AuditedResolver:
    """The application as served: every request resolved and written to the audit log."""
    return AuditedResolver(build_app(deps, families, auth=auth), deps, Gate(deps, auth), audit_retention_days)


def openapi_json(app: APIGatewayHttpResolver) -> str:
    return app.get_openapi_json_schema(title="memlane", version=__version__,
                                       summary="Durable, scoped memory for agents")
