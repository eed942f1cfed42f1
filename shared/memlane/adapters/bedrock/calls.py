"""How every Bedrock adapter makes its SDK calls: retried while the service is throttling or
warming up, then translated once, by error code, into the domain's errors."""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from botocore.exceptions import ClientError, ConnectionError, ReadTimeoutError

from ...domain.errors import DependencyFailed, InvalidInput, MemlaneError, Retryable
from ..backoff import DEFAULT_MAX_ATTEMPTS, Sleep, backoff_delay

R = TypeVar("R")

# Worth retrying here, after a short wait.
RETRIED = frozenset({
    "ThrottlingException", "TooManyRequestsException", "ServiceUnavailableException",
    "ModelNotReadyException", "InternalServerException", "BadGatewayException",
})
# Transient, but not worth holding a worker for: the caller (queue redrive, client) retries later.
LATER = frozenset({"ModelTimeoutException", "ServiceQuotaExceededException"})
INVALID = frozenset({"ValidationException"})


def translate(error: ClientError, what: str) -> MemlaneError:
    code = error.response.get("Error", {}).get("Code", "Unknown")
    message = f"{what} failed: {code}: {error.response.get('Error', {}).get('Message', '')}"
    if code in RETRIED or code in LATER:
        return Retryable(message, code="model_unavailable", aws_code=code)
    if code in INVALID:
        return InvalidInput(message, code="model_rejected_input", aws_code=code)
    # AccessDenied, ResourceNotFound, ModelError, ...: configuration or model faults a retry won't fix.
    return DependencyFailed(message, code="model_failed", aws_code=code)


def call(fn: Callable[[], R], *, what: str, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
         sleep: Sleep = time.sleep) -> R:
    """Run one SDK call with bounded, jittered retries; raise only domain errors."""
    attempts = max(1, max_attempts)
    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            return fn()
        except ClientError as e:
            if last or e.response.get("Error", {}).get("Code") not in RETRIED:
                raise translate(e, what) from e
        except (ConnectionError, ReadTimeoutError) as e:
            if last:
                raise Retryable(f"{what} failed: {e}", code="model_unavailable") from e
        sleep(backoff_delay(attempt))
    raise AssertionError("unreachable")  # the last attempt returns or raises


def default_client(service: str, region: str | None) -> Any:
    """A boto3 client, built only when none is injected (tests and the local mode never need one)."""
    import boto3
    from botocore.config import Config

    # `call` retries throttling with backoff; botocore's own retries on top would multiply the wait.
    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, read_timeout=120)
    return boto3.client(service, region_name=region, config=config)
