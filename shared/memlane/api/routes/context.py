from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...services import context
from ...services.deps import Deps
from ..access import Gate
from ..context_models import ContextIn, ContextOut
from .common import request_deadline


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.post("/v1/stores/<store>/threads/<thread_id>/context", tags=["context"],
                 summary="A thread's context card: profiles, summary, memories, plans, recent turns under a token budget")
    def context_card(store: str, thread_id: str, body: ContextIn) -> ContextOut:
        d = gate.bind(router.current_event, store, body.app_id, body.tenant_id, agent_id=body.agent_id,
                      run_id=thread_id)
        d = d.within(request_deadline(router.lambda_context, deps.settings))  # the card's search, bounded
        return ContextOut.of(context.build(d, store, app_id=body.app_id, tenant_id=body.tenant_id, thread_id=thread_id,
                                           agent_id=body.agent_id, query=body.query, budget_tokens=body.budget_tokens,
                                           recent_messages=body.recent_messages, sections=body.sections,
                                           recall_scope=body.recall_scope))

    return router
