"""The SDK against a real `memlane serve` process: every resource group, sync and async, typed answers,
pagination across pages, wait() helpers, typed errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterator

import pytest

from memlane.api import models as m
from memlane.sdk import AsyncMemlane, Memlane, errors

from ..e2e.conftest import Server

pytestmark = pytest.mark.e2e

APP, TENANT = "travel-app", "alice"
TENANT_SCOPE = {"app_id": APP, "tenant_id": TENANT}
RUN = {**TENANT_SCOPE, "agent_id": "planner", "run_id": "conv-1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(Path(tmp_path_factory.mktemp("sdk")) / "data").start()
    yield srv
    srv.stop()


@pytest.fixture()
def client(server: Server) -> Iterator[Memlane]:
    with Memlane(server.url) as c:
        yield c


def test_stores_add_wait_search_and_list_follow_cursors(client: Memlane) -> None:
    store = client.stores.create("sync-demo", description="sdk")
    assert isinstance(store, m.StoreOut) and store.name == "sync-demo"
    assert client.stores.update("sync-demo", description="changed").description == "changed"
    assert "sync-demo" in [s.name for s in client.stores.list(limit=1)]

    accepted = client.add("sync-demo", RUN, messages=[
        {"role": "user", "content": "I'm vegetarian and I never fly overnight."},
        {"role": "assistant", "content": "Noted: daytime flights and veggie restaurants."}])
    assert isinstance(accepted, m.AddAccepted) and accepted.request_id.startswith("sdk-")
    task = client.tasks.wait("sync-demo", accepted.request_id, **TENANT_SCOPE, timeout=60)
    assert task.status == "SUCCEEDED" and task.memories

    hits = client.search("sync-demo", "dietary restrictions", {**TENANT_SCOPE, "run_id": "*"}, top_k=3,
                         include_evidence=True)
    assert "vegetarian" in hits[0].text and hits[0].evidence
    done = client.add("sync-demo", RUN, text="Alice's passport expires in March 2027.", sync=True)
    assert isinstance(done, m.TaskOut) and done.status == "SUCCEEDED"

    batch = [{"scope": RUN, "text": "Alice's seat preference is the aisle."}, {"scope": RUN}]  # the second: no content
    sent = client.memories.add_batch("sync-demo", batch)
    assert (sent.accepted, sent.refused) == (1, 1) and sent.results[1].error.code
    assert client.memories.add_batch("sync-demo", [{**batch[0], "request_id": sent.results[0].request_id}]).replayed == 1

    written = client.memories.write("sync-demo", RUN, [{"text": f"Fact number {i}.", "memory_id": f"fact-{i}"}
                                                       for i in range(5)])
    assert written.created == 5
    listed = list(client.memories.list("sync-demo", TENANT_SCOPE, limit=2))  # three pages at least
    assert {f"fact-{i}" for i in range(5)} <= {x.memory_id for x in listed}
    assert len(listed) == len({x.memory_id for x in listed})

    one = client.memories.get("sync-demo", "fact-0", **TENANT_SCOPE)
    assert client.memories.update("sync-demo", one.memory_id, **TENANT_SCOPE, text="Fact zero.").text == "Fact zero."
    assert client.memories.delete("sync-demo", "fact-1", **TENANT_SCOPE).memory_id == "fact-1"

    assert [x.role for x in client.messages.list("sync-demo", RUN, limit=1)][:2] == ["user", "assistant"]
    assert [t.request_id for t in client.tasks.list("sync-demo", **TENANT_SCOPE)]
    scopes = list(client.scopes.list("sync-demo", **TENANT_SCOPE))
    assert scopes[0].scope.run_id == "conv-1"
    policy = client.scopes.set_access_policy("sync-demo", RUN, "recall_only")
    assert policy.access_policy == "recall_only"


def test_threads_profiles_dream_audit_runs_and_erasure(client: Memlane) -> None:
    client.stores.create("work-demo", summary_keep_recent=0)  # a two-turn thread has something to summarize
    thread = client.thread("work-demo", "trip-7", app_id=APP, tenant_id="bob", agent_id="planner")
    assert thread.create().thread_id == "trip-7"
    assert thread.create().thread_id == "trip-7"  # the same again answers it
    thread.add(text="Bob is allergic to peanuts.", sync=True)
    thread.add(messages=[{"role": "user", "content": "Book me a table for dinner on Friday."}], sync=True)
    assert "peanuts" in thread.search("food allergies").results[0].text
    card = thread.context(query="food allergies", budget_tokens=300)
    assert "peanuts" in card.text and card.tokens.total <= 300
    assert [t.thread_id for t in client.threads.list("work-demo", app_id=APP, tenant_id="bob")] == ["trip-7"]
    assert [x.content for x in thread.messages()][-1].startswith("Book me")

    with pytest.raises(errors.SummaryNotFound):
        thread.summary()
    refresh = thread.refresh_summary()
    assert client.threads.wait_summary("work-demo", refresh.request_id, app_id=APP, tenant_id="bob").status \
        == "SUCCEEDED"
    assert thread.summary().thread_id == "trip-7"

    assert client.profiles.put("work-demo", "bob", app_id=APP, text="Bob flies for work.",
                               attributes={"home_airport": "BOS"}).text
    assert "BOS" in client.profiles.get("work-demo", "bob", app_id=APP).text
    client.profiles.put_agent("work-demo", "planner", app_id=APP, tenant_id="bob", text="Plan trips.")
    assert "Plan trips" in client.profiles.get_agent("work-demo", "planner", app_id=APP, tenant_id="bob").text
    # what was stated is withdrawn by its DELETE (204: None); deleted already, ProfileNotFound
    assert client.profiles.delete_agent("work-demo", "planner", app_id=APP, tenant_id="bob") is None
    with pytest.raises(errors.ProfileNotFound):
        client.profiles.get_agent("work-demo", "planner", app_id=APP, tenant_id="bob")
    assert client.profiles.delete("work-demo", "bob", app_id=APP) is None
    with pytest.raises(errors.ProfileNotFound):
        client.profiles.delete("work-demo", "bob", app_id=APP)
    client.profiles.put("work-demo", "bob", app_id=APP, text="Bob flies for work.")

    dream = client.dream.run("work-demo", {"app_id": APP, "tenant_id": "bob"}, sync=True)
    assert client.dream.wait("work-demo", dream.task_id).status == "SUCCEEDED"
    assert dream.task_id in [t.task_id for t in client.dream.list("work-demo", app_id=APP, tenant_id="bob")]
    for action in client.dream.actions("work-demo", dream.task_id):
        assert client.dream.get_action("work-demo", action.action_id).action_id == action.action_id

    operations = {r.operation for r in client.audit.list("work-demo", tenant_id="bob", limit=5)}
    assert operations  # the local caller is admin without keys

    assert thread.delete().messages == 2
    assert client.runs.delete("work-demo", "other-run", app_id=APP, tenant_id="bob", agent_id="planner").messages == 0
    erasure = client.erasures.erase(app_id=APP, tenant_id="bob")
    assert client.erasures.wait(erasure.erasure_id).status == "SUCCEEDED"
    assert client.erasures.get(erasure.erasure_id).deleted
    client.stores.delete("work-demo")
    with pytest.raises(errors.StoreNotFound):
        client.stores.get("work-demo")


def test_ids_with_at_colon_and_plus_are_addressed_in_paths(client: Memlane) -> None:
    """An intra-tenant trial: the SDK percent-encodes a path's ids and the local server matched the encoded text, so
    a tenant named by an e-mail address, a thread `t:1` or a memory `a:b+c@d` — valid ids, which the body carries
    fine — answered 400 in a path (API Gateway decodes an HTTP API's path: the local server now does too)."""
    client.stores.create("ids-demo")
    tenant = "ann+travel@example.com"
    thread = client.thread("ids-demo", "t:1", app_id=APP, tenant_id=tenant, agent_id="planner")
    assert thread.create().thread_id == "t:1" and thread.get().thread_id == "t:1"
    thread.add(text="Ann prefers window seats.", sync=True)
    assert "window" in thread.context(query="seats").text
    assert "window" in client.profiles.put("ids-demo", tenant, app_id=APP, text="Ann: window seats.").text
    assert client.profiles.get("ids-demo", tenant, app_id=APP).text
    client.memories.write("ids-demo", {"app_id": APP, "tenant_id": tenant, "agent_id": "planner", "run_id": "t:1"},
                          [{"text": "Ann's frequent flyer tier is gold.", "memory_id": "a:b+c@d"}])
    assert client.memories.get("ids-demo", "a:b+c@d", app_id=APP, tenant_id=tenant).text.endswith("gold.")
    assert client.memories.delete("ids-demo", "a:b+c@d", app_id=APP, tenant_id=tenant)
    assert thread.delete().messages == 1


def test_errors_are_typed_by_the_apis_code(client: Memlane) -> None:
    client.stores.create("errors-demo")
    with pytest.raises(errors.StoreExists) as exists:
        client.stores.create("errors-demo")
    assert isinstance(exists.value, errors.Conflict) and exists.value.status == 409
    with pytest.raises(errors.NotFound) as missing:  # the status's class catches the code's
        client.tasks.get("errors-demo", "never-sent", **TENANT_SCOPE)
    assert type(missing.value) is errors.TaskNotFound and missing.value.code == "task_not_found"
    with pytest.raises(errors.BadRequest) as bad:  # a wildcard on write: only the server knows the rule
        client.add("errors-demo", {"app_id": APP, "tenant_id": "*"}, text="x")
    assert bad.value.status == 400 and bad.value.code.startswith("invalid")
    client.add("errors-demo", RUN, text="A fact.", request_id="once")
    with pytest.raises(errors.RequestIdReused):
        client.add("errors-demo", RUN, text="Another fact.", request_id="once")


def test_the_async_client_does_the_same(server: Server) -> None:
    async def main() -> None:
        async with AsyncMemlane(server.url) as client:
            await client.stores.create("async-demo")
            accepted = await client.add("async-demo", RUN, text="Carol's passport expires in May 2030.")
            task = await client.tasks.wait("async-demo", accepted.request_id, **TENANT_SCOPE)
            assert task.status == "SUCCEEDED"
            hits = await client.search("async-demo", "passport expiry", {**TENANT_SCOPE, "run_id": "*"})
            assert "May 2030" in hits[0].text
            await client.memories.write("async-demo", RUN, [{"text": f"Note {i}.", "memory_id": f"n{i}"}
                                                            for i in range(3)])
            listed = [x.memory_id async for x in client.memories.list("async-demo", TENANT_SCOPE, limit=1)]
            assert {"n0", "n1", "n2"} <= set(listed)
            thread = client.thread("async-demo", "t-async", **TENANT_SCOPE)
            await thread.create()
            await thread.add(text="Carol likes aisle seats.", sync=True)
            assert "aisle" in (await thread.context(query="seat preference")).text
            await client.profiles.put("async-demo", TENANT, app_id=APP, text="Carol flies for work.")
            assert await client.profiles.delete("async-demo", TENANT, app_id=APP) is None
            with pytest.raises(errors.ProfileNotFound):
                await client.profiles.get("async-demo", TENANT, app_id=APP)
            with pytest.raises(errors.StoreNotFound):
                await client.stores.get("nope")
            with pytest.raises(TypeError):
                iter(client.memories.list("async-demo", TENANT_SCOPE)).__next__()

    asyncio.run(main())


@pytest.mark.parametrize("bad_id", ["..", ".", ""])
def test_an_id_that_is_a_dot_segment_is_refused_before_sending_and_the_store_stays(client: Memlane, bad_id: str) -> None:
    """An HTTP client resolves ".." in a path: `DELETE .../memories/..` would be sent as `DELETE /v1/stores/{store}`
    and delete every tenant's memory of the store (found through the MCP server's `forget`)."""
    client.stores.create("dots-demo") if "dots-demo" not in [s.name for s in client.stores.list()] else None
    for call in (lambda: client.memories.delete("dots-demo", bad_id, **TENANT_SCOPE),
                 lambda: client.threads.delete("dots-demo", bad_id, **TENANT_SCOPE),
                 lambda: client.threads.get("dots-demo", bad_id, **TENANT_SCOPE)):
        with pytest.raises(errors.BadRequest) as refused:
            call()
        assert refused.value.code == "invalid_input"
    assert client.stores.get("dots-demo").name == "dots-demo"


def test_the_dict_clients_paths_by_hand_refuse_dot_segments_too(server: Server, client: Memlane) -> None:
    """The dict client builds its paths by hand (`Memlane.request`): `delete_thread(store, "..")` was sent as
    `DELETE /v1/stores/{store}` and deleted the store."""
    from memlane.client import MemlaneClient

    client.stores.create("dots-legacy")
    legacy = MemlaneClient(server.url)
    for call in (lambda: legacy.delete_thread("dots-legacy", "..", **TENANT_SCOPE),
                 lambda: legacy.get_task("dots-legacy", ".", **TENANT_SCOPE),
                 lambda: legacy.delete_thread("dots-legacy", "..#", **TENANT_SCOPE),  # "#" cuts the path there
                 lambda: legacy.delete_thread("dots-legacy#", "x", **TENANT_SCOPE),
                 lambda: client.request("DELETE", "/v1/stores/dots-legacy/memories/..")):
        with pytest.raises(errors.BadRequest):
            call()
    assert client.stores.get("dots-legacy").name == "dots-legacy"


def test_an_answer_from_another_route_is_an_error_not_this_routes_result(client: Memlane) -> None:
    """A route answered with a status it never gives (a proxy rewrote the path to another route) raises."""
    from memlane.sdk.routes import Route

    route = Route("memories.delete", "DELETE", "/v1/stores/{store}/memories/{memory_id}", responses={200: m.MemoryOut})
    with pytest.raises(errors.ApiError) as unexpected:
        route.parse(204, None)
    assert unexpected.value.code == "unexpected_status"


def test_a_body_the_sdk_refuses_before_sending_is_the_apis_typed_error(client: Memlane) -> None:
    """A trial (session 30): a body past a limit, checked by the SDK with the API's own model, raised pydantic's
    ValidationError (no ApiError, so `except errors.ApiError` missed it; never `PayloadTooLarge`), and a refused id
    had status 0. Each is now the error the API would answer, status and field included; nothing is sent."""
    too_many = [{"role": "user", "content": f"turn {i}"} for i in range(500)]
    with pytest.raises(errors.PayloadTooLarge) as large:
        client.memories.add("never-made", RUN, too_many)
    assert (large.value.status, large.value.code, large.value.field) == (413, "payload_too_large", "messages")
    assert "refused before sending" in large.value.message
    with pytest.raises(errors.BadRequest) as bad:
        client.memories.search("never-made", "x", {"app_id": APP, "tenant_id": "t"}, top_k=0)
    assert (bad.value.status, bad.value.code, bad.value.field) == (400, "invalid_input", "top_k")
    with pytest.raises(errors.BadRequest) as dots:
        client.memories.delete("never-made", "..", **TENANT_SCOPE)
    assert dots.value.status == 400
    assert "never-made" not in [s.name for s in client.stores.list()]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_nan_or_infinity_in_a_body_is_refused_before_sending_as_the_api_refuses_it(server: Server, client: Memlane,
                                                                                    bad: float) -> None:
    """A tester: NaN and ±inf in metadata or a filter were sent as null (pydantic's JSON mode) and stored. They are not
    JSON: the API answers 400 invalid_input (no field), and the SDK and the dict client refuse them the same."""
    from memlane.client import MemlaneClient

    if "nan-demo" not in [s.name for s in client.stores.list()]:
        client.stores.create("nan-demo")
    legacy = MemlaneClient(server.url)
    say = [{"role": "user", "content": "I like aisle seats."}]
    for call in (lambda: client.memories.add("nan-demo", RUN, messages=say, metadata={"score": bad}),
                 lambda: client.memories.write("nan-demo", RUN, [{"text": "Aisle.", "metadata": {"score": [1, bad]}}]),
                 lambda: client.memories.search("nan-demo", "seats", TENANT_SCOPE, filters={"score": bad}),
                 lambda: asyncio.run(_async_add("nan-demo", server.url, {"score": bad})),
                 lambda: legacy.add("nan-demo", RUN, messages=say, metadata={"score": bad}),
                 lambda: legacy.write_memories("nan-demo", RUN, [{"text": "Aisle.", "metadata": {"score": bad}}])):
        with pytest.raises(errors.BadRequest) as refused:
            call()
        assert (refused.value.status, refused.value.code, refused.value.field) == (400, "invalid_input", None)
        assert "not a JSON number" in refused.value.message
        assert refused.value.message.endswith("(refused before sending)")
    assert list(client.memories.list("nan-demo", TENANT_SCOPE)) == []
    assert list(client.messages.list("nan-demo", RUN)) == []


async def _async_add(store: str, url: str, metadata: dict) -> None:
    async with AsyncMemlane(url) as client:
        await client.memories.add(store, RUN, text="Window seats.", metadata=metadata)
