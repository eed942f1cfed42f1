"""Stores: create, get, list, delete."""

from __future__ import annotations

from typing import Any, Sequence

from ..domain import limits
from ..domain.errors import ConditionFailed, Conflict, InvalidInput, NotFound
from ..domain.limits import MAX_INSTRUCTIONS_CHARS
from ..domain.models import DEFAULT_EXTRACT_ROLES, DreamMode, Store, validate_extract_roles, validate_store_name
from ..ports import Job
from . import embedder_guard
from .deps import Deps


def create(deps: Deps, *, name: str, description: str = "", extract_instructions: str = "",
           dream_mode: DreamMode = DreamMode.PROPOSAL, dream_threshold: float = 0.8,
           keywords_from_assistant: bool = False,
           extract_roles: Sequence[str] = DEFAULT_EXTRACT_ROLES,
           summary_trigger_tokens: int = limits.DEFAULT_SUMMARY_TRIGGER_TOKENS,
           summary_keep_recent: int = limits.DEFAULT_SUMMARY_KEEP_RECENT) -> Store:
    validate_store_name(name)
    _check_summary_settings(summary_trigger_tokens=summary_trigger_tokens, summary_keep_recent=summary_keep_recent)
    if len(extract_instructions) > MAX_INSTRUCTIONS_CHARS:
        raise InvalidInput(f"extract_instructions exceeds {MAX_INSTRUCTIONS_CHARS} characters",
                           field="extract_instructions")
    store = embedder_guard.recorded(Store(name=name, description=description, extract_instructions=extract_instructions,
                                          dream_mode=dream_mode, dream_threshold=dream_threshold,
                                          keywords_from_assistant=keywords_from_assistant,
                                          extract_roles=validate_extract_roles(list(extract_roles)),
                                          summary_trigger_tokens=summary_trigger_tokens,
                                          summary_keep_recent=summary_keep_recent,
                                          created_at=deps.clock.now()), deps.embedder)
    # Index first: if the catalog write then fails, an empty index is harmless; the reverse is not.
    purge = deps.repo.purge_state(name)
    if purge is not None:
        failed = f" (its purge failed: {purge['error']}; redrive its job)" if purge["status"] == "FAILED" else ""
        raise Conflict(f"store '{name}' is still being deleted{failed}; try again shortly", code="store_deleting",
                       field="name")
    deps.index.ensure_store(name, deps.embedder.dim)
    return deps.repo.create_store(store)


def _check_summary_settings(**settings: Any) -> None:
    if "summary_trigger_tokens" in settings:
        _check_range("summary_trigger_tokens", settings["summary_trigger_tokens"], limits.MIN_SUMMARY_TRIGGER_TOKENS,
                     limits.MAX_SUMMARY_TRIGGER_TOKENS)
    if "summary_keep_recent" in settings:
        _check_range("summary_keep_recent", settings["summary_keep_recent"], 0, limits.MAX_SUMMARY_KEEP_RECENT)


def _check_range(field: str, value: object, low: int, high: int) -> None:
    # bool is an int in Python: refuse it, as the HTTP models do (strict)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{field} must be an integer from {low} to {high}", field=field)


def get(deps: Deps, name: str) -> Store:
    validate_store_name(name)
    return deps.repo.get_store(name)


def still_the_store(deps: Deps, validated: Store) -> bool:
    """Whether the store a write checked at its start is still there — not deleted, nor deleted and made again under
    its name — now that everything of the write is written (its activity registry entry first). If so, the store's
    purge comes after it and finds it: the purge retires the store from the catalog before it lists the tenants. If
    not, the write takes itself back (an add, an explicit write, a thread's creation, an extraction's memories)."""
    try:
        return deps.repo.get_store(validated.name).created_at == validated.created_at
    except NotFound:
        return False


_UPDATE_RETRIES = 5  # each retry means another rewrite of the record (a reindex, a first use) came first


def update(deps: Deps, name: str, **settings: Any) -> Store:
    """Change a store's settings (description, extract_instructions, dream_mode, dream_threshold,
    keywords_from_assistant, extract_roles, summary_trigger_tokens, summary_keep_recent); they apply to the extractions and dreams that start after."""
    validate_store_name(name)
    unknown = set(settings) - _SETTINGS
    if unknown:
        raise InvalidInput(f"not a store setting: {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
    if "extract_roles" in settings:
        settings["extract_roles"] = validate_extract_roles(list(settings["extract_roles"]))
    _check_summary_settings(**settings)
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
                       "keywords_from_assistant", "extract_roles", "summary_trigger_tokens", "summary_keep_recent"})


def list_(deps: Deps, *, limit: int, cursor: str | None) -> tuple[list[Store], str | None]:
    return deps.repo.list_stores(limit, cursor)


def delete(deps: Deps, name: str) -> None:
    """Gone at once from the catalog and the index; its table items are purged by a queued job, committed
    with the record that keeps the name taken until the purge has finished (a crash after the commit leaves
    the job, which does all of this again; on SQS the sweeper sends it again)."""
    get(deps, name)
    now = deps.clock.now()
    deps.queue.commit(deps.table, [deps.repo.purging_put(name, now), deps.repo.retired_log_put(name, now)],
                      purge_job(name))
    retire(deps, name)


def purge_job(name: str) -> Job:
    return Job(kind="purge_store", store=name, request_id=name)


def retire(deps: Deps, name: str) -> None:
    """Out of the catalog, then out of the index: an add that still finds the store in the catalog once it
    has written has entered the activity registry by then, where the purge will find it (services/ingest.py)."""
    deps.repo.delete_store(name)
    deps.index.drop_store(name)
