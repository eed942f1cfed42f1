"""Identifiers: time-sortable ids for new things, content-derived ids where a retry must land on the same item."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def _b32(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        out.append(_ALPHABET[n & 31])
        n >>= 5
    return "".join(reversed(out))


def time_prefix(when: datetime) -> str:
    """10 characters that sort like the millisecond timestamp."""
    return _b32(int(when.timestamp() * 1000), 10)


def micro_prefix(when: datetime) -> str:
    """11 characters that sort like the microsecond timestamp."""
    return _b32((when - _EPOCH) // timedelta(microseconds=1), 11)


# A message's id: its time, its arrival, its position in the add, a tail derived from the add (services/ingest.py).
MESSAGE_ID_LENGTH = 10 + 11 + 2 + 14


def message_id_shaped(value: str) -> bool:
    """Whether `value` has the form of a message id the service makes (a client's memory id may not)."""
    return len(value) == MESSAGE_ID_LENGTH and all(c in _ALPHABET for c in value)


def ordinal(n: int) -> str:
    """2 characters that sort like n (n < 1024): the position of an item within one request."""
    return _b32(n, 2)


def sortable_id(now: datetime) -> str:
    """26 characters: 48-bit milliseconds then 80 random bits (ULID layout), sorts by creation time."""
    return time_prefix(now) + _b32(int.from_bytes(os.urandom(10), "big"), 16)


def derived_id(*parts: str) -> str:
    """A stable id from its inputs: the same job re-run writes the same ids, so it cannot duplicate."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return _b32(int.from_bytes(digest[:16], "big"), 26)
