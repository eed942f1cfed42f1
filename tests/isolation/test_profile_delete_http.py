"""Withdrawing a stated profile over HTTP: DELETE .../profiles/{tenant_id} and .../agents/{agent_id}/profile answer
204 with no body, audit the request once as bound by the grant check, and answer a caller outside the grant
exactly as its GET does (no existence oracle, nothing deleted)."""

from __future__ import annotations

import json

import pytest

from memlane.api.app import build_api
from memlane.server import _LambdaContext, http_event
from memlane.services import access, stores

APP = "travel"


@pytest.fixture()
def world(deps):
    keys = {"alice": access.create_api_key(deps, "alice-app", {APP: ["alice"]}),
            "backend": access.create_api_key(deps, "travel-backend", {APP: ["*"]})}
    stores.create(deps, name="demo")
    return build_api(deps, auth="api_key"), deps, keys


def call(api, method, path, body=None, key=None):
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    result = api.resolve(http_event(method, path, headers, json.dumps(body).encode() if body is not None else b"",
                                    "127.0.0.1"), _LambdaContext())
    return result["statusCode"], result.get("body") or ""


def audit_rows(deps, operation):
    rows = deps.repo.list_audit("demo", limit=200, cursor=None, now=int(deps.clock.now().timestamp()))[0]
    return [r for r in rows if r.operation == operation]


@pytest.mark.parametrize("path,query,body", [
    ("/v1/stores/demo/profiles/bob", f"app_id={APP}", {"app_id": APP}),
    ("/v1/stores/demo/agents/nurse/profile", f"app_id={APP}&tenant_id=bob", {"app_id": APP, "tenant_id": "bob"})])
def test_a_stated_profile_is_deleted_with_204_audited_once_and_refused_outside_the_grant(world, path, query, body):
    api, deps, keys = world
    operation = "DELETE /v1/stores/{store}" + ("/profiles/{id}" if "/profiles/" in path else "/agents/{id}/profile")
    status, _ = call(api, "PUT", path, {**body, "text": "Bob was diagnosed with asthma."}, keys["backend"])
    assert status == 200

    # Alice's key, outside its grant: the same answer as its GET, nothing deleted, audited as refused.
    refused = call(api, "DELETE", f"{path}?{query}", key=keys["alice"])
    assert refused == call(api, "GET", f"{path}?{query}", key=keys["alice"])
    assert (refused[0], json.loads(refused[1])["error"]["code"]) == (403, "outside_grant")
    assert [(r.principal, r.tenant_id, r.status) for r in audit_rows(deps, operation)] == [("alice-app", "bob",
                                                                                             refused[0])]
    assert "asthma" in json.loads(call(api, "GET", f"{path}?{query}", key=keys["backend"])[1])["text"]

    assert call(api, "DELETE", f"{path}?{query}", key=keys["backend"]) == (204, "")
    rows = [r for r in audit_rows(deps, operation) if r.principal == "travel-backend"]
    assert [(r.app_id, r.tenant_id, r.status) for r in rows] == [(APP, "bob", 204)]
    assert rows[0].agent_id == ("nurse" if "/agents/" in path else None)
    status, answer = call(api, "GET", f"{path}?{query}", key=keys["backend"])
    assert status == 404 and json.loads(answer)["error"]["code"] == "profile_not_found"
    # Deleted already: 404 as for a GET of nothing, not 204 again.
    status, answer = call(api, "DELETE", f"{path}?{query}", key=keys["backend"])
    assert status == 404 and json.loads(answer)["error"]["code"] == "profile_not_found"
