"""The dream function: the EventBridge schedule sample, under moto (DynamoDB + SQS), picks only due scopes,
stays within its bound and fans out one `dream` job per scope to the queue, which the extract function
runs. Its API Gateway events are the dream routes. Embeddings are the hashing embedder, no LLM."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.handlers.conftest import Aws
from tests.handlers.events import load_event

BOUND = 2


@pytest.fixture()
def deps(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The services over the test's moto account, as the functions build them (set before any is loaded)."""
    # Write-time consolidation off: the dream gets the contradictions to settle (with it on, the
    # writes settle them: tests/services/test_knowledge_updates.py).
    for name, value in {"MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "none", "MEMLANE_RERANKER": "none",
                        "MEMLANE_DREAM_MAX_SCOPES": str(BOUND), "MEMLANE_CONSOLIDATE_ON_WRITE": "false"}.items():
        monkeypatch.setenv(name, value)
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import stores

    deps = bootstrap.build(Settings.from_env())
    stores.create(deps, name="demo")
    return deps


def add(deps: Any, tenant: str, text: str, run: str = "r-1") -> None:
    from memlane.services import ingest

    ingest.add(deps, "demo", scope={"app_id": "support", "tenant_id": tenant, "agent_id": "helpdesk", "run_id": run},
               messages=[{"role": "user", "name": "Ann", "content": text}], sync=True)


def take(aws: Aws) -> list[dict[str, Any]]:
    """Receive what is queued and delete it, as Lambda's poller does after a successful batch."""
    messages = aws.queued()
    for m in messages:
        aws.sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=m["ReceiptHandle"])
    return messages


def test_scheduled_run_dreams_only_due_scopes_within_its_bound(aws: Aws, deps: Any) -> None:
    from memlane.services import dream

    for tenant in ("u-1", "u-2", "u-3", "u-4"):
        add(deps, tenant, "I live in Boston.")
        add(deps, tenant, "I moved from Boston to Denver.", run="r-2")
    dream.start(deps, "demo", scope={"app_id": "support", "tenant_id": "u-1"}, sync=True)  # u-1: not due
    handler = aws.load("dream")

    first = handler(load_event("dream", "scheduled"))
    assert first["scheduled"] == BOUND
    assert [t["tenant_id"] for t in first["tasks"]] == ["u-2", "u-3"]  # the oldest due, one per agent
    queued = take(aws)
    assert sorted(json.loads(m["Body"])["request_id"] for m in queued) == sorted(t["task_id"] for t in first["tasks"])
    assert {json.loads(m["Body"])["kind"] for m in queued} == {"dream"}

    # the extract function's worker runs the dream jobs
    result = aws.load("extract")(aws.sqs_event(queued))
    assert result == {"batchItemFailures": []}
    for t in first["tasks"]:
        done = dream.get_task(deps, "demo", t["task_id"])
        assert done.status == "SUCCEEDED" and done.trigger == "schedule" and done.stats["proposed"] >= 1
        [update] = [a for a in dream.list_actions(deps, "demo", t["task_id"])[0] if a.kind == "UPDATE"]
        assert update.status == "pending"  # the store's mode is proposal

    second = handler(load_event("dream", "scheduled"))
    assert [t["tenant_id"] for t in second["tasks"]] == ["u-4"]
    take(aws)
    assert handler(load_event("dream", "scheduled")) == {"scheduled": 0, "tasks": []}
    assert aws.queued() == []


def test_dream_routes_through_the_function(aws: Aws, deps: Any, granted: None) -> None:
    add(deps, "u-42", "I live in Boston.")
    add(deps, "u-42", "I moved from Boston to Denver.", run="r-2")
    handler = aws.load("dream")

    response = handler(load_event("dream", "start"))
    assert response["statusCode"] == 200, response
    task = json.loads(response["body"])
    assert task["status"] == "SUCCEEDED" and task["scope"]["agent_id"] == "helpdesk"
    assert {a["kind"] for a in task["actions"]} >= {"UPDATE", "EMIT_PROFILE"}
    profiles = aws.load("ingest")  # the profile routes (stated and distilled) are the Ingest function's
    assert json.loads(profiles(load_event("ingest", "profile"))["body"])["error"]["code"] == "profile_not_found"

    from memlane.services import dream

    tenant_profile = next(a for a in task["actions"] if a["kind"] == "EMIT_PROFILE" and not a["profile"]["agent_id"])
    dream.apply_action(deps, "demo", tenant_profile["action_id"])
    profile = profiles(load_event("ingest", "profile"))
    assert profile["statusCode"] == 200
    assert json.loads(profile["body"])["attributes"][0]["value"] == "Denver"


def test_undo_is_exact_on_dynamodb(aws: Aws, deps: Any) -> None:
    from memlane.services import dream, search

    add(deps, "u-7", "I live in Boston.")
    add(deps, "u-7", "I moved from Boston to Denver.", run="r-2")
    add(deps, "u-7", "Denver is where I live now.", run="r-3")
    scope = {"app_id": "support", "tenant_id": "u-7"}
    before = aws.items("demo#support#u-7", "MEM#")

    def found() -> list[tuple[str, str, float]]:
        return [(h.memory.memory_id, h.memory.status, h.score)
                for h in search.search(deps, "demo", query="where does Ann live", scope=scope, include_superseded=True)]

    hits = found()
    task = dream.start(deps, "demo", scope=scope, sync=True, mode="safe_auto", threshold=0.0)
    applied = dream.list_actions(deps, "demo", task.task_id)[0]
    assert applied and all(a.status == "applied" for a in applied)
    assert aws.items("demo#support#u-7", "MEM#") != before
    for a in reversed(applied):
        dream.undo_action(deps, "demo", a.action_id)
    assert aws.items("demo#support#u-7", "MEM#") == before
    assert aws.items("demo#support#u-7", "PROFILE#") == []
    assert found() == hits
