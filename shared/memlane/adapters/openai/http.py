"""One JSON POST with explicit timeouts and bounded, jittered retries — never past a request's
deadline — and HTTP failures translated into domain errors.

The read timeout bounds the whole answer, not each socket read: a model that drips its answer a byte at
a time must not hold a worker for minutes. The answer is streamed, and refused past a size cap.

Shared by the OpenAI-compatible embedder and LLM so that both treat 429/5xx the same way.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
from typing import Any

import requests

from ...domain.deadline import Deadline
from ...domain.errors import DeadlineExceeded, DependencyFailed, Retryable
from ..backoff import Sleep, backoff_delay

_RETRY_AFTER_CAP_S = 30.0  # honour a server's Retry-After, but never park a worker for minutes
# The largest legitimate answer is a batch of embeddings: 64 texts (the embedder's default batch) of 8192
# dimensions at 32 bytes a float as JSON ("-1.2345678901234567e-05, " is 25) is 16 MiB; a chat completion
# of even 128k tokens is a few MiB. A larger answer is a broken or hostile server, held whole in memory.
DEFAULT_MAX_ANSWER_BYTES = 64 * 8192 * 32
_CHUNK_BYTES = 64 * 1024
_ERROR_TEXT_BYTES = 4096  # of a rejection's body: enough for the message's first 500 characters


class JsonClient:
    def __init__(self, base_url: str, *, api_key: str | None, session: requests.Session | None,
                 timeout: float, max_attempts: int, sleep: Sleep, connect_timeout: float | None = None,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self._base = base_url.rstrip("/")
        self._session = session or requests.Session()
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout, self._connect_timeout = timeout, timeout if connect_timeout is None else connect_timeout
        self._max_attempts = max(1, max_attempts)
        self._max_answer_bytes = max_answer_bytes
        self._sleep = sleep
        self._deadline = Deadline.never()

    def within(self, deadline: Deadline) -> "JsonClient":
        """This client with each request, and the waits between them, bounded by `deadline`."""
        bounded = copy.copy(self)
        bounded._deadline = deadline
        return bounded

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self._base}/{path.lstrip('/')}"
        failure, retry_after = "", None
        for attempt in range(self._max_attempts):
            if attempt:
                delay = _delay(attempt - 1, retry_after)
                if delay >= self._deadline.remaining():
                    raise DeadlineExceeded(f"POST {url}: no time is left before the deadline to retry ({failure})")
                self._sleep(delay)
            read = self._deadline.budget(self._timeout)  # the answer may take what the deadline leaves
            if read <= 0:
                raise DeadlineExceeded(f"POST {url}: the deadline leaves no time for a request")
            try:
                status, retry_header, content = self._exchange(url, body, read)
            except requests.RequestException as e:  # also a truncated or undecodable body: the model failed us
                failure, retry_after = f"{type(e).__name__}: {e}", None
                if self._deadline.expired():
                    raise DeadlineExceeded(f"POST {url}: no answer before the deadline ({failure})") from e
                continue
            if status == 429 or status >= 500:
                failure, retry_after = f"HTTP {status}", retry_header
                continue
            if status >= 400:
                raise DependencyFailed(f"POST {url} failed: HTTP {status}: {_snippet(_text(content))}",
                                       code="model_request_rejected", status=status)
            try:
                data = json.loads(content)
            except ValueError as e:
                raise DependencyFailed(f"POST {url} answered with invalid JSON: {_snippet(_text(content))}",
                                       code="model_bad_response") from e
            if not isinstance(data, dict):
                raise DependencyFailed(f"POST {url} answered with a JSON {type(data).__name__}, not an object",
                                       code="model_bad_response")
            return data
        raise Retryable(f"POST {url} still failing after {self._max_attempts} attempts: {failure}",
                        code="model_unavailable")

    def _exchange(self, url: str, body: dict[str, Any], read: float) -> tuple[int, str | None, bytes]:
        """One request: its status, Retry-After and body, all within `read` seconds. Running out of them
        raises requests' ReadTimeout, as a model silent for `read` would; a body past the cap is refused."""
        ends_at = time.monotonic() + read
        resp = self._session.post(url, json=body, headers=self._headers, stream=True,
                                  timeout=(min(self._connect_timeout, read), read))
        try:
            if resp.status_code == 429 or resp.status_code >= 500:
                return resp.status_code, resp.headers.get("Retry-After"), b""
            if resp.status_code >= 400:  # rejected: only the start of its text is wanted
                try:
                    return resp.status_code, None, _read_within(resp, url, ends_at, _ERROR_TEXT_BYTES)
                except requests.RequestException:
                    return resp.status_code, None, b""
            declared = resp.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self._max_answer_bytes:
                raise _too_large(url, self._max_answer_bytes)  # refused unread
            content = _read_within(resp, url, ends_at, self._max_answer_bytes)
            if len(content) > self._max_answer_bytes:  # a retry would bring the same answer
                raise _too_large(url, self._max_answer_bytes)
            return resp.status_code, None, content
        finally:
            resp.close()  # a cut-short answer's connection is not reused


def _delay(attempt: int, retry_after: str | None) -> float:
    if retry_after:
        try:
            return min(max(float(retry_after), 0.0), _RETRY_AFTER_CAP_S)
        except ValueError:  # an HTTP date: rare for model APIs; use our own backoff
            pass
    return backoff_delay(attempt)


def _read_within(resp: requests.Response, url: str, ends_at: float, limit: int) -> bytes:
    """The body, read until `ends_at` on time.monotonic: whole, or its first `limit` bytes and a chunk more."""
    left = ends_at - time.monotonic()
    if left <= 0:
        raise requests.ReadTimeout(f"POST {url}: no whole answer within the read timeout")
    # Each socket read has the read timeout, but a body dripped a byte at a time never trips it, and one
    # read of a chunk may wait for many: a watchdog cuts the connection when the time is up.
    watchdog = _Watchdog(_socket_of(resp), left)
    chunks, size = [], 0
    try:
        for chunk in resp.iter_content(_CHUNK_BYTES):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit or time.monotonic() >= ends_at:
                break
    except requests.RequestException as e:
        if watchdog.fired:
            raise requests.ReadTimeout(f"POST {url}: no whole answer within the read timeout") from e
        raise
    finally:
        watchdog.stop()
    # Late, or cut by the watchdog (a close-delimited body cut short ends as if whole): not an answer.
    if size <= limit and (watchdog.fired or time.monotonic() >= ends_at):
        raise requests.ReadTimeout(f"POST {url}: no whole answer within the read timeout")
    return b"".join(chunks)


def _too_large(url: str, limit: int) -> DependencyFailed:
    return DependencyFailed(f"POST {url} answered with more than {limit} bytes", code="model_bad_response")


class _Watchdog:
    """Shuts `sock` down after `seconds`, unless stopped first: a blocked read then ends at once."""

    def __init__(self, sock: socket.socket | None, seconds: float) -> None:
        self._sock, self._lock, self._stopped, self.fired = sock, threading.Lock(), False, False
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        if sock is not None:
            self._timer.start()

    def _cut(self) -> None:
        with self._lock:  # never after stop(): the socket may be closed and its descriptor reused
            if self._stopped or self._sock is None:
                return
            self.fired = True
            try:
                # socket.socket's, not SSLSocket's: that one drops the TLS state under a reading thread.
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._timer.cancel()


def _socket_of(resp: requests.Response) -> socket.socket | None:
    """The answer's socket, or None (a test double, another transport): then time is checked per chunk."""
    raw = getattr(resp, "raw", None)
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if sock is None:  # http.client hands a closing connection's socket to the response alone
        sock = getattr(getattr(getattr(getattr(raw, "_fp", None), "fp", None), "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _text(content: bytes) -> str:
    return content.decode("utf-8", "replace")


def _snippet(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
