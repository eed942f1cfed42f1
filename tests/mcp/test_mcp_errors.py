"""Bad input and failing calls become tool errors with a machine-readable code — the same shape whether
the MCP layer or the API refused — and the server keeps serving."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.client import Client

from memlane.mcp import Binding, build_server
from memlane.sdk import Memlane, Retry

from ..e2e.conftest import Server, free_port
from .conftest import APP, STORE

pytestmark = pytest.mark.e2e
CAROL = Binding(store=STORE, app_id=APP, tenant_id="carol")


def _errors(url: str, calls: list[tuple[str, dict[str, Any]]], binding: Binding = CAROL) -> list[dict[str, Any]]:
    with Memlane(url, retry=Retry(attempts=1)) as client:
        async def run() -> list[dict[str, Any]]:
            out = []
            async with Client(build_server(client, binding)) as mcp:
                for tool, arguments in calls:
                    result = await mcp.call_tool(tool, arguments)
                    assert result.is_error, (tool, result.content)
                    out.append(json.loads(result.content[0].text)["error"])
                assert (await mcp.list_tools()).tools  # still serving
            return out

        return anyio.run(run)


def test_arguments_the_tool_schema_refuses_get_invalid_input_with_the_field(server: Server) -> None:
    errors = _errors(server.url, [
        ("recall", {"query": "x", "top_k": 500}),
        ("recall", {"query": ""}),
        ("recall", {"query": "x", "record_types": ["secrets"]}),
        ("remember", {"messages": [{"role": "boss", "content": "hi"}]}),
        ("get_context", {}),
        ("forget", {"memory_id": 42}),
    ])
    assert [(e["code"], e["field"]) for e in errors] == [
        ("invalid_input", "top_k"), ("invalid_input", "query"), ("invalid_input", "record_types.0"),
        ("invalid_input", "messages.0.role"), ("invalid_input", "thread_id"), ("invalid_input", "memory_id")]
    assert all(e["message"] for e in errors)


def test_api_errors_keep_the_api_code(server: Server) -> None:
    errors = _errors(server.url, [
        ("forget", {"memory_id": "no-such-memory"}),
        ("get_context", {"thread_id": "never-held"}),
        ("remember", {}),  # neither text nor messages: the API says what is missing
        ("recall", {"query": "x", "thread_id": "bad#id"}),
        ("remember", {"text": "x" * 40_000}),  # past the API's limit: the SDK refuses it before sending
    ])
    assert [e["code"] for e in errors] == ["memory_not_found", "thread_not_found", "invalid_input", "invalid_scope",
                                           "invalid_input"]
    assert [e["status"] for e in errors] == [404, 404, 400, 400, 400]
    assert errors[-1]["field"] == "text"


def test_an_unreachable_server_is_a_tool_error_not_a_crash() -> None:
    (error,) = _errors(f"http://127.0.0.1:{free_port()}", [("recall", {"query": "anything"})])
    assert error["code"] == "connection_failed"


def test_forget_of_a_dot_segment_is_refused_and_the_store_stays(server: Server) -> None:
    """`forget("..")` once reached `DELETE /v1/stores/{store}` (the HTTP client resolved the dot segment): with
    an admin client (`memlane mcp --local` has no keys) it deleted every tenant's memory of the store."""
    errors = _errors(server.url, [("forget", {"memory_id": ".."}), ("forget", {"memory_id": "."})])
    assert [(e["code"], e["field"]) for e in errors] == [("invalid_input", "memory_id")] * 2
    with Memlane(server.url) as client:
        assert client.stores.get(STORE).name == STORE


def test_forget_whose_first_attempt_lost_its_answer_says_forgotten_not_not_found() -> None:
    """A trial: the server deleted the memory, the answer was lost, the SDK resent the DELETE and its 404 reached
    the model as "memory_not_found" for a memory that was forgotten. A plain 404 still is one."""
    from types import SimpleNamespace

    from memlane.mcp.memory import MemoryTools
    from memlane.sdk import errors

    def tools(maybe_done: bool) -> MemoryTools:
        def delete(*_: Any, **__: Any) -> None:
            missing = errors.MemoryNotFound(404, "memory_not_found", "memory 'm1' not found")
            missing.maybe_done = maybe_done
            raise missing
        return MemoryTools(SimpleNamespace(memories=SimpleNamespace(delete=delete)), CAROL)  # type: ignore[arg-type]

    assert tools(maybe_done=True).forget("m1") == {"id": "m1", "status": "deleted"}
    with pytest.raises(errors.MemoryNotFound):
        tools(maybe_done=False).forget("m1")


@pytest.mark.parametrize("arguments", [["x"], "recall me", 42])
def test_arguments_that_are_not_an_object_get_invalid_input_too(arguments: Any) -> None:
    """A trial (session 33): `tools/call` with arguments a list or a string answered a bare JSON-RPC -32602 with no
    data, not the invalid_input tool error the docs promise for arguments the schema refuses."""
    from memlane.mcp.server import _CheckedArguments

    with Memlane("http://127.0.0.1:9", retry=Retry(attempts=1)) as client:
        checked = next(m for m in build_server(client, CAROL).middleware if isinstance(m, _CheckedArguments))
        refused = anyio.run(checked._refusal, "recall", arguments)
    assert refused is not None and refused.is_error
    error = json.loads(refused.content[0].text)["error"]
    assert error["code"] == "invalid_input" and "object" in error["message"]


def test_recall_with_an_empty_record_types_list_is_refused_as_the_api_refuses_it() -> None:
    """A trial: `recall` took `record_types: []` as the default (memories), where the API answers 400 invalid_input
    for an empty list; the tool's schema now refuses it before anything is sent."""
    (error,) = _errors(f"http://127.0.0.1:{free_port()}", [("recall", {"query": "x", "record_types": []})])
    assert (error["code"], error["field"]) == ("invalid_input", "record_types")


def test_server_info_carries_the_package_version() -> None:
    """A trial: `serverInfo.version` was "" while `memlane --version` printed the package's version."""
    import importlib.metadata

    with Memlane("http://127.0.0.1:9", retry=Retry(attempts=1)) as client:
        async def info() -> Any:
            async with Client(build_server(client, CAROL)) as mcp:
                return mcp.server_info

        server_info = anyio.run(info)
    assert (server_info.name, server_info.version) == ("memlane", importlib.metadata.version("memlane"))
