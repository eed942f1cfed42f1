"""Thread summaries: read a thread's rolling summary, or force a refresh (served by the Search function)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...services import summaries, threads
from ...services.deps import Deps
from ..access import Gate
from ..models import ScopeOut, SummaryOut, SummaryRefreshAccepted
from .common import IdParam


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.get("/v1/stores/<store>/threads/<thread_id>/summary", tags=["summaries"],
                summary="A thread's rolling summary, with its coverage and age (404 summary_not_found before the "
                        "first, thread_not_found when there is no such thread)")
    def get_summary(store: str, thread_id: str, app_id: IdParam = None, tenant_id: IdParam = None,
                    agent_id: IdParam = None) -> SummaryOut:
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id, run_id=thread_id)
        scope = threads.scope_of(d, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id, agent_id=agent_id)
        found = summaries.read(d, store, scope)
        return SummaryOut.of(found, now=d.clock.now(), tokenizer=d.tokenizer.name if d.tokenizer else None)

    @router.post("/v1/stores/<store>/threads/<thread_id>/summary", status_code=202, tags=["summaries"],
                 summary="Refresh a thread's summary now, whatever the trigger says (asynchronous: a task)")
    def refresh_summary(store: str, thread_id: str, app_id: IdParam = None, tenant_id: IdParam = None,
                        agent_id: IdParam = None) -> SummaryRefreshAccepted:
        d = gate.bind(router.current_event, store, app_id, tenant_id, agent_id=agent_id, run_id=thread_id)
        scope = threads.scope_of(d, store, app_id=app_id, tenant_id=tenant_id, thread_id=thread_id, agent_id=agent_id)
        task = summaries.request_refresh(d, store, scope)
        return SummaryRefreshAccepted(request_id=task.request_id, kind=task.kind, status=task.status,
                                      scope=ScopeOut(**scope.as_dict()))

    return router
