from __future__ import annotations

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from ...services import profiles
from ...services.deps import Deps
from ..access import Gate
from ..models import ActorProfileOut, AgentProfileIn, TenantProfileIn
from .common import IdParam


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.get("/v1/stores/<store>/profiles/<tenant_id>", tags=["profiles"],
                summary="A tenant's profile (or, with agent_id, one agent's): what was stated, merged with what a "
                        "dream distilled (explicit wins), and its rendered text")
    def get_profile(store: str, tenant_id: str, app_id: IdParam = None, agent_id: IdParam = None) -> ActorProfileOut:
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id)
        return ActorProfileOut.of(profiles.get(d, store, app_id=app_id, tenant_id=tenant_id, agent_id=agent_id))

    @router.put("/v1/stores/<store>/profiles/<tenant_id>", tags=["profiles"],
                summary="State a tenant's profile: text and attributes (replaces what was stated before)")
    def put_profile(store: str, tenant_id: str, body: TenantProfileIn) -> ActorProfileOut:
        d = gate.bind(router.current_event, store, body.app_id, tenant_id)
        return ActorProfileOut.of(profiles.put(d, store, app_id=body.app_id, tenant_id=tenant_id, text=body.text,
                                               attributes=body.attributes))

    @router.delete("/v1/stores/<store>/profiles/<tenant_id>", tags=["profiles"], status_code=204,
                   summary="Withdraw what was stated of a tenant (what a dream distilled stays)")
    def delete_profile(store: str, tenant_id: str, app_id: IdParam = None):  # type: ignore[no-untyped-def]
        d = gate.bind(router.current_event, store, app_id, tenant_id)
        profiles.delete(d, store, app_id=app_id, tenant_id=tenant_id)
        return Response(status_code=204, content_type=content_types.APPLICATION_JSON, body="")

    @router.get("/v1/stores/<store>/agents/<agent_id>/profile", tags=["profiles"],
                summary="An agent's profile within a tenant: its role and standing instructions, and what a dream "
                        "distilled of it")
    def get_agent_profile(store: str, agent_id: str, app_id: IdParam = None,
                          tenant_id: IdParam = None) -> ActorProfileOut:
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id)
        return ActorProfileOut.of(profiles.get(d, store, app_id=app_id, tenant_id=tenant_id, agent_id=agent_id))

    @router.put("/v1/stores/<store>/agents/<agent_id>/profile", tags=["profiles"],
                summary="State an agent's role and standing instructions for one tenant (replaces what was stated)")
    def put_agent_profile(store: str, agent_id: str, body: AgentProfileIn) -> ActorProfileOut:
        d = gate.bind(router.current_event, store, body.app_id, body.tenant_id, agent_id=agent_id)
        return ActorProfileOut.of(profiles.put(d, store, app_id=body.app_id, tenant_id=body.tenant_id,
                                               agent_id=agent_id, text=body.text, attributes=body.attributes))

    @router.delete("/v1/stores/<store>/agents/<agent_id>/profile", tags=["profiles"], status_code=204,
                   summary="Withdraw an agent's stated role and instructions for one tenant (what a dream distilled "
                           "stays)")
    def delete_agent_profile(store: str, agent_id: str, app_id: IdParam = None,  # type: ignore[no-untyped-def]
                             tenant_id: IdParam = None):
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id)
        profiles.delete(d, store, app_id=app_id, tenant_id=tenant_id, agent_id=agent_id)
        return Response(status_code=204, content_type=content_types.APPLICATION_JSON, body="")

    return router
