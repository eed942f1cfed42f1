from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from ...domain import limits
from ...services import memories, messages, search
from ...services.deps import Deps
from ..access import Gate
from ..models import MemoryDeletedOut, MemoryList, MemoryOut, MessageList, MessageOut, SearchIn, SearchOut, SearchResultOut, \
    UpdateMemoryIn
from .common import Cursor, FlagParam, IdParam, Limit, ListParam, request_deadline, selector


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.post("/v1/stores/<store>/search", tags=["search"],
                 summary="Hybrid search over long-term memories (and, when asked, messages and summaries)")
    def search_memories(store: str, body: SearchIn) -> SearchOut:
        d = gate.bind(router.current_event, store, body.scope.app_id, body.scope.tenant_id,
                      agent_id=body.scope.agent_id, run_id=body.scope.run_id)
        d = d.within(request_deadline(router.lambda_context, deps.settings))  # its model calls, bounded
        hits = search.search(
            d, store, query=body.query, scope=body.scope.model_dump(exclude_none=True), top_k=body.top_k,
            min_similarity=body.min_similarity, include_evidence=body.include_evidence, filters=body.filters,
            memory_types=body.memory_types, include_superseded=body.include_superseded, time_from=body.time_from,
            time_to=body.time_to, recipe=body.recipe, as_of=body.as_of, record_types=body.record_types,
            exact_thread_match=body.exact_thread_match)
        return SearchOut(results=[SearchResultOut.of(h) for h in hits])

    @router.get("/v1/stores/<store>/memories", tags=["search"], summary="List memories of a tenant")
    def list_memories(store: str, app_id: IdParam = None, tenant_id: IdParam = None, agent_id: ListParam = None,
                      run_id: ListParam = None, limit: Limit = limits.DEFAULT_PAGE_SIZE,
                      cursor: Cursor = None) -> MemoryList:
        scope = {"app_id": app_id, "tenant_id": tenant_id, "agent_id": selector(agent_id),
                 "run_id": selector(run_id)}
        d = gate.bind(router.current_event, store, **scope)
        found, next_cursor = memories.list_(d, store, scope=scope, limit=limit, cursor=cursor)
        return MemoryList(memories=[MemoryOut.of(m) for m in found], next_cursor=next_cursor)

    @router.get("/v1/stores/<store>/memories/<memory_id>", tags=["search"], summary="Get a memory")
    def get_memory(store: str, memory_id: str, app_id: IdParam = None, tenant_id: IdParam = None) -> MemoryOut:
        d = gate.bind(router.current_event, store, app_id, tenant_id)
        return MemoryOut.of(memories.get(d, store, app_id=app_id, tenant_id=tenant_id, memory_id=memory_id))

    @router.patch("/v1/stores/<store>/memories/<memory_id>", tags=["search"], summary="Update a memory")
    def update_memory(store: str, memory_id: str, body: UpdateMemoryIn) -> MemoryOut:
        d = gate.bind(router.current_event, store, body.app_id, body.tenant_id)
        d = d.within(request_deadline(router.lambda_context, deps.settings))  # a new text is embedded
        return MemoryOut.of(memories.update(d, store, memory_id=memory_id, **body.model_dump()))

    @router.delete("/v1/stores/<store>/memories/<memory_id>", tags=["search"], summary="Delete a memory")
    def delete_memory(store: str, memory_id: str, app_id: IdParam = None,
                      tenant_id: IdParam = None) -> MemoryDeletedOut:
        d = gate.bind(router.current_event, store, app_id, tenant_id)
        return MemoryDeletedOut.of(memories.delete(d, store, app_id=app_id, tenant_id=tenant_id,
                                                   memory_id=memory_id))

    @router.get("/v1/stores/<store>/messages", tags=["search"], summary="Short-term memory: a run's messages")
    def list_messages(store: str, app_id: IdParam = None, tenant_id: IdParam = None, agent_id: IdParam = None,
                      run_id: IdParam = None, limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None,
                      newest_first: FlagParam = False) -> MessageList:
        scope = {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id, "run_id": run_id}
        d = gate.bind(router.current_event, store, **scope)
        found, next_cursor = messages.list_(d, store, scope=scope, limit=limit, cursor=cursor,
                                            newest_first=newest_first)
        return MessageList(messages=[MessageOut.of(m) for m in found], next_cursor=next_cursor)

    return router
