"""Sending calls: retries with jittered backoff, typed errors, pagination and polling — once for the
synchronous client and once for the asynchronous one, the only code that differs between them."""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Iterator, TypeVar

import httpx
from pydantic import BaseModel

from .errors import BadRequest, ConnectionFailed, TimedOut, WaitTimeout, error_for
from .routes import Route

T = TypeVar("T")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_sleep, _async_sleep = time.sleep, asyncio.sleep  # module attributes: tests record the waits instead


@dataclass(frozen=True)
class Call:
    """One request of one route: path parameters filled in, query and body as sent."""

    route: Route
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None

    @classmethod
    def of(cls, route: Route, path: dict[str, str] | None = None, query: dict[str, Any] | None = None,
           body: BaseModel | dict[str, Any] | None = None) -> "Call":
        if isinstance(body, BaseModel):  # the API's own request model: what was set, as JSON
            body = body.model_dump(mode="json", exclude_unset=True)
        params = {k: v for k, v in (query or {}).items() if v is not None}
        return cls(route, route.url(**(path or {})), params, body)

    @property
    def retry_safe(self) -> bool:
        """Sending it twice does what sending it once did."""
        return self.route.idempotent or bool(self.body and any(self.body.get(f) for f in self.route.safe_with))


def refuse_non_finite(request: str, body: Any) -> None:
    """A body holding NaN or ±inf is refused before sending (`BadRequest`, as the API answers it: 400 invalid_input,
    no field). JSON has no such number: the API refuses it, and pydantic's JSON mode would send it as null."""
    stack: list[tuple[Any, str]] = [(body, "")]
    while stack:  # iterative: a deeply nested body is the API's to refuse, not a RecursionError here
        value, at = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            constant = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
            raise BadRequest(400, "invalid_input", f"{request}: the body is not valid JSON: {constant} (at "
                                                   f"{at or 'the body'}) is not a JSON number (refused before sending)")
        if isinstance(value, dict):
            children = [(v, f"{at}.{k}" if at else str(k)) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            children = [(v, f"{at}.{i}" if at else str(i)) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))  # the first one in the body is the one named


@dataclass(frozen=True)
class Retry:
    """`attempts` counts the first try. Waits grow as base·2^n with full jitter up to `cap`; a `Retry-After`
    the server sends is honoured (up to `max_retry_after`, past which the error is raised at once), plus a random
    0–`retry_after_jitter` seconds, so clients told the same wait do not all come back at once (a trial: 30 clients
    told "Retry-After: 1" retried in lockstep). `uniform(low, high)` draws the randomness (tests pass their own)."""

    attempts: int = 4
    base: float = 0.25
    cap: float = 8.0
    max_retry_after: float = 60.0
    retry_after_jitter: float = 1.0
    uniform: Callable[[float, float], float] = field(default=random.uniform, repr=False, compare=False)

    def delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to give up."""
        if attempt + 1 >= self.attempts:
            return None
        if retry_after is not None:
            if retry_after > self.max_retry_after:  # what the server asked, before the jitter
                return None
            return retry_after + max(0.0, self.uniform(0, self.retry_after_jitter))  # never less than asked
        return self.uniform(0, min(self.cap, self.base * 2 ** attempt))


def retry_after_of(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):  # "soon", as some proxies send: no wait said
        return None
    return max(0.0, when.timestamp() - time.time())


def _decide(call: Call, retry: Retry, attempt: int, outcome: httpx.Response | httpx.TransportError) -> float | None:
    """How long to wait before trying `call` again after `outcome`, or None to stop here."""
    if isinstance(outcome, httpx.Response):
        if outcome.status_code not in RETRY_STATUSES or not call.retry_safe:
            return None
        return retry.delay(attempt, retry_after_of(outcome))
    # a refused connection never reached the server: safe to resend whatever the call
    if not (call.retry_safe or isinstance(outcome, _NEVER_SENT)):
        return None
    return retry.delay(attempt, None)


def payload_of(response: httpx.Response) -> Any:
    """The JSON answer; a proxy's error page (HTML, text) is kept as text for the error's message."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


# Failures before the request left: no connection made, or none free in the pool.
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def _may_have_run(outcome: httpx.Response | httpx.TransportError) -> bool:
    """The server may have done the request though its answer says otherwise or was lost: a 5xx, or a
    connection that broke after it was sent."""
    if isinstance(outcome, httpx.Response):
        return outcome.status_code >= 500
    return not isinstance(outcome, _NEVER_SENT)


def _result(call: Call, response: httpx.Response, tried: bool = False) -> Any:
    payload = payload_of(response)
    if response.status_code >= 400:
        error = error_for(response.status_code, payload, retry_after_of(response))
        # A DELETE resent after an attempt that may have run: its 404 may mean that attempt deleted it.
        error.maybe_done = tried and response.status_code == 404 and call.route.method == "DELETE"
        raise error
    return call.route.parse(response.status_code, payload)


def connection_failed(request: str, error: httpx.TransportError) -> ConnectionFailed:
    """The typed error of a request (`"METHOD path"`) that got no answer: `TimedOut` when it was sent and no
    answer came in time (the server may have done it)."""
    if isinstance(error, (httpx.ReadTimeout, httpx.WriteTimeout)):
        return TimedOut(0, TimedOut.code, f"{request}: no answer in time, the server may have done it: {error!r}")
    return ConnectionFailed(0, ConnectionFailed.code, f"{request}: {error!r}")


def check_wait(**limits: float) -> None:
    """A wait's `timeout` (and poll interval), in seconds: NaN never compares past a deadline (the wait would poll
    forever) and a negative one means nothing, so each is a ValueError. 0 looks once; inf waits as long as it takes."""
    for name, value in limits.items():
        if math.isnan(value) or value < 0:
            raise ValueError(f"{name} must be a number of seconds, 0 or more, not {value!r}")


def _finished(value: Any) -> bool:
    return str(getattr(value, "status", "")) in ("SUCCEEDED", "FAILED")


class SyncRunner:
    def __init__(self, http: httpx.Client, retry: Retry):
        self.http, self.retry = http, retry

    def run(self, call: Call) -> Any:
        attempt, tried = 0, False
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = self.http.request(
                    call.route.method, call.path, params=call.params, json=call.body)
            except httpx.TransportError as error:
                outcome = error
            wait = _decide(call, self.retry, attempt, outcome)
            if wait is None:
                if isinstance(outcome, httpx.TransportError):
                    raise connection_failed(f"{call.route.method} {call.path}", outcome) from outcome
                return _result(call, outcome, tried)
            attempt, tried = attempt + 1, tried or _may_have_run(outcome)
            _sleep(wait)

    def poll(self, call: Call, timeout: float, interval: float) -> Any:
        check_wait(timeout=timeout, interval=interval)
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(call)
            if _finished(value):
                return value
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"{call.path} not finished after {timeout}s (status {value.status})", value)
            _sleep(interval)

    def pages(self, call: Call, items: str) -> "Pager[Any]":
        return Pager(self, call, items)

    def then(self, value: Any, shape: Callable[[Any], Any]) -> Any:
        """`shape` applied to what `run` answered."""
        return shape(value)


class AsyncRunner:
    def __init__(self, http: httpx.AsyncClient, retry: Retry):
        self.http, self.retry = http, retry

    async def run(self, call: Call) -> Any:
        attempt, tried = 0, False
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = await self.http.request(
                    call.route.method, call.path, params=call.params, json=call.body)
            except httpx.TransportError as error:
                outcome = error
            wait = _decide(call, self.retry, attempt, outcome)
            if wait is None:
                if isinstance(outcome, httpx.TransportError):
                    raise connection_failed(f"{call.route.method} {call.path}", outcome) from outcome
                return _result(call, outcome, tried)
            attempt, tried = attempt + 1, tried or _may_have_run(outcome)
            await _async_sleep(wait)

    async def poll(self, call: Call, timeout: float, interval: float) -> Any:
        check_wait(timeout=timeout, interval=interval)
        deadline = time.monotonic() + timeout
        while True:
            value = await self.run(call)
            if _finished(value):
                return value
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"{call.path} not finished after {timeout}s (status {value.status})", value)
            await _async_sleep(interval)

    def pages(self, call: Call, items: str) -> "Pager[Any]":
        return Pager(self, call, items)

    async def then(self, value: Awaitable[Any], shape: Callable[[Any], Any]) -> Any:
        return shape(await value)


class Pager(Generic[T]):
    """The items of a paginated list, following `next_cursor`: `for x in ...` on the synchronous client,
    `async for x in ...` on the asynchronous one. `page(cursor)` fetches one page (the list model)."""

    def __init__(self, runner: SyncRunner | AsyncRunner, call: Call, items: str):
        self._runner, self._call, self._items = runner, call, items

    def page(self, cursor: str | None = None) -> Any:
        params = {**self._call.params, "cursor": cursor} if cursor else self._call.params
        return self._runner.run(Call(self._call.route, self._call.path, params, self._call.body))

    def __iter__(self) -> Iterator[T]:
        if not isinstance(self._runner, SyncRunner):
            raise TypeError("an AsyncMemlane list is iterated with `async for`")
        cursor = None
        while True:
            page = self.page(cursor)
            yield from getattr(page, self._items)
            cursor = page.next_cursor
            if not cursor:
                return

    async def __aiter__(self) -> AsyncIterator[T]:
        if not isinstance(self._runner, AsyncRunner):
            raise TypeError("a Memlane list is iterated with `for`")
        cursor = None
        while True:
            page = await self.page(cursor)
            for item in getattr(page, self._items):
                yield item
            cursor = page.next_cursor
            if not cursor:
                return


Runner = SyncRunner | AsyncRunner
