"""request_id over the API, with one key per tenant: ids are per tenant (no squatting, no leak), a task
named by its id alone is found among the caller's own tenants, and reuse with another body or an
access policy other than the run's is a 409 with its code."""

from __future__ import annotations

import json

import pytest

from memlane.api.app import build_api
from memlane.bootstrap import build
from memlane.config import Settings
from memlane.domain.ids import derived_id
from memlane.services import access

from .api_events import api_event


@pytest.fixture()
def call(tmp_path):
    deps = build(Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none"))
    keys = {t: access.create_api_key(deps, f"{t}-app", {"travel": [t]}) for t in ("alice", "bob")}
    keys["backend"] = access.create_api_key(deps, "backend", {"travel": ["*"]})
    keys["admin"] = access.create_api_key(deps, "ops", {}, admin=True)
    api = build_api(deps, auth="api_key")

    def call(who: str, method: str, path: str, body: dict | None = None, query: str = "") -> tuple[int, dict]:
        out = api.resolve(api_event(method, path, body, keys[who], query), None)
        return out["statusCode"], json.loads(out["body"] or "null")

    assert call("admin", "POST", "/v1/stores", {"name": "demo"})[0] == 201
    return call


def add(tenant: str, text: str, **extra: object) -> dict:
    return {"scope": {"app_id": "travel", "tenant_id": tenant, "run_id": "r"}, "text": text, "request_id": "req-1",
            **extra}


def test_two_tenants_use_one_request_id_and_each_sees_only_its_own_task(call):
    assert call("alice", "POST", "/v1/stores/demo/memories", add("alice", "Alice likes tea."))[0] == 202
    assert call("bob", "POST", "/v1/stores/demo/memories", add("bob", "Bob likes coffee."))[0] == 202

    status, mine = call("alice", "GET", "/v1/stores/demo/tasks/req-1")
    assert status == 200 and mine["scope"]["tenant_id"] == "alice", mine
    status, theirs = call("bob", "GET", "/v1/stores/demo/tasks/req-1")
    assert status == 200 and theirs["scope"]["tenant_id"] == "bob"
    assert mine["message_ids"] != theirs["message_ids"]
    # alice naming bob is outside her grant; a caller granted both must say which
    assert call("alice", "GET", "/v1/stores/demo/tasks/req-1", query="app_id=travel&tenant_id=bob")[0] == 403
    status, error = call("backend", "GET", "/v1/stores/demo/tasks/req-1")
    assert (status, error["error"]["code"]) == (400, "tenant_required")
    status, named = call("backend", "GET", "/v1/stores/demo/tasks/req-1", query="app_id=travel&tenant_id=bob")
    assert status == 200 and named["scope"]["tenant_id"] == "bob"


def test_reuse_with_another_body_and_another_policy_are_409s_with_their_codes(call):
    first = call("alice", "POST", "/v1/stores/demo/memories", add("alice", "Alice likes tea.", sync=True))
    assert first[0] == 200
    again = call("alice", "POST", "/v1/stores/demo/memories", add("alice", "Alice likes tea."))
    assert again[0] == 202 and again[1]["request_id"] == "req-1"

    status, error = call("alice", "POST", "/v1/stores/demo/memories", add("alice", "Alice likes green tea."))
    assert (status, error["error"]["code"], error["error"]["field"]) == (409, "request_id_reused", "request_id")

    status, error = call("alice", "POST", "/v1/stores/demo/memories",
                         add("alice", "Alice likes green tea.", request_id="req-2", access_policy="none"))
    assert (status, error["error"]["code"], error["error"]["field"]) == (409, "access_policy_mismatch",
                                                                        "access_policy")


def search_texts(call, tenant: str, query: str, recipe: str = "hybrid") -> list[str]:
    status, body = call(tenant, "POST", "/v1/stores/demo/search",
                        {"query": query, "scope": {"app_id": "travel", "tenant_id": tenant}, "top_k": 10, "recipe": recipe})
    assert status == 200, body
    return [r["memory"]["text"] if "memory" in r else r["text"] for r in body["results"]]


def test_two_tenants_sending_one_request_id_each_keep_every_memory_searchable(call):
    """Memory ids derived from a request carry the tenant: before, bob's add of "req-1" derived the ids of
    alice's memories, and the embedded index replaced her documents with his (her memories stayed in the
    table, but search no longer found them)."""
    assert call("alice", "POST", "/v1/stores/demo/memories", add("alice", "I live in Lisbon.", sync=True))[0] == 200
    assert any("Lisbon" in t for t in search_texts(call, "alice", "Lisbon"))
    assert call("bob", "POST", "/v1/stores/demo/memories", add("bob", "I live in Oslo.", sync=True))[0] == 200
    assert any("Lisbon" in t for t in search_texts(call, "alice", "Lisbon"))
    assert any("Oslo" in t for t in search_texts(call, "bob", "Oslo"))
    # explicit writes without memory ids derive theirs from the request id too
    for tenant, text in (("alice", "Alice's seat is 2C."), ("bob", "Bob's seat is 14F.")):
        status, body = call(tenant, "POST", "/v1/stores/demo/memories", {
            "scope": {"app_id": "travel", "tenant_id": tenant}, "infer": False, "request_id": "req-2",
            "memories": [{"text": text}]})
        assert status in (200, 201), body
    assert any("2C" in t for t in search_texts(call, "alice", "seat"))
    assert any("14F" in t for t in search_texts(call, "bob", "seat"))


def explicit(call, tenant: str, text: str, **given: object) -> tuple[int, dict]:
    memory = {"text": text, **({"memory_id": given.pop("memory_id")} if "memory_id" in given else {})}
    return call(tenant, "POST", "/v1/stores/demo/memories", {
        "scope": {"app_id": "travel", "tenant_id": tenant}, "infer": False, "memories": [memory], **given})


def test_two_tenants_may_each_hold_a_memory_of_one_client_id(call):
    """Index identity is per tenant: before, ids were unique in a store's index, so bob's write of the id
    alice holds was refused (409 `memory_id_taken`) — which told him she holds it, and kept him from an id of
    his own choosing."""
    assert explicit(call, "alice", "Alice's seat is 2C.", memory_id="seat")[0] == 201
    status, body = explicit(call, "bob", "Bob's seat is 14F.", memory_id="seat")
    assert status == 201, body
    assert [m["text"] for m in body["memories"]] == ["Bob's seat is 14F."]
    assert search_texts(call, "alice", "seat", "keyword") == ["Alice's seat is 2C."]
    assert search_texts(call, "bob", "seat", "keyword") == ["Bob's seat is 14F."]
    for tenant, text in (("alice", "Alice's seat is 2C."), ("bob", "Bob's seat is 14F.")):
        status, got = call(tenant, "GET", "/v1/stores/demo/memories/seat", query=f"app_id=travel&tenant_id={tenant}")
        assert (status, got["text"]) == (200, text)
    # one tenant's delete of the id leaves the other's memory, in the table and in the index
    assert call("bob", "DELETE", "/v1/stores/demo/memories/seat", query="app_id=travel&tenant_id=bob")[0] == 200
    assert search_texts(call, "alice", "seat", "keyword") == ["Alice's seat is 2C."]
    assert search_texts(call, "bob", "seat", "keyword") == []


def test_an_id_memlane_would_derive_for_another_tenant_cannot_be_taken_first(call):
    """The ids memlane derives from a request id are a hash of what another tenant can guess (app, tenant,
    request id, position). Before, bob writing such an id first made alice's later write of that request fail
    (409 `memory_id_taken`), and bob writing it after told him whether alice had used the request id."""
    alices = derived_id("travel", "alice", "req-7", "0")
    assert explicit(call, "bob", "Bob took it first.", memory_id=alices)[0] == 201
    status, body = explicit(call, "alice", "Alice's gate is B12.", request_id="req-7")
    assert status == 201 and body["memories"][0]["memory_id"] == alices, body
    # and whether alice used a request id is not told by writing the id it derives, after her
    assert explicit(call, "alice", "Alice's meal is vegan.", request_id="req-9")[0] == 201
    used = explicit(call, "bob", "Bob probes.", memory_id=derived_id("travel", "alice", "req-9", "0"))
    unused = explicit(call, "bob", "Bob probes.", memory_id=derived_id("travel", "alice", "req-10", "0"))
    assert used[0] == unused[0] == 201, (used, unused)
    assert search_texts(call, "alice", "gate", "keyword") == ["Alice's gate is B12."]
    assert search_texts(call, "alice", "meal", "keyword") == ["Alice's meal is vegan."]
    assert "Bob took it first." in search_texts(call, "bob", "took", "keyword")


@pytest.mark.parametrize("deleted", ["thread", "memory"])
def test_a_request_whose_content_was_deleted_confirms_no_guess_of_it(call, deleted):
    """A trial (session 32): after its thread (or its explicit memory) was deleted, the task kept the digest of the
    add's body, so sending the request id again with a guessed text answered 202 (replay) for the right guess and
    409 for a wrong one. Every body is refused alike now, with a code that says why."""
    scope = {"app_id": "travel", "tenant_id": "alice", "run_id": "diag"}
    secret = "My HIV test came back positive."
    if deleted == "thread":
        def send(text):
            return call("alice", "POST", "/v1/stores/demo/memories",
                        {"scope": scope, "request_id": "turn-1", "messages": [{"role": "user", "content": text}]})
        assert send(secret)[0] in (200, 202)
        assert call("alice", "DELETE", "/v1/stores/demo/threads/diag", query="app_id=travel&tenant_id=alice")[0] == 200
    else:
        def send(text):
            return call("alice", "POST", "/v1/stores/demo/memories",
                        {"scope": scope, "request_id": "turn-1", "infer": False,
                         "memories": [{"text": text, "memory_id": "pin"}]})
        assert send(secret)[0] == 201
        assert call("alice", "DELETE", "/v1/stores/demo/memories/pin", query="app_id=travel&tenant_id=alice")[0] == 200
    answers = [send(guess) for guess in (secret, "My HIV test came back negative.")]
    assert [(status, body["error"]["code"]) for status, body in answers] == [(409, "request_content_deleted")] * 2
    assert answers[0][1] == answers[1][1]
