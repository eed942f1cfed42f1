"""The SDK in-process (the CLI's `InProcessTransport`: the API's own resolver, no socket): a `Thread` handle reads
its thread by id alone and searches what its docstring says, and a body the SDK refuses before sending names its
field as the API does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from memlane.cli import InProcessTransport
from memlane.sdk import AsyncMemlane, Memlane, errors

STORE = "handles"
ALICE = {"app_id": "travel-app", "tenant_id": "alice"}


class Counting:
    """The in-process transport, counting the requests that reach it."""

    def __init__(self, inner: InProcessTransport):
        self.inner, self.sent = inner, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return self.inner.handle_request(request)

    def close(self) -> None:
        pass


class AsyncCounting(httpx.AsyncBaseTransport):
    def __init__(self, inner: Counting):
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return self.inner.handle_request(request)


@pytest.fixture(scope="module")
def transport(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Counting]:
    inner = InProcessTransport(Path(tmp_path_factory.mktemp("sdk-local")) / "data")
    with Memlane("http://memlane.local", transport=inner) as client:  # type: ignore[arg-type]
        client.stores.create(STORE)
    yield Counting(inner)
    inner.shutdown()


@pytest.fixture()
def client(transport: Counting) -> Iterator[Memlane]:
    with Memlane("http://memlane.local", transport=transport) as c:  # type: ignore[arg-type]
        yield c


@pytest.mark.parametrize("query", ["x" * 4001, ""], ids=["too-long", "empty"])
def test_a_search_query_the_sdk_refuses_is_named_query_as_the_api_names_it(client: Memlane, transport: Counting,
                                                                          query: str) -> None:
    """A trial: the SDK refused an over-long search query (the API's own model) with field None and "request: String
    should have at most 4000 characters"; the API answers field "query". Now both say "query", and nothing is sent."""
    with pytest.raises(errors.BadRequest) as refused:
        sent = transport.sent
        client.memories.search(STORE, query, ALICE)
    assert transport.sent == sent
    with pytest.raises(errors.BadRequest) as answered:  # the API's answer to the same body, sent by hand
        client.request("POST", f"/v1/stores/{STORE}/search", json={"query": query, "scope": ALICE})
    ours, api = refused.value, answered.value
    assert (ours.status, ours.code, ours.field) == (api.status, api.code, api.field) == (400, "invalid_input", "query")
    assert ours.message == f"memories.search: {api.message} (refused before sending)"
    with pytest.raises(errors.BadRequest) as listed:  # a query-string parameter is still named by itself
        client.threads.list(STORE, **ALICE, limit=0).page()
    assert (listed.value.code, listed.value.field) == ("invalid_input", "limit")


def test_a_handle_without_agent_id_lists_the_messages_of_a_named_agents_thread(client: Memlane,
                                                                               transport: Counting) -> None:
    """A trial: `client.thread(store, id, app_id=..., tenant_id=...)` found the thread of agent "planner" with get()
    and context(), but messages() asked for agent "__default__" and listed none: reads find a thread by its id."""
    client.threads.create(STORE, {**ALICE, "agent_id": "planner"}, thread_id="trip-msgs")
    said = [{"role": "user", "content": "Book a table for Friday."}, {"role": "assistant", "content": "Done."}]
    client.add(STORE, {**ALICE, "agent_id": "planner", "run_id": "trip-msgs"}, messages=said)
    handle = client.thread(STORE, "trip-msgs", **ALICE)
    assert [m.content for m in handle.messages()] == ["Book a table for Friday.", "Done."]
    sent = transport.sent
    assert [m.content for m in handle.messages(newest_first=True)] == ["Done.", "Book a table for Friday."]
    assert transport.sent == sent + 1  # the thread's agent was kept: one request, the page

    async def listed() -> list[str]:
        async with AsyncMemlane("http://memlane.local", transport=AsyncCounting(transport)) as aclient:
            athread = aclient.thread(STORE, "trip-msgs", **ALICE)
            page = await athread.messages().page()
            return [m.content async for m in athread.messages()] + [m.content for m in page.messages]

    assert asyncio.run(listed()) == ["Book a table for Friday.", "Done."] * 2
    # a run that is no recorded thread is still read as before, under the default agent
    client.add(STORE, {**ALICE, "run_id": "loose-run"}, messages=[{"role": "user", "content": "hi"}])
    assert [m.content for m in client.thread(STORE, "loose-run", **ALICE).messages()] == ["hi"]


@pytest.mark.parametrize("agent", ["planner", None], ids=["agent-handle", "tenant-handle"])
def test_thread_search_sees_the_tenants_other_threads_and_tenant_level_memories(client: Memlane,
                                                                               agent: Any) -> None:
    """A trial: `Thread.search`, documented as "the tenant's long-term memories seen from this thread", searched the
    handle's run only: another thread's memory and a tenant-level explicit memory were missed."""
    tenant = {**ALICE, "tenant_id": f"search-{agent}"}
    client.threads.create(STORE, {**tenant, "agent_id": "planner"}, thread_id="trip-7")
    client.threads.create(STORE, {**tenant, "agent_id": "planner"}, thread_id="trip-8")
    client.threads.create(STORE, {**tenant, "agent_id": "chef"}, thread_id="menu-1")
    for scope, text in (({"agent_id": "planner", "run_id": "trip-7"}, "Alice asked for a window table."),
                        ({"agent_id": "planner", "run_id": "trip-8"}, "Alice is allergic to peanuts."),
                        ({"agent_id": "chef", "run_id": "menu-1"}, "Alice cannot eat gluten."),
                        ({}, "Alice's food allergies include shellfish.")):
        client.memories.write(STORE, {**tenant, **scope}, [{"text": text}])
    handle = client.thread(STORE, "trip-7", **tenant, agent_id=agent)

    def found(**options: Any) -> set[tuple[str, str]]:
        hits = handle.search("food allergies gluten peanuts window table", top_k=20, **options).results
        return {(hit.scope.agent_id, hit.scope.run_id) for hit in hits}

    everywhere = {("planner", "trip-7"), ("planner", "trip-8"), ("chef", "menu-1"), ("__default__", "__default__")}
    assert found() == found(this_thread_only=False) == everywhere
    assert found(this_thread_only=True) == {("planner", "trip-7")}
    if agent:  # as the context card's recall_scope "agent": that agent's threads only
        assert found(recall_scope="agent") == {("planner", "trip-7"), ("planner", "trip-8")}
    else:
        with pytest.raises(ValueError):
            found(recall_scope="agent")


def test_thread_search_reaches_other_threads_only_from_a_thread_that_may_recall(client: Memlane) -> None:
    """The asking thread's access policy holds, as for the API's exact_thread_match: a store_only thread recalls
    nothing from the tenant's other threads, a recall_and_store one finds what another thread holds."""
    tenant = {**ALICE, "tenant_id": "search-policy"}
    client.threads.create(STORE, {**tenant, "agent_id": "planner"}, thread_id="quiet", access_policy="store_only")
    client.threads.create(STORE, {**tenant, "agent_id": "planner"}, thread_id="loud")
    client.memories.write(STORE, {**tenant, "agent_id": "planner", "run_id": "elsewhere"},
                          [{"text": "Alice is allergic to peanuts."}])
    assert client.thread(STORE, "quiet", **tenant, agent_id="planner").search("peanuts").results == []
    found = client.thread(STORE, "loud", **tenant, agent_id="planner").search("peanuts").results
    assert [hit.scope.run_id for hit in found] == ["elsewhere"]
