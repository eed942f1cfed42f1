"""Query parameter types shared by the route modules."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BeforeValidator

from ...domain import limits
from ...domain.deadline import Deadline
from ...services.deps import CoreSettings
from ..models import Instant

IdParam = Annotated[str | None, Query(max_length=256)]
ListParam = Annotated[list[str] | None, Query()]  # repeat the parameter for a list; '*' for any


def _flag(value: object) -> object:
    """A query flag is `true` or `false`: not yes, 1 or on (which pydantic's lax bool would take)."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError("must be true or false")
    return value


Flag = Annotated[bool, BeforeValidator(_flag)]
FlagParam = Annotated[Flag, Query()]
InstantParam = Annotated[Instant | None, Query()]
Limit = Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)]
Cursor = Annotated[str | None, Query(max_length=2048)]


def selector(values: list[str] | None) -> str | list[str] | None:
    """A repeated query parameter: one value is exact (or '*'), several are a list."""
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def request_deadline(lambda_context: Any, settings: CoreSettings) -> Deadline:
    """The deadline of a synchronous request: its Lambda's remaining time (the local server's context
    has one too), at most `sync_deadline_seconds`, less `sync_margin_seconds` to write the answer."""
    remaining = getattr(lambda_context, "get_remaining_time_in_millis", None)
    return Deadline.for_request(remaining() / 1000 if remaining is not None else None,
                                cap=settings.sync_deadline_seconds, margin=settings.sync_margin_seconds)
