"""Hostile and loosely typed input gets a 4xx with a code, never a 500 and never a silent coercion
(issue 15, finding 11). Each case goes through the API as served (`build_api(...).resolve(event)`)."""

from __future__ import annotations

import json

import pytest

from memlane.api.app import build_api
from memlane.bootstrap import build
from memlane.config import Settings
from memlane.domain import limits
from memlane.domain.scope import MAX_ID_LIST

SCOPE = {"app_id": "travel", "tenant_id": "alice"}
RUN = {**SCOPE, "agent_id": "a", "run_id": "r"}
FAR_FUTURE = "9999-12-31T23:59:59-14:00"  # a valid ISO time whose UTC instant is past year 9999


def _event(method: str, path: str, body: dict | str | None = None, query: list[tuple[str, str]] | None = None) -> dict:
    params: dict[str, str] = {}
    for k, v in query or []:
        params[k] = f"{params[k]},{v}" if k in params else v  # API Gateway joins repeated parameters
    raw_query = "&".join(f"{k}={v}" for k, v in query or [])
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": raw_query,
            "headers": {"content-type": "application/json"}, "queryStringParameters": params or None,
            "requestContext": {"requestId": "r", "http": {"method": method, "path": path, "sourceIp": "127.0.0.1"},
                               "stage": "$default"},
            "body": body if isinstance(body, str) or body is None else json.dumps(body), "isBase64Encoded": False}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    deps = build(Settings.from_env(env={}, data_dir=tmp_path_factory.mktemp("strict") / "data", embedder="hashing",
                                   reranker="none"))
    served = build_api(deps)
    assert served.resolve(_event("POST", "/v1/stores", {"name": "demo"}), None)["statusCode"] == 201
    added = served.resolve(_event("POST", "/v1/stores/demo/memories",
                                  {"scope": RUN, "text": "Alice flies to Lisbon in May.", "sync": True}), None)
    assert added["statusCode"] == 200, added
    return served


def nested(depth: int) -> dict:
    """`depth` + 1 objects, each inside the one before."""
    value: dict = {}
    for _ in range(depth):
        value = {"k": value}
    return value


def add(**fields) -> tuple[str, str, dict]:
    return "POST", "/v1/stores/demo/memories", {"scope": RUN, "text": "hello there", **fields}


def search(**fields) -> tuple[str, str, dict]:
    return "POST", "/v1/stores/demo/search", {"query": "trip", "scope": SCOPE, **fields}


CASES = {
    # values that used to answer 500
    "metadata integer of 5,000 digits": ("POST", "/v1/stores/demo/memories",
                                         '{"scope": {"app_id": "travel", "tenant_id": "alice"}, "text": "x", '
                                         '"metadata": {"n": ' + "9" * 5000 + "}}", 400, "invalid_input"),
    "metadata NaN (not JSON)": ("POST", "/v1/stores/demo/memories",
                                '{"scope": {"app_id": "travel", "tenant_id": "alice"}, "text": "x", '
                                '"metadata": {"n": NaN}}', 400, "invalid_input"),
    # a shared-engines trial: the last `scope` counted; a proxy reading the first would check another tenant
    "scope named twice": ("POST", "/v1/stores/demo/memories",
                          '{"scope": {"app_id": "travel", "tenant_id": "bob"}, "text": "x", '
                          '"scope": {"app_id": "travel", "tenant_id": "alice"}}', 400, "duplicate_key"),
    "metadata integer past 64 bits": (*add(metadata={"n": 10 ** 30}), 400, "invalid_input"),
    "metadata nested 900 deep": (*add(metadata=nested(900)), 400, "invalid_input"),
    "metadata nested past its limit": (*add(metadata=nested(limits.MAX_METADATA_DEPTH + 1)), 400,
                                       "invalid_input"),
    "body nested 100,000 deep": ("POST", "/v1/stores/demo/search", "[" * 100_000 + "]" * 100_000, 400,
                                 "invalid_input"),
    "time_to past year 9999 in UTC": (*search(time_to=FAR_FUTURE), 400, "invalid_input"),
    "message created_at past year 9999 in UTC": (
        "POST", "/v1/stores/demo/memories",
        {"scope": RUN, "messages": [{"role": "user", "content": "hi", "created_at": FAR_FUTURE}]}, 400,
        "invalid_input"),
    "filter list of 1,000 values": (*search(filters={"k": list(range(1000))}), 400, "invalid_input"),
    "metadata list of 1,000 values": (*add(metadata={"k": list(range(1000))}), 400, "invalid_input"),
    "run_id list of 1,000 values": (*search(scope={**SCOPE, "run_id": [f"r{i}" for i in range(1000)]}), 400,
                                    "invalid_scope"),
    # loose coercion
    "top_k as a string": (*search(top_k="5"), 400, "invalid_input"),
    "top_k as a boolean": (*search(top_k=True), 400, "invalid_input"),
    "top_k as a float": (*search(top_k=5.0), 400, "invalid_input"),
    "min_similarity as a string": (*search(min_similarity="0.5"), 400, "invalid_input"),
    "include_evidence as a string": (*search(include_evidence="true"), 400, "invalid_input"),
    "sync as yes": (*add(sync="yes"), 400, "invalid_input"),
    "sync as 1": (*add(sync=1), 400, "invalid_input"),
    "time_from after time_to": (*search(time_from="2025-06-01T00:00:00Z", time_to="2025-01-01T00:00:00Z"), 400,
                                "invalid_input"),
    "dream sync as yes": ("POST", "/v1/stores/demo/dream", {"scope": SCOPE, "sync": "yes"}, 400, "invalid_input"),
    "dream threshold as a string": ("POST", "/v1/stores/demo/dream", {"scope": SCOPE, "threshold": "0.5"}, 400,
                                    "invalid_input"),
    "store dream_threshold as a string": ("POST", "/v1/stores", {"name": "other", "dream_threshold": "0.9"}, 400,
                                          "invalid_input"),
    "memory importance as a boolean": ("PATCH", "/v1/stores/demo/memories/m1", {**SCOPE, "importance": True}, 400,
                                       "invalid_input"),
    "memory metadata nested 900 deep": ("PATCH", "/v1/stores/demo/memories/m1",
                                        {**SCOPE, "metadata": nested(900)}, 400, "invalid_input"),
}

QUERY_CASES = {
    "newest_first as yes": ("/v1/stores/demo/messages", [*RUN.items(), ("newest_first", "yes")]),
    "newest_first as 1": ("/v1/stores/demo/messages", [*RUN.items(), ("newest_first", "1")]),
    "limit as a boolean": ("/v1/stores/demo/memories", [*SCOPE.items(), ("limit", "true")]),
    "run_id repeated 1,000 times": ("/v1/stores/demo/memories", [*SCOPE.items(),
                                                                 *(("run_id", f"r{i}") for i in range(1000))]),
    "audit since past year 9999 in UTC": ("/v1/stores/demo/requests", [("since", FAR_FUTURE.replace("+", "%2B"))]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_body_gets_a_4xx_with_a_code(api, case):
    method, path, body, status, code = CASES[case]
    result = api.resolve(_event(method, path, body), None)
    assert result["statusCode"] == status, result["body"][:300]
    assert json.loads(result["body"])["error"]["code"] == code


@pytest.mark.parametrize("case", list(QUERY_CASES))
def test_bad_query_parameter_gets_a_400(api, case):
    path, query = QUERY_CASES[case]
    result = api.resolve(_event("GET", path, None, query), None)
    assert result["statusCode"] == 400, result["body"][:300]
    assert json.loads(result["body"])["error"]["code"] in ("invalid_input", "invalid_scope")


def test_the_same_requests_well_typed_are_served(api):
    """The limits refuse only what is past them: the well-typed neighbours of the cases above succeed."""
    ok = [
        search(top_k=5, min_similarity=0.5, include_evidence=True),
        search(min_similarity=1),  # an integer is a number
        search(time_from="2025-01-01T00:00:00Z", time_to="2025-06-01T00:00:00+02:00"),
        search(filters={"k": list(range(limits.MAX_LIST_VALUES))}),
        search(scope={**SCOPE, "run_id": [f"r{i}" for i in range(MAX_ID_LIST)]}),
        add(metadata={"n": 2 ** 53, "deep": nested(limits.MAX_METADATA_DEPTH - 2)}, sync=False),
    ]
    for method, path, body in ok:
        result = api.resolve(_event(method, path, body), None)
        assert result["statusCode"] in (200, 202), (body, result["body"][:300])
    for path, query in [("/v1/stores/demo/messages", [*RUN.items(), ("newest_first", "true")]),
                        ("/v1/stores/demo/memories", [*SCOPE.items(), ("limit", "5")])]:
        result = api.resolve(_event("GET", path, None, query), None)
        assert result["statusCode"] == 200, result["body"][:300]
