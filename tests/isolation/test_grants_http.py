"""Grants over real HTTP: a key sees only its own apps and tenants; everything is audited."""

import pytest

from memlane.bootstrap import build
from memlane.client import ApiError, MemlaneClient
from memlane.config import Settings
from memlane.services import access

from ..e2e.conftest import Server

pytestmark = pytest.mark.e2e


@pytest.fixture()
def keyed_server(tmp_path):
    data = tmp_path / "data"
    deps = build(Settings.from_env(env={}, data_dir=data, embedder="hashing", reranker="none"))
    keys = {
        "admin": access.create_api_key(deps, "ops", {}, admin=True),
        "alice": access.create_api_key(deps, "alice-app", {"travel": ["alice"]}),
        "any_tenant": access.create_api_key(deps, "travel-backend", {"travel": ["*"]}),
    }
    server = Server(data).start()
    yield server, keys
    server.stop()


def client(server, key):
    return MemlaneClient(server.url, api_key=key)


ALICE = {"app_id": "travel", "tenant_id": "alice", "agent_id": "a", "run_id": "r"}
BOB = {"app_id": "travel", "tenant_id": "bob", "agent_id": "a", "run_id": "r"}


def test_missing_and_unknown_keys_are_401(keyed_server):
    server, _ = keyed_server
    for key in (None, "ml_not-a-real-key"):
        with pytest.raises(ApiError) as e:
            client(server, key).list_stores()
        assert e.value.status == 401 and e.value.code in ("missing_api_key", "invalid_api_key")


def test_tenant_key_is_confined_to_its_tenant(keyed_server):
    server, keys = keyed_server
    client(server, keys["admin"]).create_store("demo")
    alice = client(server, keys["alice"])
    rid = alice.add("demo", ALICE, text="Alice is allergic to peanuts.", sync=True)["request_id"]
    assert "peanuts" in alice.search("demo", "allergies", {"app_id": "travel", "tenant_id": "alice"})[0]["text"]
    backend = client(server, keys["any_tenant"])
    bob_rid = backend.add("demo", BOB, text="Bob collects vintage maps.", sync=True)["request_id"]

    forbidden = [
        lambda: alice.search("demo", "maps", {"app_id": "travel", "tenant_id": "bob"}),
        lambda: alice.add("demo", BOB, text="forged"),
        lambda: alice.messages("demo", BOB),
        lambda: alice.add("demo", {"app_id": "other-app", "tenant_id": "alice"}, text="x"),
        lambda: alice.add("demo", {"app_id": "travel"}, text="x"),  # tenant defaults to __default__
        lambda: alice.create_store("mine"),
        lambda: alice.scopes("demo", "travel", "bob"),
        lambda: alice.get_task("demo", bob_rid, app_id="travel", tenant_id="bob"),
        lambda: alice.create_thread("demo", {"app_id": "travel", "tenant_id": "bob"}, thread_id="r"),
        lambda: alice.get_thread("demo", "r", app_id="travel", tenant_id="bob"),
        lambda: alice.list_threads("demo", app_id="travel", tenant_id="bob"),
        lambda: alice.delete_thread("demo", "r", app_id="travel", tenant_id="bob"),
        lambda: alice.write_memories("demo", {"app_id": "travel", "tenant_id": "bob"}, [{"text": "forged"}]),
        lambda: alice.put_profile("demo", "bob", app_id="travel", text="forged"),
        lambda: alice.get_profile("demo", "bob", app_id="travel"),
        lambda: alice.put_agent_profile("demo", "a", app_id="travel", tenant_id="bob", text="forged"),
        lambda: alice.get_agent_profile("demo", "a", app_id="travel", tenant_id="bob"),
        lambda: alice.get_summary("demo", "r", app_id="travel", tenant_id="bob", agent_id="a"),
        lambda: alice.refresh_summary("demo", "r", app_id="travel", tenant_id="bob", agent_id="a"),
    ]
    for call in forbidden:
        with pytest.raises(ApiError) as e:
            call()
        assert e.value.status == 403, e.value
    # a request id named alone is looked up among the caller's tenants only: another's is as unknown as a
    # missing one, its owner unnamed
    with pytest.raises(ApiError) as e:
        alice.get_task("demo", bob_rid)
    assert (e.value.status, e.value.code) == (404, "task_not_found") and "bob" not in str(e.value)
    assert alice.get_task("demo", rid)["status"] == "SUCCEEDED"
    assert backend.search("demo", "maps", {"app_id": "travel", "tenant_id": "bob"})
    # bob's thread, memories and profile are as he left them: none of the refused calls wrote anything
    assert backend.get_thread("demo", "r", app_id="travel", tenant_id="bob")["message_count"] == 1
    assert not any("forged" in m["text"] for m in backend.memories("demo", {"app_id": "travel", "tenant_id": "bob"})[
        "memories"])
    with pytest.raises(ApiError) as e:
        backend.get_profile("demo", "bob", app_id="travel")
    assert e.value.code == "profile_not_found"


def test_audit_log_records_every_request_and_is_admin_only(keyed_server):
    server, keys = keyed_server
    admin = client(server, keys["admin"])
    admin.create_store("demo")
    alice = client(server, keys["alice"])
    alice.search("demo", "anything", {"app_id": "travel", "tenant_id": "alice"})
    with pytest.raises(ApiError):
        alice.search("demo", "anything", {"app_id": "travel", "tenant_id": "bob"})
    with pytest.raises(ApiError):
        alice.search("demo", "", {"app_id": "travel", "tenant_id": "alice"})  # refused by validation
    with pytest.raises(ApiError) as e:
        alice._call("GET", "/v1/stores/demo/requests")
    assert e.value.status == 403
    log = admin._call("GET", "/v1/stores/demo/requests")["requests"]
    searches = [r for r in log if r["operation"] == "POST /v1/stores/{store}/search"]
    assert [(r["principal"], r["status"], r["error_code"], r["tenant_id"]) for r in searches] == [
        ("alice-app", 400, "invalid_input", None),  # refused before any grant check: no scope was bound
        ("alice-app", 403, "outside_grant", "bob"),
        ("alice-app", 200, None, "alice"),
    ]
    assert all(r["latency_ms"] >= 0 and r["request_id"] for r in log)
    only_403 = admin._call("GET", "/v1/stores/demo/requests?status=403")["requests"]
    assert {r["status"] for r in only_403} == {403}


def test_a_stranger_gets_401_whatever_the_path_method_or_body(keyed_server):
    """A new user's trial: without a key, an unknown route answered 404 route_not_found, a method a route lacks 405,
    and a POST without a body 400 — answers that tell a stranger which routes exist. The probe and the API
    description stay open (a load balancer's health check)."""
    import json
    import urllib.error
    import urllib.request

    server, _ = keyed_server

    def status(method, path, body=None):
        request = urllib.request.Request(server.url + path, method=method, data=body,
                                         headers={"Content-Type": "application/json"} if body else {})
        try:
            with urllib.request.urlopen(request) as answer:
                return answer.status, None
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read() or b"{}").get("error", {}).get("code")

    for method, path in (("GET", "/v1/nothing"), ("PUT", "/v1/stores"), ("POST", "/v1/stores"),
                         ("GET", "/v1/stores/nope/memories"), ("DELETE", "/v1/stores/nope")):
        assert status(method, path) == (401, "missing_api_key"), (method, path)
    assert status("POST", "/v1/stores", b"{}") == (401, "missing_api_key")
    assert status("GET", "/health")[0] == 200 and status("GET", "/openapi.json")[0] == 200


def test_a_revoked_key_is_refused_by_the_running_server_at_once(keyed_server, capsys):
    """A new user's trial: a key could be created but neither listed nor revoked — a leaked key had no way out. The
    operator lists the keys (ids, never the keys) and revokes one; the server refuses it from its next request, and
    the other keys go on."""
    import json

    from memlane import cli

    server, keys = keyed_server
    assert client(server, keys["alice"]).list_stores() is not None
    data = ["--data-dir", str(server.data_dir), "--json"]
    assert cli.main(["keys", "list", *data]) == 0
    listed = json.loads(capsys.readouterr().out)["keys"]
    assert sorted(k["principal"] for k in listed) == ["alice-app", "ops", "travel-backend"]
    assert not any(key in json.dumps(listed) for key in keys.values())
    assert cli.main(["keys", "revoke", "--key", keys["alice"], *data]) == 0
    assert len(json.loads(capsys.readouterr().out)["revoked"]) == 1
    with pytest.raises(ApiError) as e:
        client(server, keys["alice"]).list_stores()
    assert (e.value.status, e.value.code) == (401, "invalid_api_key")
    assert client(server, keys["any_tenant"]).list_stores() is not None
    assert cli.main(["keys", "revoke", "--principal", "nobody", *data]) == 2  # 404 api_key_not_found


def test_strangers_and_two_tenants_at_once_each_get_their_own_answer(keyed_server):
    """The stranger check runs on the server's threads beside granted callers: under concurrent clients of two
    tenants and callers without a key, each granted caller sees only its own tenant and every stranger gets 401."""
    import urllib.error
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    server, keys = keyed_server
    client(server, keys["admin"]).create_store("conc")
    for tenant in ("alice", "bob"):
        client(server, keys["any_tenant"]).add("conc", ALICE if tenant == "alice" else BOB,
                                               text=f"{tenant} keeps the marker {tenant}zq.", sync=True)

    def granted(i):
        key, tenant = (keys["alice"], "alice") if i % 2 else (keys["any_tenant"], "bob")
        hits = client(server, key).search("conc", f"marker {tenant}zq",
                                          {"app_id": "travel", "tenant_id": tenant, "run_id": "*"})
        return tenant, [h["text"] for h in hits]

    def stranger(i):
        try:
            urllib.request.urlopen(urllib.request.Request(f"{server.url}/v1/stores/conc/nothing{i}", method="GET"))
        except urllib.error.HTTPError as refused:
            return refused.code
        return 200

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(granted, range(40)))
        refused = list(pool.map(stranger, range(40)))
    for tenant, texts in answers:
        other = "bob" if tenant == "alice" else "alice"
        assert texts and all(f"{other}zq" not in t for t in texts), (tenant, texts)
    assert set(refused) == {401}
