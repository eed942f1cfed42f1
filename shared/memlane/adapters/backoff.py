"""Jittered exponential backoff shared by the model adapters (HTTP and Bedrock).

"Full jitter" (a uniform draw in [0, min(cap, base * 2**attempt)]) spreads out the retries of
many concurrent workers that were throttled at the same moment, so they do not retry in step.
"""

from __future__ import annotations

import random
from typing import Callable

Sleep = Callable[[float], None]

DEFAULT_MAX_ATTEMPTS = 4  # the first try plus three retries
DEFAULT_BASE_S = 0.25
DEFAULT_CAP_S = 8.0


def backoff_delay(attempt: int, *, base: float = DEFAULT_BASE_S, cap: float = DEFAULT_CAP_S,
                  rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait after the failed try number `attempt` (0-based)."""
    return rng() * min(cap, base * 2.0 ** attempt)
