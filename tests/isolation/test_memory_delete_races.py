"""A memory deleted while an extraction compares a new statement with it. The delete redacts every record
quoting the memory (tasks' outcomes, dream actions); a job that compared with it and writes such a record
after that redaction must not bring its words back — in its task's outcome, or in the write-time action it
could not apply (readable at GET /dream-actions/{id}, an id any client can derive)."""

import json

import pytest

from memlane.api.app import build_app
from memlane.domain.ids import derived_id
from memlane.policies import consolidation
from memlane.repository import tenant_pk
from memlane.server import _LambdaContext, http_event
from memlane.services import consolidate, explicit, ingest, memories, stores

RUN = {"app_id": "app", "tenant_id": "alice", "agent_id": "bot", "run_id": "r1"}
TENANT = {"app_id": "app", "tenant_id": "alice"}
OLD = "Qwxoldtown"


def tenant_records(deps) -> str:
    return json.dumps(deps.table.query(tenant_pk("s", "app", "alice"), limit=1000).items, default=str)


@pytest.fixture()
def old_memory(deps):
    stores.create(deps, name="s")
    explicit.write(deps, "s", scope=RUN, memories=[{"text": f"Ann lives in {OLD}.", "memory_id": "home"}])
    return "home"


def deleted_during(monkeypatch, deps, owner, name: str, memory_id: str) -> list[bool]:
    real, fired = getattr(owner, name), []

    def then_deleted(*args, **kwargs):
        out = real(*args, **kwargs)
        if not fired:
            fired.append(True)
            memories.delete(deps, "s", **TENANT, memory_id=memory_id)
        return out

    monkeypatch.setattr(owner, name, then_deleted)
    return fired


def add_the_change(service, deps) -> None:
    ingest.add(deps, "s", scope={**RUN, "run_id": "r2"}, request_id="add-2",
               messages=[{"role": "user", "name": "Ann", "content": "I live in Denver now."}])
    service.drain()


def test_without_a_race_the_delete_redacts_the_outcome_that_quotes_it(service, deps, old_memory):
    add_the_change(service, deps)
    assert OLD in json.dumps(deps.repo.get_task("s", "app", "alice", "add-2").model_dump(mode="json"))
    memories.delete(deps, "s", **TENANT, memory_id=old_memory)
    assert OLD not in tenant_records(deps)


def test_a_memory_deleted_after_the_job_compared_with_it_is_not_quoted_by_its_task(service, deps, monkeypatch,
                                                                                   old_memory):
    fired = deleted_during(monkeypatch, deps, consolidate, "run", old_memory)
    add_the_change(service, deps)
    assert fired
    assert OLD not in tenant_records(deps)


def test_a_write_time_action_that_could_not_apply_does_not_keep_the_deleted_memory(service, deps, monkeypatch,
                                                                                   old_memory):
    fired = deleted_during(monkeypatch, deps, consolidation, "decide", old_memory)
    add_the_change(service, deps)
    assert fired
    assert OLD not in tenant_records(deps)
    action_id = derived_id("s", "app", "alice", "add-2", "0", "consolidate")
    answer = build_app(deps).resolve(http_event("GET", f"/v1/stores/s/dream-actions/{action_id}",
                                                {"content-type": "application/json"}, b"", "127.0.0.1"),
                                     _LambdaContext())
    assert OLD not in answer["body"]
