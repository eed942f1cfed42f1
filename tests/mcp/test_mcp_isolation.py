"""The MCP server's scope is its configuration: a server for tenant A given tenant B's ids (threads,
memories), B's name as an extra argument, or B's words as a query, answers nothing of B."""

from __future__ import annotations

import json
from typing import Any, Iterator

import anyio
import pytest
from mcp.client import Client

from memlane.mcp import Binding, build_server
from memlane.sdk import Memlane

from ..e2e.conftest import Server
from .conftest import APP, STORE, payload

pytestmark = pytest.mark.e2e

SECRET, HOME = "4417", "Tromsø"
BOB = Binding(store=STORE, app_id=APP, tenant_id="bob")
ALICE = Binding(store=STORE, app_id=APP, tenant_id="alice")


@pytest.fixture(scope="module")
def bob(server: Server) -> Iterator[dict[str, Any]]:
    """Tenant B's memory, thread, summary and profile, made through B's own MCP server and the SDK."""
    with Memlane(server.url) as client:
        async def remember() -> dict[str, Any]:
            async with Client(build_server(client, BOB)) as mcp:
                result = await mcp.call_tool("remember", {"thread_id": "bob-private", "messages": [
                    {"role": "user", "content": f"My locker code is {SECRET}, I live in {HOME}."},
                    {"role": "assistant", "content": f"Got it: locker {SECRET}."}]})
                assert not result.is_error
                return payload(result)

        kept = anyio.run(remember)
        refresh = client.threads.refresh_summary(STORE, "bob-private", app_id=APP, tenant_id="bob")
        client.threads.wait_summary(STORE, refresh.request_id, app_id=APP, tenant_id="bob", timeout=60)
        assert SECRET in client.threads.summary(STORE, "bob-private", app_id=APP, tenant_id="bob").text
        client.profiles.put(STORE, "bob", app_id=APP, text=f"Bob lives in {HOME}.")

        async def own_resources() -> list[str]:  # B's server reads them: A's must not
            async with Client(build_server(client, BOB)) as mcp:
                return [(await mcp.read_resource(uri)).contents[0].text
                        for uri in ("memlane://threads/bob-private/summary", "memlane://profile")]

        summary, profile = anyio.run(own_resources)
        assert SECRET in summary and HOME in json.loads(profile)["text"]
        yield {"memory_ids": [m["id"] for m in kept["memories"]], "client": client}


def _answers(calls: list[tuple[str, dict[str, Any]]], server_url: str, resources: list[str],
             binding: Binding = ALICE) -> list[str]:
    """Every answer a server (A's by default) gives (tool results and resource reads, errors included), as text."""
    with Memlane(server_url) as client:
        async def run() -> list[str]:
            out: list[str] = []
            async with Client(build_server(client, binding)) as mcp:
                for tool, arguments in calls:
                    result = await mcp.call_tool(tool, arguments)
                    out.append(json.dumps([getattr(b, "text", "") for b in result.content]))
                for uri in resources:
                    try:
                        read = await mcp.read_resource(uri)
                        out.append(json.dumps([getattr(c, "text", "") for c in read.contents]))
                    except Exception as refused:  # an MCP error answer: its message must not leak either
                        out.append(str(refused))
            return out

        return anyio.run(run)


def test_no_tool_argument_names_the_scope() -> None:
    with Memlane("http://127.0.0.1:9") as client:  # never called: listing tools sends nothing
        async def run() -> list[Any]:
            async with Client(build_server(client, ALICE)) as mcp:
                return (await mcp.list_tools()).tools

        tools = anyio.run(run)
    for tool in tools:
        assert not {"store", "scope", "app_id", "tenant_id", "agent_id", "app", "tenant", "agent"} & set(
            tool.input_schema.get("properties", {})), tool.name


def test_tenant_a_reaches_nothing_of_tenant_b(server: Server, bob: dict[str, Any]) -> None:
    (memory_id, *_) = bob["memory_ids"]
    calls = [
        ("recall", {"query": f"locker code {SECRET} {HOME}", "top_k": 20,
                    "record_types": ["memory", "message", "summary"]}),
        ("recall", {"query": "locker code", "thread_id": "bob-private"}),
        ("get_context", {"thread_id": "bob-private", "query": "locker code"}),
        ("list_threads", {}),
        ("get_profile", {}),
        ("forget", {"memory_id": memory_id}),
    ]
    answers = _answers(calls, server.url, ["memlane://profile", "memlane://threads/bob-private/summary"])
    for (tool, _), answer in zip(calls + [("resource", {})] * 2, answers):
        assert SECRET not in answer and HOME not in answer, (tool, answer)
    assert "bob-private" not in answers[3]  # list_threads: B's thread is not A's
    # forget with B's memory id deleted nothing of B's
    assert bob["client"].memories.get(STORE, memory_id, app_id=APP, tenant_id="bob").text


def test_extra_arguments_naming_another_scope_are_refused(server: Server, bob: dict[str, Any]) -> None:
    """The mcp SDK drops arguments a tool does not declare; a model that tries to widen its scope
    (`tenant_id`, `scope`, `app_id`) must be told no, not silently served its own tenant's data."""
    calls = [
        ("recall", {"query": "locker code", "tenant_id": "bob"}),
        ("get_profile", {"tenant_id": "bob"}),
        ("remember", {"text": "Bob's locker code is 0000.", "scope": {"tenant_id": "bob"}}),
        ("list_threads", {"app_id": APP, "tenant_id": "bob"}),
    ]
    answers = _answers(calls, server.url, [])
    for (tool, _), answer in zip(calls, answers):
        error = json.loads(json.loads(answer)[0])["error"]
        assert error["code"] == "invalid_input" and "not an argument" in error["message"], (tool, error)
        assert SECRET not in answer and HOME not in answer
    # and nothing was written anywhere on B's behalf
    found = bob["client"].search(STORE, "locker code 0000", {"app_id": APP, "tenant_id": "bob"},
                                 record_types=["memory", "message"])
    assert not any("0000" in hit.text for hit in found)


def test_the_agent_is_fixed_too(server: Server) -> None:
    """With --agent, writes go to that agent and reads stay in it; a server without one reads every agent."""
    planner, coach = (Binding(store=STORE, app_id=APP, tenant_id="frank", agent_id=a) for a in ("planner", "coach"))
    (kept,) = _answers([("remember", {"text": "Frank's gym membership ends in June.", "thread_id": "plan-1"})],
                       server.url, [], planner)
    assert "June" in kept
    seen_by_coach = _answers([("recall", {"query": "gym membership", "record_types": ["memory", "message"]}),
                              ("list_threads", {}), ("get_context", {"thread_id": "plan-1"})], server.url, [], coach)
    assert not any("June" in answer for answer in seen_by_coach), seen_by_coach
    assert "plan-1" not in seen_by_coach[1]
    (seen_by_tenant,) = _answers([("recall", {"query": "gym membership"})], server.url, [],
                                 Binding(store=STORE, app_id=APP, tenant_id="frank"))
    assert "June" in seen_by_tenant


def test_a_server_bound_to_an_agent_forgets_only_that_agents_memories(server: Server) -> None:
    """A trial (session 30): `forget` of another agent's memory id, through a server bound to one agent, deleted it —
    reads stay in the agent, so does forgetting. The other agent's memory answers not found, and stays."""
    planner, coach = (Binding(store=STORE, app_id=APP, tenant_id="gina", agent_id=a) for a in ("planner", "coach"))
    (kept,) = _answers([("remember", {"text": "Gina's dentist is Dr. Ortiz.", "thread_id": "care-1"})],
                       server.url, [], planner)
    memory_id = json.loads(json.loads(kept)[0])["memories"][0]["id"]  # the tool result's one text block
    (refused,) = _answers([("forget", {"memory_id": memory_id})], server.url, [], coach)
    assert "memory_not_found" in refused, refused
    with Memlane(server.url) as client:
        assert client.memories.get(STORE, memory_id, app_id=APP, tenant_id="gina").text.endswith("Dr. Ortiz.")
    (forgotten,) = _answers([("forget", {"memory_id": memory_id})], server.url, [], planner)
    assert 'deleted' in forgotten and 'not_found' not in forgotten, forgotten


def test_a_server_bound_to_an_agent_shows_only_that_agents_memories_in_a_context_card(server: Server) -> None:
    """A trial (session 31): `get_context` on the bound agent's own thread listed another agent's memories — of its
    other thread, and of its thread of the same id — since a card recalls from the whole tenant. Neither the card's
    text nor a section or its evidence holds another agent's; the agent's own memories are still there."""
    tenant = {"app_id": APP, "tenant_id": "hana"}
    mine, theirs = ({**tenant, "agent_id": a, "run_id": "th1"} for a in ("ag1", "ag2"))
    with Memlane(server.url) as client:
        client.memories.write(STORE, {**theirs, "run_id": "th2"}, [{"text": "AG2SECRET the red key is under the mat."}])
        client.memories.write(STORE, theirs, [{"text": "AG2SECRET the spare key hangs in the shed."}])
        client.memories.add(STORE, theirs, [{"role": "user", "content": "AG2SECRET my safe PIN is 4243."}], sync=True)
        client.memories.add(STORE, mine, [{"role": "user", "content": "Where is the key?"}], sync=True)
        client.memories.write(STORE, {**mine, "run_id": "th0"}, [{"text": "The blue key is in the kitchen drawer."}])
        their_turns = {t.message_id for t in client.messages.list(STORE, theirs)}
        their_memories = {x.memory_id for x in client.memories.list(STORE, {**tenant, "agent_id": "ag2"})}
        assert their_turns and len(their_memories) >= 3
        cards: list[Any] = []
        context = client.threads.context

        def kept(*args: Any, **options: Any) -> Any:  # the card the server was given, whole: sections and evidence
            cards.append(context(*args, **options))
            return cards[-1]

        client.threads.context = kept  # type: ignore[method-assign]

        async def run() -> Any:
            async with Client(build_server(client, Binding(store=STORE, agent_id="ag1", **tenant))) as mcp:
                return await mcp.call_tool("get_context", {"thread_id": "th1", "query": "key PIN safe shed mat"})

        answer = payload(anyio.run(run))
    (card,) = cards
    assert "AG2SECRET" not in answer["text"] and "AG2SECRET" not in card.text, card.text
    entries = [e for section in card.sections.values() for e in section]
    assert not any("AG2SECRET" in e.text for e in entries), entries
    assert not their_memories & {e.id for e in entries}, entries
    assert not their_turns & ({*card.evidence} | {ev for e in entries for ev in e.evidence}), card
    assert "blue key" in answer["text"] and any("blue key" in e.text for e in card.sections["memories"]), card.text


def test_a_server_bound_to_an_agent_answers_the_users_profile_not_the_agents_instructions(server: Server) -> None:
    """A trial (session 33): with --agent, `get_profile` and `memlane://profile` — "the user's profile" — answered the
    agent's role and standing instructions, and nothing of what was stated of the user."""
    with Memlane(server.url) as client:
        client.profiles.put(STORE, "ivy", app_id=APP, text="Ivy flies for work.", attributes={"home_airport": "BOS"})
        client.profiles.put_agent(STORE, "concierge", app_id=APP, tenant_id="ivy",
                                  text="You are the hotel concierge. Never book spas before noon.")
    (answer,) = _answers([("get_profile", {})], server.url, [],
                         Binding(store=STORE, app_id=APP, tenant_id="ivy", agent_id="concierge"))
    assert "Ivy flies for work." in answer and "BOS" in answer, answer
    assert "concierge" not in answer and "spas" not in answer, answer
