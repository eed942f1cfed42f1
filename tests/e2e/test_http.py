"""The public HTTP contract, against a running `memlane serve`."""

import json
import urllib.request

import pytest

from memlane.client import ApiError, MemlaneClient

pytestmark = pytest.mark.e2e

SCOPE = {"app_id": "travel-app", "tenant_id": "alice", "agent_id": "planner", "run_id": "conv-1"}


def raw(server, method, path, body=None, data=None):
    req = urllib.request.Request(server.url + path, method=method,
                                 data=data if data is not None else (json.dumps(body).encode() if body else None),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_quick_start_flow_and_recall_in_a_later_conversation(server):
    c = MemlaneClient(server.url)
    assert c.create_store("demo")["name"] == "demo"
    accepted = c.add("demo", SCOPE, messages=[
        {"role": "user", "content": "I'm vegetarian and I never fly overnight."},
        {"role": "assistant", "content": "Noted, I will plan daytime flights and veggie restaurants."},
    ])
    assert accepted["status"] == "PENDING"
    task = c.wait_task("demo", accepted["request_id"])
    assert task["status"] == "SUCCEEDED" and task["memories"]
    later = {**SCOPE, "run_id": "*"}
    results = c.search("demo", "dietary restrictions for restaurant booking", later, include_evidence=True)
    assert "vegetarian" in results[0]["text"]
    assert results[0]["evidence"][0]["content"].startswith("I'm vegetarian")
    assert 0 <= results[0]["similarity"] <= 1
    msgs = c.messages("demo", SCOPE)
    assert [m["role"] for m in msgs["messages"]] == ["user", "assistant"] and msgs["next_cursor"] is None
    scopes = c.scopes("demo", "travel-app", "alice")["scopes"]
    assert scopes[0]["scope"]["run_id"] == "conv-1" and scopes[0]["message_count"] == 2


def test_sync_add_returns_200_with_memories(server):
    c = MemlaneClient(server.url)
    c.create_store("demo")
    status, body = raw(server, "POST", "/v1/stores/demo/memories",
                       {"scope": SCOPE, "text": "Alice's passport expires in March 2027.", "sync": True})
    assert status == 200 and body["status"] == "SUCCEEDED" and "passport" in body["memories"][0]["text"]


def test_store_create_conflict_and_listing(server):
    assert raw(server, "POST", "/v1/stores", {"name": "demo"})[0] == 201
    status, body = raw(server, "POST", "/v1/stores", {"name": "demo"})
    assert status == 409 and body["error"]["code"] == "store_exists"
    assert [s["name"] for s in raw(server, "GET", "/v1/stores")[1]["stores"]] == ["demo"]


@pytest.mark.parametrize("method, path, body, status, code, field", [
    ("POST", "/v1/stores/nope/memories", {"scope": SCOPE, "text": "x"}, 404, "store_not_found", None),
    ("POST", "/v1/stores/demo/memories", {"scope": {"tenant_id": "t"}, "text": "x"}, 400, "invalid_scope",
     "scope.app_id"),
    ("POST", "/v1/stores/demo/memories", {"scope": {**SCOPE, "run_id": "*"}, "text": "x"}, 400, "invalid_scope",
     "scope.run_id"),
    ("POST", "/v1/stores/demo/memories", {"scope": SCOPE, "messages": [{"role": "user"}]}, 400, "invalid_input",
     "messages.0.content"),
    ("POST", "/v1/stores/demo/memories", {"scope": SCOPE, "text": "x", "bogus": 1}, 400, "invalid_input", "bogus"),
    ("POST", "/v1/stores/demo/memories", {"scope": SCOPE, "messages": [{"role": "user", "content": "x"}] * 97},
     413, "payload_too_large", "messages"),
    ("POST", "/v1/stores/demo/search", {"query": "x", "scope": {"app_id": "a"}}, 400, "invalid_scope",
     "scope.tenant_id"),
    ("POST", "/v1/stores/demo/search", {"query": "x", "scope": {"app_id": "a", "tenant_id": "t"}, "top_k": 1000},
     400, "invalid_input", "top_k"),
    # a body field named like a parameter location ("query") is named too (it was cut as a location)
    ("POST", "/v1/stores/demo/search", {"query": 42, "scope": {"app_id": "a", "tenant_id": "t"}}, 400,
     "invalid_input", "query"),
    ("POST", "/v1/stores/demo/search", {"query": "", "scope": {"app_id": "a", "tenant_id": "t"}}, 400,
     "invalid_input", "query"),
    ("GET", "/v1/stores/demo/messages?app_id=a&tenant_id=t&agent_id=g", None, 400, "invalid_scope", "run_id"),
    ("GET", "/v1/stores/demo/tasks/unknown-req", None, 404, "task_not_found", None),
    ("POST", "/v1/stores", {"name": "Bad Name"}, 400, "invalid_store_name", "name"),
    ("GET", "/v1/nothing-here", None, 404, "route_not_found", None),
])
def test_errors_are_machine_readable(server, method, path, body, status, code, field):
    raw(server, "POST", "/v1/stores", {"name": "demo"})
    got_status, got = raw(server, method, path, body)
    assert got_status == status, got
    assert got["error"]["code"] == code
    if field:
        assert got["error"]["field"] == field


def test_malformed_json_is_400(server):
    raw(server, "POST", "/v1/stores", {"name": "demo"})
    status, body = raw(server, "POST", "/v1/stores/demo/memories", data=b"{not json")
    assert status == 400 and body["error"]["code"] == "invalid_input"


def test_openapi_document(server):
    status, doc = raw(server, "GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    for path in ("/v1/stores", "/v1/stores/{store}/memories", "/v1/stores/{store}/search",
                 "/v1/stores/{store}/tasks/{request_id}", "/v1/stores/{store}/messages", "/v1/stores/{store}/scopes",
                 "/v1/stores/{store}/threads/{thread_id}/context"):
        assert path in doc["paths"], path


def test_client_raises_api_error(server):
    with pytest.raises(ApiError) as e:
        MemlaneClient(server.url).get_store("missing")
    assert e.value.status == 404 and e.value.code == "store_not_found"


def test_a_changed_fact_over_http_current_first_history_and_as_of(server):
    c = MemlaneClient(server.url)
    c.create_store("demo")
    for run, day, text in (("conv-1", "2025-01-10", "I live in Boston."),
                           ("conv-2", "2025-03-14", "I moved from Boston to Denver last month.")):
        status, task = raw(server, "POST", "/v1/stores/demo/memories", {
            "scope": {**SCOPE, "run_id": run}, "sync": True,
            "messages": [{"role": "user", "content": text, "created_at": f"{day}T09:00:00Z"}]})
        assert status == 200
    (outcome,) = task["outcomes"]
    assert outcome["action"] == "UPDATE" and outcome["target_id"] and outcome["reason"] and outcome["action_id"]
    scope = {"app_id": SCOPE["app_id"], "tenant_id": SCOPE["tenant_id"]}
    now = c.search("demo", "where does the user live?", scope)
    assert "Denver" in now[0]["text"] and len(now) == 1 and now[0]["supersedes"] == outcome["target_id"]
    history = c.search("demo", "where does the user live?", scope, include_superseded=True)
    old = next(r for r in history if r["memory_id"] == outcome["target_id"])
    assert old["status"] == "superseded" and old["valid_to"].startswith("2025-03-14")
    then = c.search("demo", "where does the user live?", scope, as_of="2025-02-01T00:00:00Z")
    assert [r["text"] for r in then] == ["User lives in Boston."]
    status, body = raw(server, "POST", "/v1/stores/demo/search", {"query": "x", "scope": scope, "as_of": "soon"})
    assert status == 400 and body["error"]["code"]
    status, undone = raw(server, "POST", f"/v1/stores/demo/dream-actions/{outcome['action_id']}/undo")
    assert status == 200 and undone["status"] == "undone"
    assert len(c.search("demo", "where does the user live?", scope)) == 2


def test_a_new_threads_context_card_recalls_the_first_thread_within_the_budget(server):
    c = MemlaneClient(server.url)
    c.create_store("demo")
    first = c.add("demo", SCOPE, messages=[{"role": "user", "content": "I'm vegetarian and I never fly overnight."}])
    c.wait_task("demo", first["request_id"])
    c.add("demo", {**SCOPE, "run_id": "conv-2"}, messages=[
        {"role": "user", "content": "Hello again, I'm in Rome for the weekend."},
        {"role": "assistant", "content": "Lovely! What can I do for you?"},
        {"role": "user", "content": "Find me somewhere to have dinner tonight."}])

    card = c.context("demo", "conv-2", app_id="travel-app", tenant_id="alice", budget_tokens=300)

    assert set(card["sections"]) >= {"memories", "recent"}
    assert "vegetarian" in card["sections"]["memories"][0]["text"]
    assert card["sections"]["recent"][-1]["text"].endswith("Find me somewhere to have dinner tonight.")
    assert card["tokens"]["total"] <= 300 and card["tokens"]["tokenizer"] == "hf:all-minilm-l6-v2"
    assert card["text"].startswith("## Relevant memories") and card["evidence"]
    assert c.context("demo", "conv-2", app_id="travel-app", tenant_id="alice", budget_tokens=300)["text"] == card["text"]
    status, body = raw(server, "POST", "/v1/stores/demo/threads/conv-2/context",
                       {"app_id": "travel-app", "tenant_id": "alice", "budget_tokens": "300"})
    assert status == 400 and body["error"]["code"] == "invalid_input"
    status, body = raw(server, "POST", "/v1/stores/demo/threads/nope/context", {"app_id": "travel-app", "tenant_id": "alice"})
    assert status == 404 and body["error"]["code"] == "thread_not_found"
