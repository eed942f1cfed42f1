"""Stores: create, get, list, delete."""

from __future__ import annotations

from typing import Any, Sequence

from ..domain.errors import ConditionFailed, Conflict, InvalidInput
from ..domain.limits import MAX_INSTRUCTIONS_CHARS
from ..domain.models import DEFAULT_EXTRACT_ROLES, DreamMode, Store, validate_extract_roles, validate_store_name
from ..ports import Job
from . import embedder_guard
from .deps import Deps


def create(deps: Deps, *, name: str, description: str = "", extract_instructions: str = "",
           dream_mode: DreamMode = DreamMode.PROPOSAL, dream_threshold: float = 0.8,
           keywords_from_assistant: bool = False,
           extract_roles: Sequence[str] = DEFAULT_EXTRACT_ROLES) -> Store:
    validate_store_name(name)
    if len(extract_instructions) > MAX_INSTRUCTIONS_CHARS:
        raise InvalidInput(f"extract_instructions exceeds {MAX_INSTRUCTIONS_CHARS} characters",
                           field="extract_instructions")
    store = embedder_guard.recorded(Store(name=name, description=description, extract_instructions=extract_instructions,
                                          dream_mode=dream_mode, dream_threshold=dream_threshold,
                                          keywords_from_assistant=keywords_from_assistant,
                                          extract_roles=validate_extract_roles(list(extract_roles)),
                                          created_at=deps.clock.now()), deps.embedder)
    # Index first: if the catalog write then fails, an empty index is harmless; the reverse is not.
    if deps.repo.is_purging(name):
        raise Conflict(f"store '{name}' is still being deleted; try again shortly", code="store_deleting",
                       field="name")
    deps.index.ensure_store(name, deps.embedder.dim)
    return deps.repo.create_store(store)


def get(deps: Deps, name: str) -> Store:
    validate_store_name(name)
    return deps.repo.get_store(name)


_UPDATE_RETRIES = 5  # each retry means another rewrite of the record (a reindex, a first use) came first


def update(deps: Deps, name: str, **settings: Any) -> Store:
    """Change a store's settings (description, extract_instructions, dream_mode, dream_threshold,
    keywords_from_assistant, extract_roles); they apply to the extractions and dreams that start after."""
    validate_store_name(name)
    unknown = set(settings) - _SETTINGS
    if unknown:
        raise InvalidInput(f"not a store setting: {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
    if "extract_roles" in settings:
        settings["extract_roles"] = validate_extract_roles(list(settings["extract_roles"]))
    if len(settings.get("extract_instructions", "")) > MAX_INSTRUCTIONS_CHARS:
        raise InvalidInput(f"extract_instructions exceeds {MAX_INSTRUCTIONS_CHARS} characters",
                           field="extract_instructions")
    for _ in range(_UPDATE_RETRIES):
        store = deps.repo.get_store(name)
        try:
            return deps.repo.update_store(Store.model_validate({**store.model_dump(), **settings}))
        except ConditionFailed:
            continue  # rewritten meanwhile: apply the change to what it is now
    raise Conflict("the store is being rewritten; retry", code="busy")


_SETTINGS = frozenset({"description", "extract_instructions", "dream_mode", "dream_threshold",
                       "keywords_from_assistant", "extract_roles"})


def list_(deps: Deps, *, limit: int, cursor: str | None) -> tuple[list[Store], str | None]:
    return deps.repo.list_stores(limit, cursor)


def delete(deps: Deps, name: str) -> None:
    """Gone at once from the catalog and the index; its table items are purged by a queued job.
    The name cannot be reused until the purge has finished."""
    get(deps, name)
    deps.repo.mark_purging(name)
    deps.repo.delete_store(name)
    deps.index.drop_store(name)
    deps.queue.enqueue(Job(kind="purge_store", store=name, request_id=name))
