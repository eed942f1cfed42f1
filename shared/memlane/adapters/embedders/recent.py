"""Any embedder, remembering the vectors of the texts it embedded last (least recently used out).

A live thread embeds the same text twice within a turn: the card's query is the user's new turn, and the
add of that turn embeds it to index the message; a repeated search asks again for the same query. A
vector is a pure function of the model and the text, so the second time costs a dictionary look-up
instead of a model call (ONNX: ~30 % of a context card; Bedrock, OpenAI: a network round trip).
One instance wraps one model, so its name and the text are the key."""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from typing import Sequence

from ...domain.deadline import Deadline
from ...ports import Budgeted, Embedder, origin

DEFAULT_SIZE = 256  # texts remembered: MiniLM's 384 floats ≈ 12 KB each, ~3 MB in all


class RecentVectors:
    def __init__(self, inner: Embedder, size: int = DEFAULT_SIZE) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._size = max(0, size)
        self._known: OrderedDict[tuple[str, str], tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def within(self, deadline: Deadline) -> "RecentVectors":
        """A view sharing the remembered vectors, its model bounded by `deadline` (ports.Budgeted)."""
        bounded = copy.copy(self)  # the same dictionary and lock
        bounded.inner = self.inner.within(deadline) if isinstance(self.inner, Budgeted) else self.inner
        bounded.origin = origin(self)
        return bounded

    def __len__(self) -> int:
        return len(self._known)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [(self.name, t) for t in texts]
        with self._lock:
            found = {k: self._known[k] for k in keys if k in self._known}
            for k in found:
                self._known.move_to_end(k)
        missing = list(dict.fromkeys(t for k, t in zip(keys, texts) if k not in found))
        if missing:
            # The model runs outside the lock: threads embedding other texts do not wait for each other.
            fresh = {(self.name, t): tuple(v) for t, v in zip(missing, self.inner.embed(missing))}
            found.update(fresh)
            with self._lock:
                self._known.update(fresh)
                while len(self._known) > self._size:
                    self._known.popitem(last=False)
        return [list(found[k]) for k in keys]  # a copy each: a caller may change its list
