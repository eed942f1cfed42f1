"""opensearch-py errors → domain errors, decided here once, by HTTP status and error type.

- unreachable, timed out, 429, 502/503/504 → Retryable (the same call may succeed later)
- the security plugin's DLS race (below)   → Retryable, code index_dls_race
- 400 (mapping / parsing / query errors)   → InvalidInput
- anything else (401/403, 5xx, bad config)  → DependencyFailed
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import OpenSearchException, TransportError

from ...domain.errors import DependencyFailed, InvalidInput, MemlaneError, Retryable

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
INDEX_NOT_FOUND = "index_not_found_exception"
# The security plugin of OpenSearch 2.x renders a tenant's document-level-security query for every index
# of the cluster, once for a request and again for its parts: an index created or dropped in between (any
# store's, any prefix's) makes the two differ, and the engine fails the read with 500 "dls_query does not
# match (SG 900D)" (opensearch-project/security#5997). The same read sent again succeeds.
DLS_RACE = "index_dls_race"


def error_type(error: Any) -> str:
    """The `type` of an OpenSearch error body (`{"error": {"type": ...}}` or the inner dict)."""
    if isinstance(error, dict):
        inner = error.get("error", error)
        if isinstance(inner, dict):
            return str(inner.get("type", ""))
        return str(inner)
    return str(error or "")


# A mapping error quotes the field's value ("... Preview of field's value: 'User lives at 5 Elm St'"): a memory's
# text, which errors go on to the logs and the caller with (a review). The value is withheld.
_PREVIEW = re.compile(r"\s*Preview of field's value:.*", re.S | re.I)


def _reason(error: Any) -> str:
    if isinstance(error, dict):
        inner = error.get("error", error)
        if isinstance(inner, dict):
            # The root cause says what went wrong ("all shards failed" above it does not).
            root = (inner.get("root_cause") or [{}])[0]
            error = root.get("reason") or inner.get("reason") or inner.get("type", "")
    return _PREVIEW.sub(" (its value withheld)", str(error))[:500]


def lost_dls_race(error: Any) -> bool:
    """Whether an error body (or None) is the security plugin's DLS race (DLS_RACE above)."""
    return (error is not None and error_type(error) == "security_exception"
            and "dls_query does not match" in _reason(error))


def from_status(status: int | None, error: Any, what: str, **details: Any) -> MemlaneError:
    """The domain error for a failed request (or one item of a bulk / msearch) with `status`."""
    kind, reason = error_type(error), _reason(error)
    message = f"OpenSearch {what} failed ({status} {kind}): {reason}"
    if lost_dls_race(error):
        return Retryable(message, code=DLS_RACE, status=status, error_type=kind, **details)
    if status is None or status in RETRYABLE_STATUSES:
        return Retryable(message, code="index_unavailable", status=status, error_type=kind, **details)
    if status == 400:
        return InvalidInput(message, code="index_rejected", status=status, error_type=kind, **details)
    return DependencyFailed(message, code="index_failed", status=status, error_type=kind, **details)


def translate(exc: OpenSearchException, what: str) -> MemlaneError:
    if isinstance(exc, OSConnectionError):  # includes ConnectionTimeout and SSLError
        return Retryable(f"OpenSearch unreachable during {what}: {exc.__class__.__name__}",
                         code="index_unavailable")
    if isinstance(exc, TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else None
        return from_status(status, exc.info if isinstance(exc.info, dict) else exc.error, what)
    return DependencyFailed(f"OpenSearch {what} failed: {exc}", code="index_failed")


@contextmanager
def boundary(what: str) -> Iterator[None]:
    """Wrap one client call: whatever opensearch-py raises leaves as a domain error."""
    try:
        yield
    except OpenSearchException as exc:
        raise translate(exc, what) from exc
