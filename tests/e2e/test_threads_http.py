"""Threads, explicit writes and actor profiles over HTTP against `memlane serve`, through the Python client."""

import json
import urllib.request

import pytest

from memlane.client import ApiError, MemlaneClient

pytestmark = pytest.mark.e2e

TENANT = {"app_id": "travel", "tenant_id": "ann"}


def raw(server, method, path, body=None):
    request = urllib.request.Request(server.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_a_thread_over_http(server):
    c = MemlaneClient(server.url)
    c.create_store("demo")
    body = {"thread_id": "trip-1", "scope": {**TENANT, "agent_id": "planner"}, "metadata": {"topic": "Lisbon"}}
    assert raw(server, "POST", "/v1/stores/demo/threads", body)[0] == 201
    status, again = raw(server, "POST", "/v1/stores/demo/threads", body)
    assert status == 200 and again["thread_id"] == "trip-1" and again["summary"] is None
    status, error = raw(server, "POST", "/v1/stores/demo/threads", {**body, "scope": {**TENANT, "agent_id": "x"}})
    assert (status, error["error"]["code"]) == (409, "thread_exists")

    c.add("demo", {**TENANT, "agent_id": "planner", "run_id": "trip-1"},
          messages=[{"role": "user", "content": "I land in Lisbon on Friday at noon."}])
    thread = c.get_thread("demo", "trip-1", **TENANT)
    assert thread["message_count"] == 1 and thread["token_count"] > 0 and thread["tokenizer"].startswith("hf:")
    assert thread["metadata"] == {"topic": "Lisbon"} and thread["access_policy"] == "recall_and_store"
    other = c.create_thread("demo", {**TENANT, "agent_id": "planner"})
    listed = c.list_threads("demo", **TENANT, limit=1)
    assert [t["thread_id"] for t in listed["threads"]] == [other["thread_id"]] and listed["next_cursor"]
    rest = c.list_threads("demo", **TENANT, cursor=listed["next_cursor"])
    assert [t["thread_id"] for t in rest["threads"]] == ["trip-1"] and rest["next_cursor"] is None

    deleted = c.delete_thread("demo", "trip-1", **TENANT)
    assert deleted["messages"] == 1
    with pytest.raises(ApiError) as e:
        c.get_thread("demo", "trip-1", **TENANT)
    assert (e.value.status, e.value.code) == (404, "thread_not_found")
    assert raw(server, "GET", "/v1/stores/demo/threads/trip-1")[1]["error"]["code"] == "invalid_scope"


def test_explicit_writes_over_http(server):
    c = MemlaneClient(server.url)
    c.create_store("demo")
    items = [{"text": "Ann's seat preference is 14A.", "memory_id": "seat", "memory_type": "preference"}]
    status, written = raw(server, "POST", "/v1/stores/demo/memories",
                          {"scope": TENANT, "infer": False, "memories": items})
    assert status == 201 and written["created"] == 1 and written["memories"][0]["origin"] == "explicit"
    again = c.write_memories("demo", TENANT, items)
    assert again["created"] == 0 and again["memories"] == written["memories"]
    hit = c.search("demo", "which seat does Ann like?", TENANT)[0]
    assert hit["memory_id"] == "seat" and hit["origin"] == "explicit"
    for body, code in (({"scope": TENANT, "infer": False, "memories": [{**items[0], "text": "Seat 2C."}]},
                        (409, "memory_id_reused")),
                       ({"scope": TENANT, "infer": False, "memories": [{"text": "x"}] * 51}, (413, "payload_too_large")),
                       ({"scope": TENANT, "infer": False, "text": "hello"}, (400, "invalid_input")),
                       ({"scope": TENANT, "memories": [{"text": "x"}]}, (400, "infer_required")),
                       ({"scope": TENANT, "infer": "no", "memories": [{"text": "x"}]}, (400, "invalid_input"))):
        status, error = raw(server, "POST", "/v1/stores/demo/memories", body)
        assert (status, error["error"]["code"]) == code, body
    assert [m["memory_id"] for m in c.memories("demo", TENANT)["memories"]] == ["seat"]


def test_profiles_over_http(server):
    c = MemlaneClient(server.url)
    c.create_store("demo")
    with pytest.raises(ApiError) as e:
        c.get_profile("demo", "ann", app_id="travel")
    assert e.value.code == "profile_not_found"
    put = c.put_profile("demo", "ann", app_id="travel", text="Ann is a premium customer.",
                        attributes={"home_airport": "LIS"})
    assert put["text"] == "Ann is a premium customer.\n- home_airport: LIS"
    assert put["attributes"] == [{"name": "home_airport", "value": "LIS", "origin": "explicit", "confidence": None,
                                  "evidence_ids": [], "since": None}]
    assert c.get_profile("demo", "ann", app_id="travel") == put
    agent = c.put_agent_profile("demo", "planner", app_id="travel", tenant_id="ann",
                                text="You plan Ann's trips. Confirm dates before booking.")
    assert agent["agent_id"] == "planner" and c.get_agent_profile("demo", "planner", **TENANT) == agent
    status, error = raw(server, "PUT", "/v1/stores/demo/profiles/ann", {"app_id": "travel", "tenant_id": "bob",
                                                                        "text": "x"})
    assert status == 400  # a scope field the route does not take
    status, spec = raw(server, "GET", "/openapi.json")
    for path in ("/v1/stores/{store}/threads", "/v1/stores/{store}/threads/{thread_id}",
                 "/v1/stores/{store}/agents/{agent_id}/profile"):
        assert path in spec["paths"]


def test_threads_command(server):
    import subprocess
    import sys

    def cli(*argv, json_out=True):
        done = subprocess.run([sys.executable, "-m", "memlane.cli", "--url", server.url,
                               *(["--json"] if json_out else []), *argv], capture_output=True, text=True, timeout=60)
        return done.returncode, json.loads(done.stdout) if json_out and done.returncode == 0 else done.stdout, done.stderr

    MemlaneClient(server.url).create_store("demo")
    tenant = ["--app", "travel", "--tenant", "ann"]
    code, thread, _ = cli("threads", "create", "demo", *tenant, "--agent", "planner", "--thread", "trip-1",
                          "--metadata", '{"topic": "x"}')
    assert code == 0 and thread["thread_id"] == "trip-1" and thread["metadata"] == {"topic": "x"}
    MemlaneClient(server.url).add("demo", {**TENANT, "agent_id": "planner", "run_id": "trip-1"}, text="I land Friday.")
    code, thread, _ = cli("threads", "get", "demo", *tenant, "--thread", "trip-1")
    assert code == 0 and thread["message_count"] == 1
    code, page, _ = cli("threads", "list", "demo", *tenant)
    assert code == 0 and [t["thread_id"] for t in page["threads"]] == ["trip-1"]
    code, human, _ = cli("threads", "list", "demo", *tenant, json_out=False)
    header, row = human.splitlines()  # a table
    assert code == 0 and header.split()[:3] == ["THREAD", "AGENT", "MESSAGES"] and row.split()[:3] == \
        ["trip-1", "planner", "1"]
    code, deleted, _ = cli("threads", "delete", "demo", *tenant, "--thread", "trip-1")
    assert code == 0 and deleted["messages"] == 1
    code, _, err = cli("threads", "get", "demo", *tenant, "--thread", "trip-1")
    assert code == 2 and "thread_not_found" in err
    code, human, _ = cli("threads", "list", "demo", *tenant, json_out=False)
    assert code == 0 and human.strip() == "(no threads)"


def test_an_id_holding_a_query_or_a_slash_names_no_other_thread(server):
    """A trial (session 30): the dict client pasted ids into the path as written, so `delete_thread(S, "victim?x=1")`
    deleted thread `victim`. Each id is now one escaped path segment: the server refuses the malformed id."""
    c = MemlaneClient(server.url)
    c.create_store("demo")
    c.add("demo", {**TENANT, "agent_id": "planner", "run_id": "victim"}, text="I land Friday.")
    for thread_id in ("victim?x=1", "victim/summary", "victim%3F"):
        with pytest.raises(ApiError) as refused:
            c.delete_thread("demo", thread_id, **TENANT)
        assert refused.value.status in (400, 404), (thread_id, refused.value)
    assert c.get_thread("demo", "victim", **TENANT)["message_count"] == 1
