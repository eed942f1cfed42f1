"""One JSON POST with explicit timeouts and bounded, jittered retries — never past a request's
deadline — and HTTP failures translated into domain errors.

Shared by the OpenAI-compatible embedder and LLM so that both treat 429/5xx the same way.
"""

from __future__ import annotations

import copy
from typing import Any

import requests

from ...domain.deadline import Deadline
from ...domain.errors import DeadlineExceeded, DependencyFailed, Retryable
from ..backoff import Sleep, backoff_delay

_RETRY_AFTER_CAP_S = 30.0  # honour a server's Retry-After, but never park a worker for minutes


class JsonClient:
    def __init__(self, base_url: str, *, api_key: str | None, session: requests.Session | None,
                 timeout: float, max_attempts: int, sleep: Sleep, connect_timeout: float | None = None) -> None:
        self._base = base_url.rstrip("/")
        self._session = session or requests.Session()
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout, self._connect_timeout = timeout, timeout if connect_timeout is None else connect_timeout
        self._max_attempts = max(1, max_attempts)
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
                resp = self._session.post(url, json=body, headers=self._headers,
                                          timeout=(min(self._connect_timeout, read), read))
            except (requests.ConnectionError, requests.Timeout) as e:
                failure, retry_after = f"{type(e).__name__}: {e}", None
                if self._deadline.expired():
                    raise DeadlineExceeded(f"POST {url}: no answer before the deadline ({failure})") from e
                continue
            if resp.status_code == 429 or resp.status_code >= 500:
                failure, retry_after = f"HTTP {resp.status_code}", resp.headers.get("Retry-After")
                continue
            if resp.status_code >= 400:
                raise DependencyFailed(f"POST {url} failed: HTTP {resp.status_code}: {_snippet(resp.text)}",
                                       code="model_request_rejected", status=resp.status_code)
            try:
                data = resp.json()
            except ValueError as e:
                raise DependencyFailed(f"POST {url} answered with invalid JSON: {_snippet(resp.text)}",
                                       code="model_bad_response") from e
            if not isinstance(data, dict):
                raise DependencyFailed(f"POST {url} answered with a JSON {type(data).__name__}, not an object",
                                       code="model_bad_response")
            return data
        raise Retryable(f"POST {url} still failing after {self._max_attempts} attempts: {failure}",
                        code="model_unavailable")


def _delay(attempt: int, retry_after: str | None) -> float:
    if retry_after:
        try:
            return min(max(float(retry_after), 0.0), _RETRY_AFTER_CAP_S)
        except ValueError:  # an HTTP date: rare for model APIs; use our own backoff
            pass
    return backoff_delay(attempt)


def _snippet(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
