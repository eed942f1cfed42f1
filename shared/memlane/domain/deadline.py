"""A deadline for synchronous work: when a request must stop working and answer.

Taken once per request from what the caller can wait — on AWS the Lambda context's remaining time,
capped by the HTTP API's integration limit; locally a setting — less a margin to write the answer.
It travels with the request's dependencies (services/deps.py), never in a global: services check it
between steps, and model adapters take what is left of it as the budget of their calls and retries.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from .errors import DeadlineExceeded

# The HTTP API gives up on an integration after 30 s; a synchronous answer must be written before.
HTTP_API_LIMIT_SECONDS = 29.0


@dataclass(frozen=True)
class Deadline:
    expires_at: float = math.inf  # on `clock`'s scale
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def never(cls) -> "Deadline":
        return cls()

    @classmethod
    def after(cls, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> "Deadline":
        return cls(clock() + max(0.0, seconds), clock)

    @classmethod
    def for_request(cls, remaining_seconds: float | None, *, cap: float, margin: float,
                    clock: Callable[[], float] = time.monotonic) -> "Deadline":
        """A synchronous request's deadline: the time its runtime has left (None: unknown), at most
        `cap`, less `margin` kept back to write the answer."""
        budget = cap if remaining_seconds is None else min(remaining_seconds, cap)
        return cls.after(budget - margin, clock=clock)

    @property
    def bounded(self) -> bool:
        return self.expires_at != math.inf

    def remaining(self) -> float:
        """Seconds left (inf for no deadline, 0 once passed)."""
        return max(0.0, self.expires_at - self.clock())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def check(self, step: str) -> None:
        """Between steps: raise DeadlineExceeded once it has passed, naming the step not started."""
        if self.expired():
            raise DeadlineExceeded(f"the deadline passed before {step}")

    def budget(self, cap: float) -> float:
        """The time one call may take: `cap`, or less when the deadline is nearer."""
        return min(cap, self.remaining())
