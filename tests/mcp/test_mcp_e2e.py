"""`memlane mcp` end to end with the mcp SDK's own client: over stdio and streamable HTTP against a running
`memlane serve`, and in-process on a data directory (`--local`)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from ..e2e.conftest import Server, free_port
from .conftest import APP, STORE, mcp_command, payload

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

TOOLS = {"remember", "recall", "get_context", "forget", "list_threads", "get_profile"}


def stdio(*options: str) -> StdioServerParameters:
    command, args, env = mcp_command(*options)
    return StdioServerParameters(command=command, args=args, env=env)


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return payload(result)


def test_stdio_remembers_in_one_session_and_recalls_in_another(server: Server) -> None:
    params = stdio("--url", server.url, "--store", STORE, "--app", APP, "--tenant", "carol")

    async def first_session() -> dict[str, Any]:
        async with Client(params) as client:
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            assert all(t.description and len(t.description) > 40 for t in listed.tools)
            return await call(client, "remember", thread_id="trip-1", messages=[
                {"role": "user", "content": "My daughter Lila is allergic to peanuts."},
                {"role": "assistant", "content": "Noted, I will avoid peanuts in her meals."}])

    async def second_session() -> None:
        async with Client(params) as client:
            found = await call(client, "recall", query="food allergies", top_k=3)
            assert any("peanut" in hit["text"] for hit in found["results"])
            assert all(set(hit) <= {"id", "type", "text", "similarity", "thread_id", "when"}
                       for hit in found["results"])
            await call(client, "remember", thread_id="trip-2", text="We fly to Lisbon on Friday.")
            # Said again: nothing new is kept, and the answer names the memory that holds it (it was an empty list).
            again = await call(client, "remember", thread_id="trip-2", text="We fly to Lisbon on Friday.")
            assert again["memories"] == [] and again["already_known"]
            assert all("Lisbon" in known["text"] for known in again["already_known"])
            held = await call(client, "recall", query="Lisbon flight", thread_id="trip-2")
            assert {known["id"] for known in again["already_known"]} <= {hit["id"] for hit in held["results"]}
            elsewhere = await call(client, "recall", query="Lisbon flight", thread_id="trip-1")
            assert not any("Lisbon" in hit["text"] for hit in elsewhere["results"])  # only that thread
            card = await call(client, "get_context", thread_id="trip-2", query="what can Lila eat?",
                              budget_tokens=400)
            assert "peanut" in card["text"] and card["tokens"] <= 400
            threads = await call(client, "list_threads")
            assert {"trip-1", "trip-2"} <= {t["thread_id"] for t in threads["threads"]}
            profile = await client.read_resource("memlane://profile")  # none yet: empty, not an error
            assert json.loads(profile.contents[0].text) == {"text": "", "facts": []}
            missing = await client.call_tool("forget", {"memory_id": "no-such-memory"})
            assert missing.is_error and payload(missing)["error"]["code"].endswith("not_found")
            assert (await client.list_tools()).tools  # an API error is a tool error, never a crash

    remembered = anyio.run(first_session)
    assert remembered["status"] == "SUCCEEDED" and remembered["memories"]
    anyio.run(second_session)


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "memlane mcp --http exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("memlane mcp --http did not listen")


def test_streamable_http_transport(server: Server, tmp_path: Path) -> None:
    port = free_port()
    command, args, env = mcp_command("--url", server.url, "--store", STORE, "--app", APP, "--tenant", "dave",
                                     "--http", str(port))
    with open(tmp_path / "mcp-http.log", "wb") as log:
        proc = subprocess.Popen([command, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, proc)

        async def session() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                await call(client, "remember", text="Dave's favourite editor is Helix.")
                found = await call(client, "recall", query="which editor does Dave use?")
                assert "Helix" in found["results"][0]["text"]

        anyio.run(session)
    finally:
        proc.terminate()
        proc.wait(15)


def test_local_mode_from_the_docs_client_config(tmp_path: Path) -> None:
    """docs/mcp.md's first snippet, the config a newcomer pastes into an MCP client, runs as written
    (only the data directory is this test's, and `memlane` this checkout's)."""
    config = json.loads(re.findall(r"```json\n(.*?)```", (ROOT / "docs" / "mcp.md").read_text(), flags=re.S)[0])
    entry = config["mcpServers"]["memlane"]
    assert entry["command"] == "memlane" and "--local" in entry["args"]
    args = list(entry["args"])
    args[args.index("--data-dir") + 1] = str(tmp_path / "data")
    params = stdio(*args[1:])  # stdio() adds `mcp`

    async def remember() -> None:
        async with Client(params) as client:
            await call(client, "remember", text="Erin's badge number is 5521.")

    async def recall() -> None:
        async with Client(params) as client:  # a new process on the same data: what was kept is there
            found = await call(client, "recall", query="badge number")
            assert "5521" in found["results"][0]["text"]

    anyio.run(remember)
    anyio.run(recall)
