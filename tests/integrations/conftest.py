"""The integrations against memlane both ways a user runs it: a real `memlane serve` over HTTP, and in-process
(`--local`: the CLI's transport, the same resolver over the local adapters, no socket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from memlane.cli import InProcessTransport
from memlane.sdk import AsyncMemlane, Memlane

from ..e2e.conftest import Server


class AsyncInProcessTransport(httpx.AsyncBaseTransport):
    """The in-process transport for the async client: each request runs to its answer on the loop's thread."""

    def __init__(self, inner: InProcessTransport):
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return self.inner.handle_request(request)


@pytest.fixture(scope="module")
def memlane_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(Path(tmp_path_factory.mktemp("integrations")) / "data").start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessTransport]:
    transport = InProcessTransport(Path(tmp_path_factory.mktemp("integrations-local")) / "data")
    yield transport
    transport.service.close()


@pytest.fixture(scope="module", params=["http", "local"])
def clients(request: pytest.FixtureRequest) -> Iterator[tuple[Memlane, Any]]:
    """(sync client, async client factory) against `memlane serve`, then in-process."""
    if request.param == "http":
        server = request.getfixturevalue("memlane_server")
        sync = Memlane(server.url)
        make_async = lambda: AsyncMemlane(server.url)  # noqa: E731 - one per event loop
    else:
        local = request.getfixturevalue("in_process")
        sync = Memlane("http://memlane.local", transport=local)
        make_async = lambda: AsyncMemlane("http://memlane.local", transport=AsyncInProcessTransport(local))  # noqa: E731
    yield sync, make_async
    sync.close()
