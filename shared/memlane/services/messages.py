"""Short-term memory: the raw messages of one run, in order, paginated."""

from __future__ import annotations

from typing import Any

from ..domain.models import Message
from ..domain.scope import exact_scope
from .deps import Deps


def list_(deps: Deps, store: str, *, scope: dict[str, Any], limit: int, cursor: str | None,
          newest_first: bool = False) -> tuple[list[Message], str | None]:
    deps.repo.get_store(store)
    return deps.repo.list_messages(store, exact_scope(scope), limit=limit, cursor=cursor, forward=not newest_first)
