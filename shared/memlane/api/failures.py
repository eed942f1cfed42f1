"""A body that fails its model, as the API answers it: shared by the API (api/errors.py) and the SDK, which checks a
body with the same model before sending it and refuses it with the same status, code and field."""

from __future__ import annotations

from typing import Any, Sequence


def validation_failure(failures: Sequence[Any], *, located: bool = True) -> tuple[int, str, str, str | None]:
    """(status, code, message, field) of a request that failed its model: the first failure, by its field.
    `located`: each `loc` starts with where the value came from (body, query string, path), as the API's request
    validation says it; a model's own validation (the SDK's before sending) starts at the field, which may itself be
    called "query" (a search body's: a trial found it stripped, the field None)."""
    first = failures[0] if failures else {}
    loc = [str(p) for p in first.get("loc", ())]
    if located and loc[:1] in (["body"], ["query"], ["path"]):
        loc = loc[1:]
    field = ".".join(loc) or None
    message = f"{field or 'request'}: {first.get('msg', 'invalid value')}"
    # too many messages (an add), memories (an explicit write) or adds (a batch) is a too-large body, as the
    # services say
    too_many = first.get("type") == "too_long" and loc[:1] in (["messages"], ["memories"], ["adds"])
    return (413, "payload_too_large", message, field) if too_many else (400, "invalid_input", message, field)
