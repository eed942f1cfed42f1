"""`memlane mcp --api-key` against a server that requires keys: the key's grant bounds the MCP server too —
configured for a tenant its key may not touch, every tool answers the API's `outside_grant` (403)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from memlane.bootstrap import build
from memlane.config import Settings
from memlane.sdk import Memlane
from memlane.services import access

from ..e2e.conftest import Server
from .conftest import mcp_command, payload

pytestmark = pytest.mark.e2e


@pytest.fixture()
def keyed(tmp_path: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    data = tmp_path / "data"
    deps = build(Settings.from_env(env={}, data_dir=data, embedder="hashing", reranker="none"))
    keys = {"admin": access.create_api_key(deps, "ops", {}, admin=True),
            "alice": access.create_api_key(deps, "alice-assistant", {"assistant": ["alice"]})}
    server = Server(data).start()
    with Memlane(server.url, api_key=keys["admin"]) as admin:
        admin.stores.create("keyed")
    yield server, keys
    server.stop()


def _session(server: Server, tenant: str, *key: str) -> list[dict]:
    command, args, env = mcp_command("--url", server.url, *key, "--store", "keyed", "--app", "assistant",
                                     "--tenant", tenant)
    env.pop("MEMLANE_API_KEY", None)

    async def run() -> list[dict]:
        async with Client(StdioServerParameters(command=command, args=args, env=env)) as client:
            kept = await client.call_tool("remember", {"text": "Alice takes her coffee black."})
            found = await client.call_tool("recall", {"query": "coffee"})
            return [{"is_error": r.is_error, **payload(r)} for r in (kept, found)]

    return anyio.run(run)


def test_the_key_s_grant_bounds_the_mcp_server(keyed: tuple[Server, dict[str, str]]) -> None:
    server, keys = keyed
    kept, found = _session(server, "alice", "--api-key", keys["alice"])
    assert not kept["is_error"] and "black" in found["results"][0]["text"]
    for answer in _session(server, "bob", "--api-key", keys["alice"]):  # a tenant outside the key's grant
        assert answer["is_error"] and (answer["error"]["code"], answer["error"]["status"]) == ("outside_grant", 403)
    for answer in _session(server, "alice"):  # no key at all
        assert answer["is_error"] and answer["error"]["status"] == 401, answer
