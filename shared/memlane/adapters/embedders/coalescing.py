"""Any embedder, its concurrent calls coalesced: callers that arrive while the model is busy share its
next call.

Why: an extraction job or an add has only a few texts of its own. Run job by job from several worker
threads, a local model runs several graphs at once, each with its own intra-op threads — more threads
than cores, fighting over them. Through one instance of this (the worker's jobs and the server's adds
share it), the model runs one call at a time, and the texts of the jobs queued meanwhile go into that
call together, sorted by length with the others (less padding) and paying the per-call cost once. No job
waits for another to be ready: a caller that finds the model idle runs at once (no timer, no added
latency when alone), and whoever arrives meanwhile is served by the next call, led by the first of them
to find the model free (leader/followers, no thread of its own).

Each caller still gets exactly its own vectors, or its own error: when a shared call fails, every
caller's texts are embedded again on their own, so a text the model refuses fails only the job that
sent it. Jobs' outcomes, retries and idempotency are untouched: they only share the arithmetic.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Sequence

from ...ports import Embedder

DEFAULT_MAX_TEXTS = 64  # one model call: more gains little throughput and makes a query queued behind it wait longer


class _Call:
    __slots__ = ("texts", "vectors", "error", "done")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.vectors: list[list[float]] | None = None
        self.error: BaseException | None = None
        self.done = False


class CoalescingEmbedder:
    def __init__(self, inner: Embedder, *, max_texts: int = DEFAULT_MAX_TEXTS) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        self.inner, self.dim = inner, inner.dim
        self._max = max_texts
        self._waiting: deque[_Call] = deque()
        self._busy = False
        self._cond = threading.Condition()

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        mine = _Call(list(texts))
        with self._cond:
            self._waiting.append(mine)
            self._cond.notify_all()
        while True:
            with self._cond:
                while not mine.done and self._busy:
                    self._cond.wait()
                if mine.done:
                    break
                self._busy = True
                batch = self._take()
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        if mine.error is not None:
            raise mine.error
        assert mine.vectors is not None
        return mine.vectors

    def _take(self) -> list[_Call]:
        # First come, first served; the first call always goes, however large (the model batches it).
        batch = [self._waiting.popleft()]
        size = len(batch[0].texts)
        while self._waiting and size + len(self._waiting[0].texts) <= self._max:
            size += len(self._waiting[0].texts)
            batch.append(self._waiting.popleft())
        return batch

    def _run(self, batch: list[_Call]) -> None:
        try:
            vectors = self.inner.embed([t for call in batch for t in call.texts])
        except Exception as e:  # noqa: BLE001 - handed to its caller; in a shared call, whose text failed is found
            if len(batch) == 1:
                batch[0].error = e
            else:
                for call in batch:
                    _alone(call, self.inner)
        else:
            start = 0
            for call in batch:
                call.vectors = vectors[start:start + len(call.texts)]
                start += len(call.texts)
        finally:
            for call in batch:  # even on an interrupt: no follower is left waiting
                if call.vectors is None and call.error is None:
                    call.error = RuntimeError("the shared embedding call was interrupted")
                call.done = True

    # -- for tests: observe the queue without sleeping on a guess ---------------------------------------

    def wait_for_queued(self, count: int, *, timeout: float) -> bool:
        """Whether `count` calls are waiting (behind a running one) within `timeout` seconds."""
        return self._wait(lambda: len(self._waiting) >= count, timeout)

    def wait_for_busy(self, *, timeout: float) -> bool:
        return self._wait(lambda: self._busy, timeout)

    def _wait(self, predicate: "object", timeout: float) -> bool:
        end = time.monotonic() + timeout
        with self._cond:
            while not predicate():  # type: ignore[operator]
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


def _alone(call: _Call, inner: Embedder) -> None:
    """Embed one caller's texts on their own, keeping its vectors or its error for it."""
    try:
        call.vectors = inner.embed(call.texts)
    except Exception as e:  # noqa: BLE001 - handed to the caller, raised in its own thread
        call.error = e
