"""Memories: get, list, update, delete. Table first, then the index derived from it."""

from __future__ import annotations

from typing import Any

from ..domain.errors import InvalidInput
from ..domain.limits import MAX_CONTENT_CHARS
from ..domain.models import Memory, MemoryStatus, MemoryType
from ..domain.scope import search_scope, validate_id
from ..domain.validation import check_metadata
from . import embedder_guard
from .deps import Deps


def get(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, memory_id: str) -> Memory:
    deps.repo.get_store(store)
    return deps.repo.get_memory(store, validate_id("app_id", app_id), validate_id("tenant_id", tenant_id),
                                validate_id("memory_id", memory_id))


def list_(deps: Deps, store: str, *, scope: dict[str, Any], limit: int,
          cursor: str | None) -> tuple[list[Memory], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_memories(store, search_scope(scope), limit=limit, cursor=cursor)


def update(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, memory_id: str, text: str | None = None,
           metadata: dict[str, Any] | None = None, memory_type: MemoryType | None = None,
           importance: float | None = None) -> Memory:
    embedder_guard.ensure(deps, deps.repo.get_store(store))  # the index gets a vector of the store's model
    memory = get(deps, store, app_id=app_id, tenant_id=tenant_id, memory_id=memory_id)
    if memory.status == MemoryStatus.DELETED:
        raise InvalidInput("a deleted memory cannot be updated", code="memory_deleted", field="memory_id")
    changes: dict[str, Any] = {"updated_at": deps.clock.now()}
    if text is not None:
        if not text.strip() or len(text) > MAX_CONTENT_CHARS:
            raise InvalidInput(f"text must be 1-{MAX_CONTENT_CHARS} characters", field="text")
        changes["text"] = text
    if metadata is not None:
        changes["metadata"] = check_metadata(metadata)
    if memory_type is not None:
        changes["memory_type"] = memory_type
    if importance is not None:
        changes["importance"] = importance
    updated = memory.model_copy(update=changes)
    deps.repo.put_memory(store, updated)
    deps.index.upsert(store, [(updated, deps.embedder.embed([updated.text])[0])])
    return updated


def delete(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, memory_id: str) -> Memory:
    """Soft delete in the table (kept for audit and undo), gone from the index."""
    memory = get(deps, store, app_id=app_id, tenant_id=tenant_id, memory_id=memory_id)
    deleted = memory.model_copy(update={"status": MemoryStatus.DELETED, "updated_at": deps.clock.now()})
    deps.repo.put_memory(store, deleted)
    deps.index.delete(store, [memory_id])
    return deleted
