"""One error hierarchy for the whole service. Mapped to HTTP in exactly one place (api/errors.py)."""

from __future__ import annotations

from typing import Any


class MemlaneError(Exception):
    """Base class. `code` is machine-readable and stable; `message` is for humans."""

    code = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None, **details: Any):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.field = field
        self.details = details


class InvalidInput(MemlaneError):
    """The request is malformed or breaks a rule (scope rules, limits on ids)."""

    code = "invalid_input"


class InvalidScope(InvalidInput):
    code = "invalid_scope"


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"


class NotFound(MemlaneError):
    code = "not_found"


class Conflict(MemlaneError):
    """A write lost a race or would overwrite something it must not (conditional check failed)."""

    code = "conflict"


class Forbidden(MemlaneError):
    code = "forbidden"


class Unauthenticated(MemlaneError):
    code = "unauthenticated"


class Retryable(MemlaneError):
    """A dependency is throttling or briefly unavailable; the same call may succeed later."""

    code = "retryable"


class Overloaded(Retryable):
    """Too much work is waiting (the extraction queue is past its limit): retry after `retry_after` seconds."""

    code = "queue_full"

    def __init__(self, message: str, *, retry_after: int, **kwargs: Any):
        super().__init__(message, retry_after=retry_after, **kwargs)
        self.retry_after = retry_after


class DeadlineExceeded(Retryable):
    """Synchronous work ran out of its deadline (domain/deadline.py). A sync add or dream answers 202
    and its queued job finishes the work; elsewhere the caller may simply retry."""

    code = "deadline_exceeded"


class DependencyFailed(MemlaneError):
    """A dependency (LLM, embedder, engine) failed in a way a retry will not fix."""

    code = "dependency_failed"


class ConditionFailed(Conflict):
    """A conditional write found the item in another state than expected."""

    code = "condition_failed"
