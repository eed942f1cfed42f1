"""Typed errors of the SDK: one class per API error `code`, under one class per HTTP status.

The API answers every error as `{"error": {"code", "message", "field"?}}`; `error_for` turns that
answer into the most specific class the code names, else the status's class, else `ApiError`. Code
classes sit under the status the server maps them to (api/errors.py), so `except NotFound` catches
`StoreNotFound` too.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answer of the API (or none at all: `ConnectionFailed`). `code` is the API's stable code."""

    status: int = 0
    code: str = "error"
    # A 404 answering a DELETE sent again after an attempt that may have run (its answer lost, or a 5xx): that
    # attempt may have deleted it — what the caller wanted is then done.
    maybe_done: bool = False

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 retry_after: float | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.field, self.retry_after = status, code, message, field, retry_after


class ConnectionFailed(ApiError):
    """The server could not be reached (or the connection broke) and retrying did not help."""

    code = "connection_failed"


class TimedOut(ConnectionFailed):
    """No answer came in time (and retrying did not help): unlike a refused connection, the server may have done
    the request."""

    code = "timed_out"


class WaitTimeout(ApiError):
    """A `wait()` gave up before the task finished; `last` holds the task as last seen."""

    code = "wait_timeout"

    def __init__(self, message: str, last: Any):
        super().__init__(0, self.code, message)
        self.last = last


# one class per status the API uses
class BadRequest(ApiError):
    status, code = 400, "invalid_input"


class Unauthenticated(ApiError):
    status, code = 401, "unauthenticated"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"


class MethodNotAllowed(ApiError):
    status, code = 405, "method_not_allowed"


class Conflict(ApiError):
    status, code = 409, "conflict"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class UnsupportedMediaType(ApiError):
    status, code = 415, "unsupported_media_type"


class RateLimited(ApiError):
    status, code = 429, "rate_limited"


class ServerError(ApiError):
    status, code = 500, "internal_error"


class DependencyFailed(ServerError):
    status, code = 502, "dependency_failed"


class Unavailable(ServerError):
    status, code = 503, "retryable"


# the codes a caller is likely to branch on, each under its status
class InvalidScope(BadRequest):
    code = "invalid_scope"


class ConflictingScope(BadRequest):
    code = "conflicting_scope"


class TenantRequired(BadRequest):
    code = "tenant_required"


class InvalidCursor(BadRequest):
    code = "invalid_cursor"


class StoreNotFound(NotFound):
    code = "store_not_found"


class MemoryNotFound(NotFound):
    code = "memory_not_found"


class TaskNotFound(NotFound):
    code = "task_not_found"


class ThreadNotFound(NotFound):
    code = "thread_not_found"


class SummaryNotFound(NotFound):
    code = "summary_not_found"


class ProfileNotFound(NotFound):
    code = "profile_not_found"


class DreamTaskNotFound(NotFound):
    code = "dream_task_not_found"


class DreamActionNotFound(NotFound):
    code = "dream_action_not_found"


class ErasureNotFound(NotFound):
    code = "erasure_not_found"


class RouteNotFound(NotFound):
    code = "route_not_found"


class StoreExists(Conflict):
    code = "store_exists"


class ThreadExists(Conflict):
    code = "thread_exists"


class RequestIdReused(Conflict):
    code = "request_id_reused"


class MemoryIdReused(Conflict):
    code = "memory_id_reused"


class AccessPolicyMismatch(Conflict):
    code = "access_policy_mismatch"


class EmbedderMismatch(Conflict):
    code = "embedder_mismatch"


class ActionNotPending(Conflict):
    code = "action_not_pending"


class TaskNotFailed(Conflict):
    code = "task_not_failed"


class TaskNotRetryable(Conflict):
    code = "task_not_retryable"


class RequestContentDeleted(Conflict):
    code = "request_content_deleted"


class MemoriesNotKept(Conflict):
    code = "memories_not_kept"


class Busy(Conflict):
    code = "busy"


class QueueFull(RateLimited):
    code = "queue_full"


class DeadlineExceeded(Unavailable):
    code = "deadline_exceeded"


def _all(cls: type[ApiError]) -> list[type[ApiError]]:
    return [cls] + [c for sub in cls.__subclasses__() for c in _all(sub)]


_STATUS_CLASSES = (BadRequest, Unauthenticated, Forbidden, NotFound, MethodNotAllowed, Conflict, PayloadTooLarge,
                   UnsupportedMediaType, RateLimited, ServerError, DependencyFailed, Unavailable)
BY_STATUS: dict[int, type[ApiError]] = {cls.status: cls for cls in _STATUS_CLASSES}
BY_CODE: dict[str, type[ApiError]] = {cls.code: cls for cls in _all(ApiError)
                                      if cls not in _STATUS_CLASSES and cls.status}


def error_for(status: int, payload: Any, retry_after: float | None = None) -> ApiError:
    """The typed error of an error answer. A code is trusted only under the status it belongs to."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        code, message, field = str(error.get("code", "error")), str(error.get("message", "")), error.get("field")
    else:  # API Gateway's own answers ({"message": "Forbidden"}) carry no code
        message = str(payload.get("message", payload)) if isinstance(payload, dict) else str(payload or "")
        code, field = "", None
    by_status = BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    cls = BY_CODE.get(code)
    if cls is None or cls.status != by_status.status:
        cls = by_status
    return cls(status, code or cls.code, message, field, retry_after)
