"""The wait() helpers refuse a timeout they could never keep: NaN never compared past the deadline (the wait polled
forever), and a negative one meant nothing. Each is a ValueError naming it, before any request."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import pytest

from memlane.client import MemlaneClient
from memlane.sdk import AsyncMemlane, Memlane, transport

TASK = {"request_id": "r1", "status": "RUNNING", "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "message_ids": [],
        "scope": {"app_id": "a", "tenant_id": "t", "agent_id": "g", "run_id": "r"}}


class Tasks:
    """Answers the task RUNNING twice, then SUCCEEDED: a wait that should have been refused still ends."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen += 1
        return httpx.Response(200, json={**TASK, "status": "RUNNING" if self.seen < 3 else "SUCCEEDED"})


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "_sleep", lambda _: None)

    async def _no_async_sleep(_: float) -> None:
        return None

    monkeypatch.setattr(transport, "_async_sleep", _no_async_sleep)


@pytest.mark.parametrize("timeout", [math.nan, -1.0, -math.inf])
def test_a_nan_or_negative_timeout_is_a_value_error_before_any_request(timeout: float) -> None:
    tasks = Tasks()
    client = Memlane("http://memlane.test", transport=httpx.MockTransport(tasks))
    waits: list[Any] = [lambda: client.tasks.wait("s", "r1", timeout=timeout),
                        lambda: client.threads.wait_summary("s", "r1", app_id="a", tenant_id="t", timeout=timeout),
                        lambda: client.erasures.wait("e1", timeout=timeout),
                        lambda: client.dream.wait("s", "d1", timeout=timeout)]
    legacy = MemlaneClient(httpx.MockTransport(tasks))
    waits.append(lambda: legacy.wait_task("s", "r1", timeout=timeout))
    for wait in waits:
        with pytest.raises(ValueError, match="timeout"):
            wait()
    assert tasks.seen == 0


def test_the_async_wait_refuses_it_too() -> None:
    tasks = Tasks()

    async def main() -> None:
        async with AsyncMemlane("http://memlane.test", transport=httpx.MockTransport(tasks)) as client:
            await client.tasks.wait("s", "r1", timeout=math.nan)

    with pytest.raises(ValueError, match="timeout"):
        asyncio.run(main())
    assert tasks.seen == 0


def test_a_zero_or_unbounded_timeout_still_waits() -> None:
    """0: look once (and give up); inf: no limit, as asked."""
    assert Memlane("http://memlane.test", transport=httpx.MockTransport(Tasks())).tasks.wait(
        "s", "r1", timeout=math.inf).status == "SUCCEEDED"
    with pytest.raises(transport.WaitTimeout):
        Memlane("http://memlane.test", transport=httpx.MockTransport(Tasks())).tasks.wait("s", "r1", timeout=0)
