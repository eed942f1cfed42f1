"""A byte-bounded LRU cache of per-tenant values (the embedded index's vector matrices and term indexes)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Protocol, TypeVar


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


T = TypeVar("T", bound=Sized)
TenantKey = tuple[str, str, str]  # (store, app_id, tenant_id)
CACHE_BYTES = 256 * 1024 * 1024  # bytes kept in memory across tenants, per cache


class TenantCache(Generic[T]):
    """Per-tenant values, least recently used dropped first once their `nbytes` pass `limit` (one always stays)."""

    def __init__(self, limit: int = CACHE_BYTES):
        self._entries: OrderedDict[TenantKey, tuple[T, int]] = OrderedDict()  # value, its nbytes when put
        self._bytes = 0
        self._limit = limit

    def get(self, key: TenantKey) -> T | None:
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: TenantKey, value: T) -> None:
        """Keep `value` (again, after it changed size)."""
        self.evict(key)
        self._entries[key] = (value, value.nbytes)
        self._bytes += value.nbytes
        while self._bytes > self._limit and len(self._entries) > 1:
            self.evict(next(iter(self._entries)))

    def evict(self, key: TenantKey) -> None:
        dropped = self._entries.pop(key, None)
        if dropped is not None:
            self._bytes -= dropped[1]

    def evict_store(self, store: str) -> None:
        for key in [k for k in self._entries if k[0] == store]:
            self.evict(key)

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
