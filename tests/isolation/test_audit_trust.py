"""An audit log you can trust, and no existence oracle: the log records the scope the grant check
authorized (never a guess from the query string or body), a scope given twice and differently is
refused, anonymous failures write nothing into a store's log, and ids outside a caller's grant answer
exactly like ids that do not exist — 401 before any lookup without a key."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone

import pytest

from memlane.api.app import build_api
from memlane.domain.scope import Scope, ScopeFilter
from memlane.server import _LambdaContext, http_event
from memlane.services import access, dream, erase, ingest, stores

T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
BOB = {"app_id": "travel", "tenant_id": "bob", "agent_id": "bot", "run_id": "r1"}
ALICE = {"app_id": "travel", "tenant_id": "alice", "agent_id": "bot", "run_id": "r1"}


@pytest.fixture()
def world(deps):
    keys = {"admin": access.create_api_key(deps, "ops", {}, admin=True),
            "alice": access.create_api_key(deps, "alice-app", {"travel": ["alice"]}),
            "backend": access.create_api_key(deps, "travel-backend", {"travel": ["*"]})}
    stores.create(deps, name="demo")
    ids = {}
    for who, name, scope in (("alice", "Ann", ALICE), ("bob", "Bea", BOB)):
        for run, day, text in (("r1", 0, "I live in Boston."), ("r2", 9, "I moved from Boston to Denver.")):
            task = ingest.add(deps, "demo", scope={**scope, "run_id": run}, sync=True, request_id=f"{name.lower()}-{run}",
                              messages=[{"role": "user", "name": name, "content": text,
                                         "created_at": T0 + timedelta(days=day)}])
        ids[f"{who}_task"] = task.request_id
        dreamt = dream.start(deps, "demo", scope={"app_id": "travel", "tenant_id": who}, sync=True)
        assert dreamt.action_ids, "the seed needs a dream action"
        ids[f"{who}_dream"], ids[f"{who}_action"] = dreamt.task_id, dreamt.action_ids[0]
    ids["bob_erasure"] = erase.request_erasure(deps, app_id="travel", tenant_id="nobody", principal="ops").erasure_id
    return build_api(deps, auth="api_key"), deps, keys, ids


def call(api, method, path, body=None, key=None):
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    result = api.resolve(http_event(method, path, headers, json.dumps(body).encode() if body is not None else b"",
                                    "127.0.0.1"), _LambdaContext())
    return result["statusCode"], json.loads(result["body"]) if result.get("body") else None


def audit_rows(deps, store="demo"):
    return deps.repo.list_audit(store, limit=200, cursor=None, now=int(deps.clock.now().timestamp()))[0]


def test_a_scope_given_in_the_query_and_differently_in_the_body_is_refused_and_audited_as_the_body(world):
    api, deps, keys, _ = world
    status, body = call(api, "POST", "/v1/stores/demo/search?app_id=other-app&tenant_id=alice",
                        {"query": "where do I live", "scope": {"app_id": "travel", "tenant_id": "bob"}},
                        keys["backend"])
    assert status == 400 and body["error"]["code"] == "conflicting_scope", body
    assert "results" not in body
    row = next(r for r in audit_rows(deps) if r.operation == "POST /v1/stores/{store}/search")
    assert (row.app_id, row.tenant_id, row.status, row.error_code) == ("travel", "bob", 400, "conflicting_scope")


def test_a_scope_given_twice_names_a_tenant_only_once_the_grant_allows_it(world):
    """A caller granted alice only, naming itself in the query and bob in the body: refused by the grant check
    (403, the same answer as naming bob alone), not 400 `conflicting_scope` before any grant check — so every
    scope a row records went through the check. Before, the row recorded bob's scope under a 400 that no grant
    check had decided."""
    api, deps, keys, _ = world
    status, body = call(api, "POST", "/v1/stores/demo/search?app_id=travel&tenant_id=alice",
                        {"query": "where do I live", "scope": {"app_id": "travel", "tenant_id": "bob"}}, keys["alice"])
    assert (status, body["error"]["code"]) == (403, "outside_grant"), body
    assert call(api, "POST", "/v1/stores/demo/search", {"query": "where do I live",
                                                       "scope": {"app_id": "travel", "tenant_id": "bob"}},
                keys["alice"])[1] == body  # the same answer as naming bob alone
    rows = [r for r in audit_rows(deps) if r.operation == "POST /v1/stores/{store}/search"]
    assert {(r.principal, r.tenant_id, r.status, r.error_code) for r in rows} == {("alice-app", "bob", 403, "outside_grant")}


def test_the_same_scope_given_twice_is_accepted_and_audited_once_as_bound(world):
    api, deps, keys, _ = world
    status, body = call(api, "POST", "/v1/stores/demo/search?tenant_id=bob",
                        {"query": "where do I live", "scope": {"app_id": "travel", "tenant_id": "bob"}},
                        keys["backend"])
    assert status == 200 and body["results"]
    row = next(r for r in audit_rows(deps) if r.operation == "POST /v1/stores/{store}/search")
    assert (row.principal, row.app_id, row.tenant_id, row.status) == ("travel-backend", "travel", "bob", 200)
    # a repeated query parameter is one value (API Gateway joins it with commas), not a conflict
    status, body = call(api, "GET", "/v1/stores/demo/memories?app_id=travel&tenant_id=bob&run_id=r1&run_id=r2",
                        key=keys["backend"])
    assert status == 200 and body["memories"]
    row = next(r for r in audit_rows(deps) if r.operation == "GET /v1/stores/{store}/memories")
    assert (row.tenant_id, row.run_id) == ("bob", "r1,r2")


def test_the_tenant_in_a_path_is_audited_and_a_second_tenant_in_the_query_is_refused(world):
    api, deps, keys, ids = world
    status, _ = call(api, "GET", "/v1/stores/demo/profiles/bob?app_id=travel", key=keys["backend"])
    assert status in (200, 404)
    status, body = call(api, "GET", "/v1/stores/demo/profiles/bob?app_id=travel&tenant_id=alice",
                        key=keys["backend"])
    assert status == 400 and body["error"]["code"] == "conflicting_scope"
    status, body = call(api, "DELETE", "/v1/stores/demo/runs/r1?app_id=travel&tenant_id=bob&agent_id=bot&run_id=r2",
                        key=keys["backend"])
    assert status == 400 and body["error"]["code"] == "conflicting_scope"
    status, _ = call(api, "GET", f"/v1/stores/demo/tasks/{ids['alice_task']}", key=keys["alice"])
    assert status == 200
    rows = audit_rows(deps)
    profile = [r for r in rows if r.operation == "GET /v1/stores/{store}/profiles/{id}"]
    assert [(r.app_id, r.tenant_id) for r in profile] == [("travel", "bob"), ("travel", "bob")]
    run = next(r for r in rows if r.operation == "DELETE /v1/stores/{store}/runs/{id}")
    assert (run.tenant_id, run.agent_id, run.run_id) == ("bob", "bot", "r1")
    task = next(r for r in rows if r.operation == "GET /v1/stores/{store}/tasks/{id}")
    assert (task.app_id, task.tenant_id, task.status) == ("travel", "alice", 200)  # from the task, not the query


def test_anonymous_failures_write_no_row_into_any_store_log_but_are_logged(world, caplog):
    api, deps, keys, ids = world
    before = {s: len(audit_rows(deps, s)) for s in ("demo", "victim", "~global")}
    with caplog.at_level(logging.WARNING, logger="memlane.audit"):
        for key in (None, "ml_not-a-real-key"):
            for method, path, body in (
                    ("POST", "/v1/stores/demo/search", {"query": "x", "scope": {"app_id": "travel", "tenant_id": "bob"}}),
                    ("GET", "/v1/stores/victim/tasks/whatever", None),
                    ("POST", "/v1/stores/demo/threads/r1/context", {"app_id": "travel", "tenant_id": "bob"}),
                    ("GET", "/v1/stores", None)):
                status, _ = call(api, method, path, body, key)
                assert status == 401
    assert {s: len(audit_rows(deps, s)) for s in before} == before
    refused = [r for r in caplog.records if r.name == "memlane.audit" and "401" in r.getMessage()]
    assert len(refused) == 8 and any("/v1/stores/{store}/tasks" in r.getMessage() for r in refused)
    assert not any("victim" in r.getMessage() for r in refused)  # the route's shape, not the path's ids


def test_a_context_card_is_built_from_the_callers_own_tenant_only(world):
    api, deps, keys, _ = world
    status, body = call(api, "POST", "/v1/stores/demo/threads/r1/context", {"app_id": "travel", "tenant_id": "bob"},
                        keys["alice"])
    assert status == 403 and body["error"]["code"] == "outside_grant" and "Bea" not in json.dumps(body)
    # the same thread id under her own tenant is her thread: nothing of Bob's in it
    status, body = call(api, "POST", "/v1/stores/demo/threads/r1/context", {"app_id": "travel", "tenant_id": "alice"},
                        keys["alice"])
    assert status == 200 and "Ann" in body["text"] and "Bea" not in json.dumps(body)
    rows = [r for r in audit_rows(deps) if r.operation == "POST /v1/stores/{store}/threads/{id}/context"]
    assert sorted((r.tenant_id, r.run_id, r.status) for r in rows) == [("alice", "r1", 200), ("bob", "r1", 403)]


def test_an_identified_callers_request_to_a_missing_store_is_logged_globally_not_under_its_name(world):
    api, deps, keys, _ = world
    status, body = call(api, "GET", "/v1/stores/victim/tasks?app_id=travel&tenant_id=alice", key=keys["alice"])
    assert status == 404 and body["error"]["code"] == "store_not_found"
    assert audit_rows(deps, "victim") == []
    row = next(r for r in audit_rows(deps, "~global") if r.operation == "GET /v1/stores/{store}/tasks")
    assert (row.principal, row.tenant_id, row.status) == ("alice-app", "alice", 404)


def test_without_a_key_every_id_route_answers_401_before_looking_anything_up(world):
    api, _, _, ids = world
    paths = ["/v1/stores/demo/tasks/" + ids["bob_task"], "/v1/stores/demo/tasks/no-such-task",
             "/v1/stores/nostore/tasks/no-such-task", "/v1/stores/demo/dream-tasks/" + ids["bob_dream"],
             "/v1/stores/demo/dream-tasks/nope", "/v1/stores/nostore/dream-tasks/nope",
             f"/v1/stores/demo/dream-tasks/{ids['bob_dream']}/actions", "/v1/stores/demo/dream-actions/nope",
             "/v1/stores/demo/dream-actions/" + ids["bob_action"], "/v1/stores/nostore",
             "/v1/erasures/" + ids["bob_erasure"], "/v1/erasures/nope",
             "/v1/stores/demo/threads/r1/summary?app_id=travel&tenant_id=bob&agent_id=bot"]
    answers = {p: call(api, "GET", p) for p in paths}
    assert {p: a[0] for p, a in answers.items()} == {p: 401 for p in paths}
    assert len({json.dumps(a[1], sort_keys=True) for a in answers.values()}) == 1  # nothing tells them apart
    for action in ("apply", "reject", "undo"):
        assert call(api, "POST", f"/v1/stores/nostore/dream-actions/nope/{action}")[0] == 401
    assert call(api, "POST", "/v1/stores/nostore/tasks/nope/retry")[0] == 401


@pytest.mark.parametrize("route", ["task", "retry", "dream_task", "dream_actions", "action", "apply", "reject",
                                   "undo", "erasure"])
def test_an_id_outside_the_grant_answers_exactly_like_a_missing_id(world, route):
    api, _, keys, ids = world
    paths = {"task": ("GET", "/v1/stores/demo/tasks/{}", ids["bob_task"]),
             "retry": ("POST", "/v1/stores/demo/tasks/{}/retry", ids["bob_task"]),
             "dream_task": ("GET", "/v1/stores/demo/dream-tasks/{}", ids["bob_dream"]),
             "dream_actions": ("GET", "/v1/stores/demo/dream-tasks/{}/actions", ids["bob_dream"]),
             "action": ("GET", "/v1/stores/demo/dream-actions/{}", ids["bob_action"]),
             "apply": ("POST", "/v1/stores/demo/dream-actions/{}/apply", ids["bob_action"]),
             "reject": ("POST", "/v1/stores/demo/dream-actions/{}/reject", ids["bob_action"]),
             "undo": ("POST", "/v1/stores/demo/dream-actions/{}/undo", ids["bob_action"]),
             "erasure": ("GET", "/v1/erasures/{}", ids["bob_erasure"])}
    method, template, foreign = paths[route]
    missing = "X" + foreign[1:]  # the same shape, but no such id
    status, body = call(api, method, template.format(foreign), key=keys["alice"])
    status_missing, body_missing = call(api, method, template.format(missing), key=keys["alice"])
    assert status == status_missing == 404
    assert body["error"]["code"] == body_missing["error"]["code"]
    assert body["error"]["message"] == body_missing["error"]["message"].replace(missing, foreign)
    assert "bob" not in json.dumps(body).replace(foreign, "") and "nobody" not in json.dumps(body)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_another_tenants_thread_summary_is_outside_the_grant(world, method):
    api, deps, keys, _ = world
    path = "/v1/stores/demo/threads/r1/summary?app_id=travel&tenant_id=bob&agent_id=bot"
    status, body = call(api, method, path, key=keys["alice"])
    assert status == 403 and body["error"]["code"] == "outside_grant"
    assert deps.repo.get_summary("demo", Scope(**BOB)) is None  # and nothing was queued for Bob's thread


def test_a_thread_named_again_in_the_query_with_another_id_is_refused(world):
    api, _, keys, _ = world
    path = "/v1/stores/demo/threads/r1/summary?app_id=travel&tenant_id=alice&agent_id=bot&run_id=r2"
    status, body = call(api, "POST", path, key=keys["alice"])
    assert status == 400 and body["error"]["code"] == "conflicting_scope"


def test_own_ids_still_resolve_for_their_tenant(world):
    api, _, keys, ids = world
    assert call(api, "GET", f"/v1/stores/demo/tasks/{ids['alice_task']}", key=keys["alice"])[0] == 200
    assert call(api, "GET", f"/v1/stores/demo/dream-tasks/{ids['alice_dream']}", key=keys["alice"])[0] == 200
    assert call(api, "GET", f"/v1/stores/demo/dream-tasks/{ids['alice_dream']}/actions", key=keys["alice"])[0] == 200
    assert call(api, "GET", f"/v1/stores/demo/dream-actions/{ids['alice_action']}", key=keys["alice"])[0] == 200
    assert call(api, "GET", f"/v1/stores/demo/tasks/{ids['bob_task']}", key=keys["backend"])[0] == 200
    assert call(api, "GET", f"/v1/erasures/{ids['bob_erasure']}", key=keys["admin"])[0] == 200


def test_a_known_path_with_an_unsupported_method_is_405_with_allow_not_404(world):
    api, _, keys, ids = world
    result = api.resolve(http_event("PUT", f"/v1/stores/demo/tasks/{ids['alice_task']}",
                                    {"authorization": f"Bearer {keys['alice']}"}, b"", "127.0.0.1"), _LambdaContext())
    assert result["statusCode"] == 405 and json.loads(result["body"])["error"]["code"] == "method_not_allowed"
    assert {k.lower(): v for k, v in result.get("headers", {}).items()}["allow"] == "GET"
    assert call(api, "GET", "/v1/stores/demo/no-such-thing", key=keys["alice"])[0] == 404


def test_an_id_with_a_character_the_router_refuses_is_400_not_405(world):
    """API Gateway hands the path over decoded: a client's `tasks/a%23b` arrives as `tasks/a#b`, which no route
    pattern takes. The route does take GET, so the answer is the id's 400, as `memlane serve` gives."""
    api, _, keys, _ = world
    event = http_event("GET", "/v1/stores/demo/tasks/a", {"authorization": f"Bearer {keys['alice']}"}, b"", "127.0.0.1")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/stores/demo/tasks/a#b"
    result = api.resolve(event, _LambdaContext())
    assert result["statusCode"] == 400 and json.loads(result["body"])["error"]["code"] == "invalid_input"


def test_an_encoded_slash_never_routes_a_request_elsewhere(world):
    """The regression trial of path decoding: `demo%2Fthreads%2Fr1`, decoded whole, was read as a thread of store
    demo; `%2Fv1/tenants/erase` as the erase route. A segment holding an encoded `/` stays as sent: no id's."""
    api, _, keys, _ = world
    assert call(api, "GET", "/v1/stores/demo%2Fthreads%2Fr1?app_id=travel&tenant_id=alice&agent_id=bot",
                key=keys["alice"])[0] == 400
    assert call(api, "GET", "/v1/stores/demo/threads/r1%2Fsummary?app_id=travel&tenant_id=alice&agent_id=bot",
                key=keys["alice"])[0] == 400
    assert http_event("POST", "%2Fv1/tenants/erase", {}, b"", "127.0.0.1")["rawPath"] == "%2Fv1/tenants/erase"
    assert call(api, "GET", "/v1/stores/demo/threads/r%31?app_id=travel&tenant_id=alice&agent_id=bot",
                key=keys["alice"])[0] == 200  # any other encoded character is decoded: r1


def test_each_add_of_a_batch_is_audited_under_the_tenant_it_names(world):
    """A batch's adds may name several tenants: each one's row names its own, accepted or refused — the
    single route's and the ingestion queue's rule — so a tenant's audit view misses none of its adds."""
    api, deps, keys, _ = world
    status, body = call(api, "POST", "/v1/stores/demo/memories:batch", key=keys["alice"], body={"adds": [
        {"scope": {**BOB, "run_id": "r9"}, "text": "alice writes into bob", "request_id": "into-bob"},
        {"scope": {**ALICE, "run_id": "r9"}, "text": "alice writes her own", "request_id": "own"}]})
    assert status == 200 and [r["outcome"] for r in body["results"]] == ["refused", "accepted"]
    rows = [r for r in audit_rows(deps) if r.operation.endswith("(an add)")]
    assert {(r.tenant_id, r.status, r.error_code, r.principal) for r in rows} == {
        ("bob", 403, "outside_grant", "alice-app"), ("alice", 202, None, "alice-app")}
    status, seen = call(api, "GET", "/v1/stores/demo/requests?tenant_id=bob&limit=50", key=keys["admin"])
    assert status == 200 and any(r["operation"].endswith("(an add)") and r["status"] == 403 for r in seen["requests"])


@pytest.mark.parametrize("offset_hours", [2, -5, 0])
def test_an_audit_window_given_in_any_offset_selects_the_same_rows(world, offset_hours):
    """The rows' keys are UTC times: a bound given with another offset was compared as written (0 rows at
    +02:00, rows from hours before at -05:00)."""
    from datetime import timezone as tz

    from memlane.services import audit

    api, deps, keys, _ = world
    assert call(api, "GET", "/v1/stores/demo", key=keys["admin"])[0] == 200
    [row] = audit_rows(deps)
    at = row.at.astimezone(tz(timedelta(hours=offset_hours)))
    found, _ = audit.list_(deps, "demo", limit=200, cursor=None, since=at, until=at)
    assert row.request_id in [r.request_id for r in found]
    assert {r.at for r in found} == {row.at}


def test_an_audit_window_with_one_bound_without_an_offset_is_read_as_utc_not_a_crash(world):
    """`since` without an offset and `until` with one were compared before either was made UTC: a TypeError,
    answered 500 (and, an internal error, audited nowhere)."""
    api, deps, keys, _ = world
    status, body = call(api, "GET", "/v1/stores/demo/requests?since=2024-01-01T00:00:00"
                                    "&until=2024-01-01T06:00:00%2B05:00", key=keys["admin"])
    assert status == 200, body  # 01:00 UTC is after midnight UTC
    status, body = call(api, "GET", "/v1/stores/demo/requests?since=2024-01-01T02:00:00"
                                    "&until=2024-01-01T06:00:00%2B05:00", key=keys["admin"])
    assert status == 400 and body["error"]["field"] == "since", body


def test_a_request_that_fails_with_an_internal_error_is_answered_500_and_audited(world, monkeypatch):
    """A route raising anything but a MemlaneError escaped `Api.resolve`: the server answered 500 and no audit
    row was written anywhere."""
    api, deps, keys, _ = world

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(stores, "get", broken)
    status, body = call(api, "GET", "/v1/stores/demo", key=keys["admin"])
    assert status == 500 and body == {"error": {"code": "internal_error", "message": "internal error"}}
    assert [(r.operation, r.status, r.principal) for r in audit_rows(deps) if r.status == 500] == [
        ("GET /v1/stores/{store}", 500, "ops")]


def test_the_audit_log_keeps_a_requests_shape_never_its_words(world):
    """A trial wrote any text into the admin's logs through routes that do not exist: the operation kept the path
    verbatim ("GET /v1/stores/demo/messages/Alice%20has%20HIV"). Every segment that is not a route's own word is
    logged as `{id}`; the record a route addresses by a well-formed id is named apart (`target_id`)."""
    api, deps, keys, _ = world
    assert call(api, "GET", "/v1/stores/demo/messages/Alice%20has%20HIV", key=keys["alice"])[0] == 404
    assert call(api, "GET", "/v1/secret-diagnosis/Alice%20has%20HIV", key=keys["alice"])[0] == 404
    assert call(api, "GET", "/v1/stores/demo/memories/Alice-has-HIV?app_id=travel&tenant_id=alice",
                key=keys["alice"])[0] == 404  # an id-shaped text: no record, so no target named
    memory = next(deps.repo.iter_memories("demo", "travel", "alice")).memory_id
    assert call(api, "DELETE", f"/v1/stores/demo/memories/{memory}?app_id=travel&tenant_id=alice",
                key=keys["alice"])[0] == 200
    rows = [*audit_rows(deps), *audit_rows(deps, "~global")]
    logged = json.dumps([r.model_dump(mode="json") for r in rows])
    assert "HIV" not in logged and "secret" not in logged
    assert {r.operation for r in rows} >= {"GET /v1/stores/{store}/messages/{id}", "GET /v1/{id}/{id}",
                                          "DELETE /v1/stores/{store}/memories/{id}"}
    (deleted,) = [r for r in rows if r.operation == "DELETE /v1/stores/{store}/memories/{id}"]
    assert deleted.target_id == memory and deleted.principal == "alice-app"


def test_every_word_of_every_route_is_known_to_the_audit_log(world):
    """So a real route is never logged with one of its own words as `{id}` (the list is kept by hand)."""
    from memlane.api.audit import ROUTE_WORDS, operation

    api, _, keys, _ = world
    status, spec = call(api, "GET", "/openapi.json")
    assert status == 200 and spec["paths"]
    for path in spec["paths"]:
        words = [s for s in path.split("/")[1:] if not s.startswith("{")]
        assert set(words) <= ROUTE_WORDS, path
        assert operation("GET", path.replace("{store}", "demo")).count("{id}") == path.count("{") - ("{store}" in path)


def test_audit_rows_past_their_retention_are_neither_listed_nor_kept_by_the_local_table(world, monkeypatch):
    """A deletion trial: `expires_at` was written on every row, but the local table has no TTL and nothing read it,
    so an erased tenant's rows (its ids, its principals) stayed and were listed for ever."""
    from memlane.services import audit

    api, deps, keys, _ = world
    assert call(api, "POST", "/v1/stores/demo/search", {"query": "where", "scope": {"app_id": "travel",
                                                                                 "tenant_id": "alice"}},
                keys["alice"])[0] == 200
    assert call(api, "GET", "/v1/stores/demo/requests", key=keys["admin"])[1]["requests"]
    kept = len(deps.table.query("demo#~audit", limit=1000).items)
    later = deps.clock.now() + timedelta(days=31)  # past the default 30-day retention
    monkeypatch.setattr(deps.clock, "now", lambda: later)
    rows = call(api, "GET", "/v1/stores/demo/requests", key=keys["admin"])[1]["requests"]
    assert rows == []  # the read itself is logged after it answers
    assert audit.expire(deps) >= kept
    assert [i for i in deps.table.query("demo#~audit", limit=1000).items if i["expires_at"] <= later.timestamp()] \
        == []
    assert audit.expire(deps) == 0


def test_a_deleted_stores_audit_rows_expire_too(world, service, monkeypatch):
    """The local table's expiry read the logs of the stores in the catalog and the global one: a deleted store's
    rows (its tenants, principals and thread ids) were kept past their retention for ever."""
    from memlane.repository import RETIRED_LOGS_PK
    from memlane.services import audit

    api, deps, keys, _ = world
    assert call(api, "POST", "/v1/stores/demo/search", {"query": "where", "scope": {"app_id": "travel",
                                                                                 "tenant_id": "alice"}},
                keys["alice"])[0] == 200
    assert call(api, "DELETE", "/v1/stores/demo", key=keys["admin"])[0] in (200, 202, 204)
    service.drain()
    assert deps.table.query("demo#~audit", limit=1).items  # kept for its retention
    assert audit.expire(deps) == 0 and deps.table.query(RETIRED_LOGS_PK, limit=10).items
    later = deps.clock.now() + timedelta(days=31)  # past the default 30-day retention
    monkeypatch.setattr(deps.clock, "now", lambda: later)

    assert audit.expire(deps) > 0

    assert deps.table.query("demo#~audit", limit=1).items == []
    assert deps.table.query(RETIRED_LOGS_PK, limit=10).items == []  # nothing left to expire: its record goes too


def test_a_store_created_again_has_an_empty_log_and_its_deletion_is_in_the_global_one(world, service):
    """The same trial: a deleted store's log could not be read (404), not even who deleted it, and a store created
    again under the name listed the old store's rows (its tenants, its thread ids)."""
    api, deps, keys, _ = world
    assert call(api, "POST", "/v1/stores/demo/search", {"query": "where", "scope": {"app_id": "travel",
                                                                                 "tenant_id": "alice"}},
                keys["alice"])[0] == 200
    assert "alice" in {r.tenant_id for r in audit_rows(deps)}
    assert call(api, "DELETE", "/v1/stores/demo", key=keys["admin"])[0] in (200, 202, 204)
    service.drain()
    assert call(api, "POST", "/v1/stores", {"name": "demo"}, keys["admin"])[0] == 201
    rows = call(api, "GET", "/v1/stores/demo/requests", key=keys["admin"])[1]["requests"]
    assert {r["tenant_id"] for r in rows} <= {None}, rows
    deleted = [r for r in call(api, "GET", "/v1/stores/~global/requests", key=keys["admin"])[1]["requests"]
               if r["operation"] == "DELETE /v1/stores/{store}"]
    assert [(r["principal"], r["status"], r["target_id"]) for r in deleted] == [("ops", deleted[0]["status"], "demo")]
    assert deleted[0]["status"] < 400
    created = [r for r in call(api, "GET", "/v1/stores/~global/requests", key=keys["admin"])[1]["requests"]
               if r["operation"] == "POST /v1/stores"]
    assert [r["target_id"] for r in created] == ["demo"]  # the one made again here (the first, by the service)


def test_an_erasure_request_and_its_reads_are_audited_with_the_erasure_id(world):
    """The same trial: `POST /v1/tenants/erase` and `GET /v1/erasures/{id}` were audited with no target, so the log
    could not be linked to the erasure record."""
    api, deps, keys, _ = world
    status, started = call(api, "POST", "/v1/tenants/erase", {"app_id": "travel", "tenant_id": "bob"}, keys["admin"])
    assert status == 202, started
    erasure_id = started["erasure_id"]
    assert call(api, "GET", f"/v1/erasures/{erasure_id}", key=keys["admin"])[0] == 200
    rows = audit_rows(deps, "~global")
    assert {(r.operation, r.target_id) for r in rows} >= {("POST /v1/tenants/erase", erasure_id),
                                                         ("GET /v1/erasures/{id}", erasure_id)}


class Killed(BaseException):
    """The server dying mid-request: no `except Exception` answers it."""


@pytest.mark.parametrize("method, path, body, module_name, name", [
    ("DELETE", "/v1/stores/demo/memories/{memory}?app_id=travel&tenant_id=bob", None, "memories", "delete"),
    ("DELETE", "/v1/stores/demo/threads/r2?app_id=travel&tenant_id=bob&agent_id=bot", None, "threads", "delete"),
    ("POST", "/v1/tenants/erase", {"app_id": "travel", "tenant_id": "bob"}, "erase", "request_erasure"),
    ("POST", "/v1/stores/demo/dream-actions/{action}/reject", None, "dream", "reject_action"),
])
def test_a_deletion_the_server_dies_during_is_in_the_audit_log(world, monkeypatch, method, path, body, module_name, name):
    """The deletion trial: the audit row followed the route's answer, so a deletion the server died during — its
    job finishes it after the restart — was never audited, and the client's retry logged a 404 only. The row is
    written once the grant allows the deletion, before it runs, and the answer's row replaces it."""
    import importlib

    api, deps, keys, ids = world
    memory = deps.repo.list_memories("demo", ScopeFilter(app_id="travel", tenant_id="bob"), limit=1, cursor=None)[0][0].memory_id
    path = path.format(memory=memory, action=ids["bob_action"])
    module = importlib.import_module(f"memlane.services.{module_name}")
    real = getattr(module, name)

    def dies(*args, **kwargs):
        raise Killed()

    monkeypatch.setattr(module, name, dies)
    with pytest.raises(Killed):
        call(api, method, path, body, keys["backend"])
    log = "~global" if module_name == "erase" else "demo"
    (row,) = [r for r in audit_rows(deps, log) if r.operation.startswith(method) and r.principal == "travel-backend"]
    assert (row.status, row.tenant_id) == (0, "bob")  # asked for, no answer recorded
    assert row.target_id == (None if module_name == "erase" else path.split("/")[5].split("?")[0])

    monkeypatch.setattr(module, name, real)
    status, _ = call(api, method, path, body, keys["backend"])
    assert status in (200, 202)
    answered = [r for r in audit_rows(deps, log) if r.operation.startswith(method) and r.principal == "travel-backend"]
    assert sorted(r.status for r in answered) == [0, status]  # the retry's own row; the first stays unanswered


def test_a_change_asked_of_a_store_that_does_not_exist_leaves_no_row_under_its_name(world):
    """The regression trial: the row a change writes before it runs went to the log of the store it named, though
    none exists; its answer (404) went to the global log, so the first stayed, at status 0, where no route shows it
    and the local sweeper never expires it — any tenant could write rows under any name."""
    api, deps, keys, _ = world
    assert call(api, "DELETE", "/v1/stores/nostore/memories/m1?app_id=travel&tenant_id=alice", key=keys["alice"])[0] \
        == 404
    assert call(api, "PATCH", "/v1/stores/nostore", {"description": "x"}, keys["admin"])[0] == 404
    assert audit_rows(deps, "nostore") == []
    answered = [(r.operation, r.status) for r in audit_rows(deps, "~global") if "{store}" in r.operation]
    assert sorted(answered) == [("DELETE /v1/stores/{store}/memories/{id}", 404), ("PATCH /v1/stores/{store}", 404)]


def test_a_change_whose_store_is_deleted_while_it_runs_has_one_row(world, monkeypatch):
    """The second regression trial: the row written before the change went to the store's log, its 404 answer
    (`store_not_found`, the store deleted meanwhile) to the global one — two rows, one left at status 0."""
    from memlane.services import memories

    api, deps, keys, _ = world
    memory = deps.repo.list_memories("demo", ScopeFilter(app_id="travel", tenant_id="bob"), limit=1,
                                     cursor=None)[0][0].memory_id
    real = memories.delete

    def store_deleted_first(d, store, **kwargs):
        stores.delete(deps, store)
        return real(d, store, **kwargs)

    monkeypatch.setattr(memories, "delete", store_deleted_first)
    path = f"/v1/stores/demo/memories/{memory}?app_id=travel&tenant_id=bob"
    assert call(api, "DELETE", path, key=keys["backend"])[0] == 404
    rows = [r for log in ("demo", "~global") for r in audit_rows(deps, log)
            if r.operation == "DELETE /v1/stores/{store}/memories/{id}"]
    assert [(r.store, r.status) for r in rows] == [("demo", 404)]


def test_a_summary_route_without_an_agent_is_audited_without_one(world):
    """A trial (session 32): the summary routes wrote `agent_id: __default__` (another, real agent) in the rows of
    requests that named none. (`DELETE .../runs/{id}?agent_id=` of a run with nothing in it stays 200 with zero counts:
    a run named whole is deleted idempotently — a retry after a lost answer succeeds.)"""
    api, deps, keys, _ = world
    q = "app_id=travel&tenant_id=alice"
    for method in ("GET", "POST"):
        call(api, method, f"/v1/stores/demo/threads/r1/summary?{q}", key=keys["alice"])
    rows = [r for r in audit_rows(deps) if r.operation.endswith("/summary")]
    assert len(rows) == 2 and {r.agent_id for r in rows} == {None}
    status, body = call(api, "DELETE", f"/v1/stores/demo/runs/nope?{q}&agent_id=zz", key=keys["alice"])
    assert status == 200 and body["messages"] == body["memories"] == 0
