"""Jittered exponential backoff shared by the model adapters (HTTP and Bedrock).

"Full jitter" (a uniform draw in [0, min(cap, base * 2**attempt)]) spreads out the retries of
many concurrent workers that were throttled at the same moment, so they do not retry in step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from ..domain.deadline import Deadline
from ..domain.errors import DeadlineExceeded

Sleep = Callable[[float], None]

DEFAULT_MAX_ATTEMPTS = 3  # the first try plus two retries
DEFAULT_BASE_S = 0.25
DEFAULT_CAP_S = 8.0


def backoff_delay(attempt: int, *, base: float = DEFAULT_BASE_S, cap: float = DEFAULT_CAP_S,
                  rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait after the failed try number `attempt` (0-based)."""
    return rng() * min(cap, base * 2.0 ** attempt)


@dataclass(frozen=True)
class CallLimits:
    """What one model call may take: seconds to connect and to wait for the answer, and attempts (the
    first try included). Under a request's deadline each attempt gets at most what is left of it."""

    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS


def pause(attempt: int, deadline: Deadline, sleep: Sleep, what: str) -> None:
    """Wait before the retry after the failed try number `attempt` — unless the deadline comes first."""
    delay = backoff_delay(attempt)
    if delay >= deadline.remaining():
        raise DeadlineExceeded(f"{what}: no time is left before the deadline for another attempt")
    sleep(delay)
