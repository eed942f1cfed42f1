"""How every Bedrock adapter makes its SDK calls: with explicit connect and read timeouts, retried a
bounded number of times while the service is throttling or warming up — never past a request's
deadline — then translated once, by error code, into the domain's errors."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, TypeVar

from botocore.exceptions import ClientError, ConnectionError, ReadTimeoutError

from ...domain.deadline import Deadline
from ...domain.errors import DeadlineExceeded, DependencyFailed, InvalidInput, MemlaneError, Retryable
from ..backoff import CallLimits, Sleep, pause

R = TypeVar("R")

# Worth retrying here, after a short wait.
RETRIED = frozenset({
    "ThrottlingException", "TooManyRequestsException", "ServiceUnavailableException",
    "ModelNotReadyException", "InternalServerException", "BadGatewayException",
})
# Transient, but not worth holding a worker for: the caller (queue redrive, client) retries later.
LATER = frozenset({"ModelTimeoutException", "ServiceQuotaExceededException"})
INVALID = frozenset({"ValidationException"})

# A call under a deadline waits for its answer at most the largest of these (seconds) that fits what is
# left of it: a few clients per service, each built once, rather than one per call (botocore sets the
# read timeout per client, not per request).
READ_TIMEOUT_STEPS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


def translate(error: ClientError, what: str) -> MemlaneError:
    code = error.response.get("Error", {}).get("Code", "Unknown")
    message = f"{what} failed: {code}: {error.response.get('Error', {}).get('Message', '')}"
    if code in RETRIED or code in LATER:
        return Retryable(message, code="model_unavailable", aws_code=code)
    if code in INVALID:
        return InvalidInput(message, code="model_rejected_input", aws_code=code)
    # AccessDenied, ResourceNotFound, ModelError, ...: configuration or model faults a retry won't fix.
    return DependencyFailed(message, code="model_failed", aws_code=code)


class Clients:
    """The boto3 clients of one Bedrock service: explicit connect and read timeouts (`limits`) and no
    retries of the SDK's own (`call` retries, with jittered backoff). An injected `client` (tests, a
    caller's own) is used as it is, whatever the budget."""

    def __init__(self, service: str, region: str | None, limits: CallLimits, client: Any = None) -> None:
        self.service, self.limits, self._fixed, self._region = service, limits, client, region
        self._built: dict[float, Any] = {}
        self._lock = threading.Lock()  # the embedder calls from a thread pool

    @property
    def region(self) -> str | None:
        return self._region or (self._fixed.meta.region_name if self._fixed is not None else None)

    def fitting(self, budget: float) -> Any | None:
        """A client that waits for an answer no longer than `budget` seconds; None when none fits."""
        if self._fixed is not None:
            return self._fixed
        read = self.limits.read_timeout
        if read > budget:
            read = max((s for s in READ_TIMEOUT_STEPS if s <= budget), default=0.0)
        if not read:
            return None
        with self._lock:
            if read not in self._built:
                self._built[read] = _client(self.service, self.region, self.limits.connect_timeout, read)
            return self._built[read]


def _client(service: str, region: str | None, connect_timeout: float, read_timeout: float) -> Any:
    import boto3
    from botocore.config import Config

    # retries max_attempts 0: no SDK retry on top of `call`'s, which would multiply the wait.
    config = Config(connect_timeout=connect_timeout, read_timeout=read_timeout,
                    retries={"max_attempts": 0, "mode": "standard"})
    return boto3.client(service, region_name=region, config=config)


def call(fn: Callable[[Any], R], clients: Clients, *, what: str, deadline: Deadline, sleep: Sleep = time.sleep) -> R:
    """Run one SDK call (`fn` takes the client) with bounded, jittered retries, each attempt waiting no
    longer than the deadline leaves; raise only domain errors (DeadlineExceeded once it has passed)."""
    attempts = max(1, clients.limits.max_attempts)
    for attempt in range(attempts):
        last = attempt == attempts - 1
        client = clients.fitting(deadline.budget(clients.limits.read_timeout))
        if client is None:
            raise DeadlineExceeded(f"{what}: the deadline leaves no time for a call")
        try:
            return fn(client)
        except ClientError as e:
            if last or e.response.get("Error", {}).get("Code") not in RETRIED:
                raise translate(e, what) from e
        except (ConnectionError, ReadTimeoutError) as e:
            if deadline.expired():
                raise DeadlineExceeded(f"{what}: no answer before the deadline ({e})") from e
            if last:
                raise Retryable(f"{what} failed: {e}", code="model_unavailable") from e
        pause(attempt, deadline, sleep, what)
    raise AssertionError("unreachable")  # the last attempt returns or raises
