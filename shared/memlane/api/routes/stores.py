from __future__ import annotations

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from ...domain import limits
from ...services import stores
from ...services.deps import Deps
from ..access import Gate
from ..models import CreateStoreIn, StoreList, StoreOut, UpdateStoreIn
from .common import Cursor, Limit


def routes(deps: Deps, gate: Gate) -> Router:
    router = Router()

    @router.post("/v1/stores", status_code=201, tags=["stores"], summary="Create a memory store")
    def create_store(body: CreateStoreIn) -> StoreOut:
        gate.require_admin(router.current_event)
        return StoreOut.of(stores.create(deps, **body.model_dump()))

    @router.get("/v1/stores", tags=["stores"], summary="List stores")
    def list_stores(limit: Limit = limits.DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> StoreList:
        gate.caller(router.current_event)  # any authenticated caller may see store names
        found, next_cursor = stores.list_(deps, limit=limit, cursor=cursor)
        return StoreList(stores=[StoreOut.of(s) for s in found], next_cursor=next_cursor)

    @router.get("/v1/stores/<store>", tags=["stores"], summary="Get a store")
    def get_store(store: str) -> StoreOut:
        gate.caller(router.current_event)
        return StoreOut.of(stores.get(deps, store))

    @router.patch("/v1/stores/<store>", tags=["stores"], summary="Change a store's settings")
    def update_store(store: str, body: UpdateStoreIn) -> StoreOut:
        gate.require_admin(router.current_event)
        return StoreOut.of(stores.update(deps, store, **body.model_dump(exclude_none=True)))

    @router.delete("/v1/stores/<store>", tags=["stores"], summary="Delete a store", status_code=204)
    def delete_store(store: str):  # type: ignore[no-untyped-def]  # Response is not a schema type
        gate.require_admin(router.current_event)
        stores.delete(deps, store)
        return Response(status_code=204, content_type=content_types.APPLICATION_JSON, body="")

    return router
