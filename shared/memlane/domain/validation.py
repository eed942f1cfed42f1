"""Checks on free-form input that pydantic field constraints cannot express."""

from __future__ import annotations

import json
import re
from typing import Any

from . import limits
from .errors import InvalidInput, PayloadTooLarge

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:@+\-]{1,128}$")


def check_metadata(metadata: dict[str, Any] | None, field: str = "metadata") -> dict[str, Any]:
    """JSON object, bounded in size, depth and key count; keys are plain identifiers."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidInput(f"{field} must be an object", field=field)
    encoded = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False)
    if len(encoded.encode()) > limits.MAX_METADATA_BYTES:
        raise PayloadTooLarge(f"{field} exceeds {limits.MAX_METADATA_BYTES} bytes", field=field)
    if len(metadata) > limits.MAX_METADATA_KEYS:
        raise InvalidInput(f"{field} may have at most {limits.MAX_METADATA_KEYS} keys", field=field)
    for key in metadata:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", key):
            raise InvalidInput(f"{field} keys must be 1-64 characters of letters, digits, _ . -", field=field)

    def depth(v: Any) -> int:
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        return 0

    if depth(metadata) > limits.MAX_METADATA_DEPTH:
        raise InvalidInput(f"{field} may nest at most {limits.MAX_METADATA_DEPTH} levels", field=field)
    return metadata


def check_request_id(request_id: str | None) -> str | None:
    if request_id is not None and not _REQUEST_ID.fullmatch(request_id):
        raise InvalidInput("request_id must be 1-128 characters of letters, digits and _ . : @ + -",
                           field="request_id")
    return request_id
