"""POST /v1/stores/{store}/memories:batch through the resolver `memlane serve` and API Gateway use (no socket):
each add written as the single route writes it, each answered in its own result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from memlane.api.app import api_description, build_api
from memlane.domain import limits
from memlane.repository import tenant_pk
from memlane.server import _LambdaContext, http_event
from memlane.services import access, stores

SCOPE = {"app_id": "travel", "tenant_id": "alice", "agent_id": "bot", "run_id": "r1"}


def add(request_id: str, content: str, **changes: Any) -> dict[str, Any]:
    return {"scope": SCOPE, "request_id": request_id,
            "messages": [{"role": "user", "content": content}], **changes}


@pytest.fixture()
def service(tmp_path: Path) -> Iterator[Any]:
    from memlane.bootstrap import build_local
    from memlane.config import Settings

    svc = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none"))
    stores.create(svc.deps, name="demo")
    yield svc
    svc.close()


def caller(service: Any, auth: str = "none", key: str | None = None):
    api = build_api(service.deps, auth=auth)  # type: ignore[arg-type]

    def send(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
        raw = json.dumps(body).encode() if body is not None else b""
        result = api.resolve(http_event(method, path, headers, raw, "127.0.0.1"), _LambdaContext())
        return result["statusCode"], json.loads(result["body"]) if result.get("body") else None

    return send


def tasks(service: Any, tenant: str = "alice") -> list[Any]:
    return service.deps.table.query(tenant_pk("demo", "travel", tenant), prefix="TASK#", limit=1000).items


def test_each_add_is_answered_in_its_own_result_and_a_bad_one_fails_only_itself(service: Any) -> None:
    send = caller(service)
    body = {"adds": [add("imp-1", "I moved to Lisbon in May."),
                     add("imp-2", ""),  # empty content: refused, alone
                     add("imp-1", "I moved to Lisbon in May."),  # a replay of the first
                     add("imp-3", "I moved to Lisbon in May.", sync=True),  # inline extraction is per request
                     {"scope": SCOPE, "request_id": "imp-4", "text": "Alice's seat preference is the aisle."}]}

    status, out = send("POST", "/v1/stores/demo/memories:batch", body)

    assert status == 200
    assert [(r["index"], r["outcome"], r["status"], r["request_id"]) for r in out["results"]] == [
        (0, "accepted", 202, "imp-1"), (1, "refused", 400, "imp-2"), (2, "replayed", 202, "imp-1"),
        (3, "refused", 400, "imp-3"), (4, "accepted", 202, "imp-4")]
    assert out["results"][1]["error"]["code"] == "invalid_input"
    assert out["results"][1]["error"]["field"] == "messages.0.content"
    assert out["results"][3]["error"] == {"code": "sync_not_supported", "field": "sync",
                                          "message": out["results"][3]["error"]["message"]}
    assert (out["accepted"], out["replayed"], out["refused"], out["failed"]) == (2, 1, 2, 0)
    assert sorted(t["request_id"] for t in tasks(service)) == ["imp-1", "imp-4"]


def test_a_batch_is_bounded_and_never_empty(service: Any) -> None:
    send = caller(service)
    too_many = {"adds": [add(f"r{i}", "hello there") for i in range(limits.MAX_ADDS_PER_BATCH + 1)]}

    status, out = send("POST", "/v1/stores/demo/memories:batch", too_many)
    assert (status, out["error"]["code"], out["error"]["field"]) == (413, "payload_too_large", "adds")
    status, out = send("POST", "/v1/stores/demo/memories:batch", {"adds": []})
    assert (status, out["error"]["code"]) == (400, "invalid_input")
    assert tasks(service) == []


def test_each_add_is_checked_against_the_callers_grant(service: Any) -> None:
    key = access.create_api_key(service.deps, "alice-app", {"travel": ["alice"]})
    send = caller(service, "api_key", key)
    bob = {**SCOPE, "tenant_id": "bob"}

    status, out = send("POST", "/v1/stores/demo/memories:batch",
                       {"adds": [add("a-1", "Alice likes jazz."), {**add("b-1", "Bob likes rock."), "scope": bob}]})

    assert status == 200
    assert [(r["outcome"], r["status"]) for r in out["results"]] == [("accepted", 202), ("refused", 403)]
    assert out["results"][1]["error"]["code"] == "outside_grant"
    assert len(tasks(service)) == 1 and tasks(service, "bob") == []


def test_the_batch_route_is_in_the_api_description() -> None:
    paths = json.loads(api_description())["paths"]
    assert "post" in paths["/v1/stores/{store}/memories:batch"]
