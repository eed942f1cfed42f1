"""Retries against a real local HTTP server that scripts its answers: 429 and 5xx are retried with
backoff (honouring Retry-After) only when sending again is safe; refused connections are retried;
errors that remain are typed. The waits are recorded, not slept."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from memlane.sdk import AsyncMemlane, ConnectionFailed, Memlane, Retry, WaitTimeout, errors, transport

STORE = {"name": "demo", "description": "", "extract_instructions": "", "embedding_model": "m", "embedding_dim": 3,
         "dream_mode": "proposal", "dream_threshold": 0.8, "created_at": "2026-01-01T00:00:00Z"}
TASK = {"request_id": "r1", "status": "RUNNING", "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "message_ids": [],
        "scope": {"app_id": "a", "tenant_id": "t", "agent_id": "g", "run_id": "r"}}


LOST, SLOW = 0, -1  # scripted statuses: close the connection unanswered; answer 200 after a second


class Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next scripted (status, headers, body); the last one repeats."""

    script: list[tuple[int, dict[str, str], Any]] = []
    seen: list[tuple[str, str]] = []
    bodies: list[bytes] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.seen.append((self.command, self.path))
        status, headers, body = self.script[min(len(self.seen), len(self.script)) - 1]
        if status == LOST:  # done, but the answer never arrives: the connection closes first
            self.close_connection = True
            return
        if status == SLOW:
            time.sleep(1.0)
            status = 200
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()  # str: a non-JSON page
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


def busy(status: int, retry_after: str | None = None) -> tuple[int, dict[str, str], Any]:
    code = {429: "queue_full", 503: "retryable", 502: "dependency_failed"}[status]
    return status, {"Retry-After": retry_after} if retry_after else {}, {"error": {"code": code, "message": "later"}}


@pytest.fixture()
def url() -> Iterator[str]:
    Scripted.script, Scripted.seen, Scripted.bodies = [], [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorded: list[float] = []

    async def async_record(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(transport, "_sleep", recorded.append)
    monkeypatch.setattr(transport, "_async_sleep", async_record)
    return recorded


def test_a_read_is_retried_through_503s_with_growing_jittered_waits(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(503), busy(502), (200, {}, STORE)]
    store = Memlane(url, retry=Retry(attempts=4, base=0.5, cap=8)).stores.get("demo")
    assert store.name == "demo" and len(Scripted.seen) == 3
    assert len(waits) == 2 and 0 <= waits[0] <= 0.5 and 0 <= waits[1] <= 1.0


def test_retry_after_is_honoured(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(429, "3"), (200, {}, STORE)]
    Memlane(url).stores.get("demo")
    assert len(waits) == 1 and 3.0 <= waits[0] <= 4.0  # what the server asked, and up to a second of jitter


def test_clients_told_the_same_retry_after_do_not_come_back_in_lockstep(url: str, waits: list[float]) -> None:
    """A trial: 30 clients told "Retry-After: 1" all waited exactly 1 s and came back at once. Each now waits what
    the server asked plus a random part of `retry_after_jitter`, never less than asked."""
    told = [Retry().delay(0, 1.0) for _ in range(30)]
    assert all(1.0 <= wait <= 2.0 for wait in told) and len(set(told)) == 30
    assert Retry(uniform=lambda low, high: high).delay(0, 1.0) == 2.0  # the random source is the caller's to give
    assert Retry(uniform=lambda low, high: low).delay(0, 1.0) == 1.0
    assert Retry(retry_after_jitter=0).delay(0, 1.0) == 1.0
    assert Retry(max_retry_after=60).delay(0, 60.5) is None  # the limit is on what the server asked
    Scripted.script = [busy(503, "2"), (200, {}, STORE)]
    Memlane(url, retry=Retry(uniform=lambda low, high: (low + high) / 2, retry_after_jitter=0.5)).stores.get("demo")
    assert waits == [2.25]


def test_an_add_carries_a_request_id_so_a_429_is_retried(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(429, "1"), (202, {}, {"request_id": "x", "status": "PENDING"})]
    accepted = Memlane(url).add("demo", {"app_id": "a"}, text="hello")
    assert accepted.status == "PENDING" and [m for m, _ in Scripted.seen] == ["POST", "POST"]
    assert len(waits) == 1 and 1.0 <= waits[0] <= 2.0


def test_an_explicit_write_carries_a_request_id_so_its_lost_answer_is_replayed_not_written_twice(
        url: str, waits: list[float]) -> None:
    """A trial: `memories.write` (infer: false) sent no request_id, so a caller's retry after a broken connection
    wrote the memory twice. Like an add, it gets one, and the SDK resends the same body."""
    Scripted.script = [(LOST, {}, {}), (200, {}, {"memories": [], "created": 0})]
    Memlane(url).memories.write("demo", {"app_id": "a"}, [{"text": "User is vegan."}])
    first, again = (json.loads(b) for b in Scripted.bodies)
    assert [m for m, _ in Scripted.seen] == ["POST", "POST"] and first == again and first["request_id"]


def test_a_request_that_is_not_safe_to_repeat_is_sent_once(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(503), (201, {}, STORE)]
    with pytest.raises(errors.Unavailable) as refused:
        Memlane(url).stores.create("demo")  # a second create would answer store_exists
    assert refused.value.code == "retryable" and len(Scripted.seen) == 1 and waits == []


def test_when_retries_run_out_the_last_error_is_raised_typed(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(429, "2")]
    with pytest.raises(errors.QueueFull) as full:
        Memlane(url, retry=Retry(attempts=3)).stores.get("demo")
    assert full.value.retry_after == 2.0 and isinstance(full.value, errors.RateLimited)
    assert len(Scripted.seen) == 3 and len(waits) == 2 and all(2.0 <= wait <= 3.0 for wait in waits)


def test_a_retry_after_past_the_limit_is_not_waited_for(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(503, "3600"), (200, {}, STORE)]
    with pytest.raises(errors.Unavailable):
        Memlane(url, retry=Retry(max_retry_after=60)).stores.get("demo")
    assert len(Scripted.seen) == 1 and waits == []


def test_a_refused_connection_is_retried_then_raised(waits: list[float]) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionFailed):
        Memlane(f"http://127.0.0.1:{port}", retry=Retry(attempts=3)).stores.create("demo")
    assert len(waits) == 2  # never reached the server: safe even for a create


def test_the_async_client_retries_too(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(503, "1"), (200, {}, STORE)]

    async def main() -> str:
        async with AsyncMemlane(url) as client:
            return (await client.stores.get("demo")).name

    assert asyncio.run(main()) == "demo" and len(Scripted.seen) == 2 and len(waits) == 1 and 1.0 <= waits[0] <= 2.0


def test_wait_gives_up_at_its_timeout_with_the_task_as_last_seen(url: str, waits: list[float]) -> None:
    Scripted.script = [(200, {}, TASK)]
    with pytest.raises(WaitTimeout) as slow:
        Memlane(url).tasks.wait("demo", "r1", timeout=0)
    assert slow.value.last.status == "RUNNING"


def test_api_gateway_answers_without_a_code_are_typed_by_status(url: str, waits: list[float]) -> None:
    Scripted.script = [(403, {}, {"message": "Forbidden"})]
    with pytest.raises(errors.Forbidden) as refused:
        Memlane(url).stores.list().page()
    assert refused.value.code == "forbidden" and refused.value.message == "Forbidden"


def test_a_code_under_another_status_is_not_trusted(url: str, waits: list[float]) -> None:
    Scripted.script = [(400, {}, {"error": {"code": "store_not_found", "message": "odd"}})]
    with pytest.raises(errors.BadRequest) as odd:
        Memlane(url).stores.get("demo")
    assert type(odd.value) is errors.BadRequest and odd.value.code == "store_not_found"


def test_a_proxys_error_page_that_is_not_json_is_still_a_typed_error(url: str, waits: list[float]) -> None:
    Scripted.script = [(502, {}, "<html>Bad Gateway</html>")]
    with pytest.raises(errors.DependencyFailed) as bad:
        Memlane(url, retry=Retry(attempts=1)).stores.get("demo")
    assert bad.value.status == 502 and "Bad Gateway" in bad.value.message


def test_a_200_whose_body_is_not_the_routes_is_a_typed_error(url: str, waits: list[float]) -> None:
    """A trial (session 30): a proxy answering 200 with a page of its own raised pydantic's ValidationError, which
    `except errors.ApiError` misses. It is now `unexpected_response` with the status and what the body was."""
    for body, shown in (("<html>Welcome to the portal</html>", "Welcome to the portal"), ({"hello": "proxy"}, "proxy"),
                        ([1, 2], "[1, 2]")):
        Scripted.script = [(200, {}, body)]
        with pytest.raises(errors.ApiError) as unexpected:
            Memlane(url, retry=Retry(attempts=1)).stores.get("demo")
        assert (unexpected.value.status, unexpected.value.code) == (200, "unexpected_response")
        assert "stores.get: GET /v1/stores/{store} answered 200 with a body it never sends" in unexpected.value.message
        assert shown in unexpected.value.message


MEMORY_GONE = (404, {}, {"error": {"code": "memory_not_found", "message": "memory 'm1' not found"}})
WHO = {"app_id": "a", "tenant_id": "t"}


def test_a_delete_resent_after_its_answer_was_lost_says_its_404_may_mean_done(url: str, waits: list[float]) -> None:
    """A trial: the server deleted, the answer was lost, the SDK resent the DELETE and raised the 404 as if the
    delete had failed. The error now says that an earlier attempt may have done it; a 404 of a first attempt,
    or after a refused connection, does not."""
    for first in (LOST, 503):
        Scripted.script, Scripted.seen = [(first, {}, {"error": {"code": "retryable", "message": "later"}}),
                                          MEMORY_GONE], []
        with pytest.raises(errors.MemoryNotFound) as gone:
            Memlane(url).memories.delete("demo", "m1", **WHO)
        assert gone.value.maybe_done and [m for m, _ in Scripted.seen] == ["DELETE", "DELETE"]
    Scripted.script, Scripted.seen = [MEMORY_GONE], []
    with pytest.raises(errors.MemoryNotFound) as never:
        Memlane(url).memories.delete("demo", "m1", **WHO)
    assert not never.value.maybe_done


def test_a_retry_after_that_is_no_number_or_date_is_not_a_crash(url: str, waits: list[float]) -> None:
    Scripted.script = [busy(503, "soon"), (200, {}, STORE)]
    assert Memlane(url).stores.get("demo").name == "demo" and len(waits) == 1  # its own backoff instead


def test_a_thread_created_with_its_id_is_resent_and_one_without_is_not(url: str, waits: list[float]) -> None:
    thread = {"thread_id": "t1", "scope": {"app_id": "a", "tenant_id": "t", "agent_id": "__default__",
                                           "run_id": "t1"}, "access_policy": "recall_and_store", "metadata": {},
              "message_count": 0, "token_count": 0, "created_at": "2026-01-01T00:00:00Z",
              "last_activity": "2026-01-01T00:00:00Z"}
    Scripted.script, Scripted.seen = [busy(503), (201, {}, thread)], []
    assert Memlane(url).threads.create("demo", WHO, thread_id="t1").thread_id == "t1" and len(Scripted.seen) == 2
    Scripted.script, Scripted.seen = [busy(503), (201, {}, thread)], []
    with pytest.raises(errors.Unavailable):
        Memlane(url).threads.create("demo", WHO)  # a second create would make a second thread
    assert len(Scripted.seen) == 1


def test_no_answer_in_time_is_told_apart_from_a_server_never_reached(url: str, waits: list[float]) -> None:
    Scripted.script = [(SLOW, {}, STORE)]
    with pytest.raises(errors.TimedOut) as late:
        Memlane(url, timeout=0.2, retry=Retry(attempts=1)).stores.create("demo")
    assert isinstance(late.value, ConnectionFailed) and "may have done it" in late.value.message


def test_a_request_that_never_left_is_no_maybe_done_and_the_raw_call_times_out_typed(url: str,
                                                                                     waits: list[float]) -> None:
    """A regression trial: a pool timeout (nothing sent) counted as an attempt that may have run, and
    `Memlane.request` (once, no retry) raised a plain ConnectionFailed on a read timeout."""
    import httpx

    assert not transport._may_have_run(httpx.PoolTimeout("no connection free"))
    assert transport._may_have_run(httpx.ReadTimeout("no answer"))
    Scripted.script = [(SLOW, {}, STORE)]
    with pytest.raises(errors.TimedOut):
        Memlane(url, timeout=0.2).request("POST", "/v1/stores", json={"name": "demo"})
