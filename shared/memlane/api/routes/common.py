"""Query parameter types shared by the route modules."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BeforeValidator

from ...domain import limits
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
