"""Checks on free-form input that pydantic field constraints cannot express."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from . import limits
from .errors import InvalidInput, PayloadTooLarge

_REQUEST_ID = re.compile(r"^(?!\.+$)[A-Za-z0-9_.:@+\-]{1,128}$")  # not dots alone: a path's dot segment
_STORED_REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:@+\-]{1,128}$")  # dots alone, taken by older versions: still read


def parse_body(text: str) -> Any:
    """A request body as JSON, or InvalidInput (400 `invalid_input`, no field): never an error the
    caller cannot act on.

    The standard parser recurses (a body nested 100,000 deep raises RecursionError), refuses integers
    past 4,300 digits with a bare ValueError and accepts NaN / Infinity, which are not JSON."""
    try:
        value = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=one_of_each)
    except RecursionError:
        raise InvalidInput(f"the body nests deeper than {limits.MAX_JSON_DEPTH} levels") from None
    except ValueError as error:  # JSONDecodeError, and the digit limit of int()
        raise InvalidInput(f"the body is not valid JSON: {error}") from None
    if _depth_over(value, limits.MAX_JSON_DEPTH):
        raise InvalidInput(f"the body nests deeper than {limits.MAX_JSON_DEPTH} levels")
    if _SURROGATE.search(text) and not _encodable(value):
        raise InvalidInput("the body is not valid Unicode: a lone surrogate (\\ud800-\\udfff) or bytes that are not "
                           "UTF-8")
    return value


def one_of_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object naming a key twice is refused: which one counts is up to each parser (`{"scope": A, "scope": B}`
    read one way by a proxy, another way here). Linear in its keys: the body is parsed before any grant check."""
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise InvalidInput(f"the body names the key {twice[:100]!r} twice in one object", code="duplicate_key")
    return value


# A lone surrogate is no character: it cannot be stored or sent on (UTF-8 has no form for it). JSON lets it in
# as an escape, and the local server turns bytes that are not UTF-8 into them; a pair is one character.
_SURROGATE = re.compile(r"[\ud800-\udfff]|\\u[dD][89abcdefABCDEF]")


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth_over(value: Any, limit: int) -> bool:
    """True when containers nest deeper than `limit` (iterative: safe on any input)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def check_metadata(metadata: dict[str, Any] | None, field: str = "metadata") -> dict[str, Any]:
    """JSON object, bounded in size, depth, key count and list length; keys are plain identifiers;
    numbers are finite and integers fit 64 bits."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidInput(f"{field} must be an object", field=field)
    if _depth_over(metadata, limits.MAX_METADATA_DEPTH):  # first: what follows recurses
        raise InvalidInput(f"{field} may nest at most {limits.MAX_METADATA_DEPTH} levels", field=field)
    if len(metadata) > limits.MAX_METADATA_KEYS:
        raise InvalidInput(f"{field} may have at most {limits.MAX_METADATA_KEYS} keys", field=field)
    for key in metadata:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", key):
            raise InvalidInput(f"{field} keys must be 1-64 characters of letters, digits, _ . -", field=field)
    stack: list[Any] = [metadata]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            if len(item) > limits.MAX_LIST_VALUES:
                raise InvalidInput(f"a list in {field} may hold at most {limits.MAX_LIST_VALUES} values", field=field)
            stack.extend(item)
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int) and abs(item) > limits.MAX_METADATA_INT:
            raise InvalidInput(f"integers in {field} must fit in 64 bits", field=field)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(f"numbers in {field} must be finite", field=field)
    encoded = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False)
    if len(encoded.encode()) > limits.MAX_METADATA_BYTES:
        raise PayloadTooLarge(f"{field} exceeds {limits.MAX_METADATA_BYTES} bytes", field=field)
    return metadata


def check_request_id(request_id: str | None, *, stored: bool = False) -> str | None:
    """A request id a new request may take; `stored`: one a read may name (an id taken before dots alone were
    refused is still found)."""
    if request_id is not None and not (_STORED_REQUEST_ID if stored else _REQUEST_ID).fullmatch(request_id):
        raise InvalidInput("request_id must be 1-128 characters of letters, digits and _ . : @ + -, not dots alone",
                           field="request_id")
    return request_id


def says_something(text: str) -> bool:
    """A letter or a digit in it: what a model answers as "   " or a zero-width space is no statement."""
    return any(ch.isalnum() for ch in text)
