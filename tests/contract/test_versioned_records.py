"""The repository's conditional rewrites of shared records, on every Table backend (SQLite, DynamoDB under
moto): the scope registry and the store catalog are replaced only at the version they were read at, a
record written before versions (no attribute) is taken over once, and request ids are per tenant."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from memlane.domain.errors import ConditionFailed, NotFound
from memlane.domain.models import AccessPolicy, ScopeInfo, Store
from memlane.domain.scope import Scope
from memlane.ports import Table
from memlane.repository import STORES_PK, Repository, requests_pk, tenant_pk

from .table_backends import table  # noqa: F401  (the parametrised fixture)

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
SCOPE = Scope(app_id="a", tenant_id="t", agent_id="g", run_id="r")


def info(**changes) -> ScopeInfo:
    return ScopeInfo(scope=SCOPE, first_seen=NOW, last_activity=NOW, **changes)


def test_a_scope_entry_is_replaced_only_at_the_version_it_was_read_at(table: Table) -> None:
    repo = Repository(table)
    repo.transact([repo.scope_write("s", info(message_count=1), previous=None)])
    read = repo.get_scope("s", SCOPE)
    assert read.version == 1

    repo.transact([repo.scope_write("s", read.model_copy(update={"access_policy": AccessPolicy.NONE}),
                                    previous=read)])
    with pytest.raises(ConditionFailed):  # a writer that read version 1 too: too late
        repo.transact([repo.scope_write("s", read.model_copy(update={"message_count": 2}), previous=read)])

    now = repo.get_scope("s", SCOPE)
    assert (now.version, now.access_policy, now.message_count) == (2, AccessPolicy.NONE, 1)


def test_a_scope_entry_written_before_versions_is_taken_over_once(table: Table) -> None:
    repo = Repository(table)
    pk, sk = tenant_pk("s", "a", "t"), "SCOPE#g#r"
    legacy = info(message_count=3).model_dump(mode="json", exclude={"version"})
    table.put({"pk": pk, "sk": sk, **legacy})
    read = repo.get_scope("s", SCOPE)
    assert read.version == 0

    repo.transact([repo.scope_write("s", read.model_copy(update={"message_count": 4}), previous=read)])
    with pytest.raises(ConditionFailed):
        repo.transact([repo.scope_write("s", read.model_copy(update={"message_count": 5}), previous=read)])
    assert (repo.get_scope("s", SCOPE).version, repo.get_scope("s", SCOPE).message_count) == (1, 4)


def test_concurrent_rewrites_of_one_entry_have_one_winner_per_version(table: Table,
                                                                     request: pytest.FixtureRequest) -> None:
    repo = Repository(table)
    repo.transact([repo.scope_write("s", info(), previous=None)])
    read = repo.get_scope("s", SCOPE)
    wins: list[int] = []

    def write(n: int) -> None:
        try:
            repo.transact([repo.scope_write("s", read.model_copy(update={"message_count": n}), previous=read)])
            wins.append(n)
        except ConditionFailed:
            pass

    if request.node.callspec.params["table"] == "dynamodb-moto":
        # In-process moto does not make a conditional transaction atomic across threads (DynamoDB does):
        # there the same stale read is written eight times in a row.
        for n in range(1, 9):
            write(n)
    else:
        threads = [threading.Thread(target=write, args=(n,)) for n in range(1, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert len(wins) == 1 and repo.get_scope("s", SCOPE).message_count == wins[0]


def test_a_store_record_is_replaced_only_at_the_version_it_was_read_at(table: Table) -> None:
    repo = Repository(table)
    created = repo.create_store(Store(name="demo", embedding_model="m", embedding_dim=8, created_at=NOW))
    assert created.version == 1 == repo.get_store("demo").version

    moved = repo.update_store(created.model_copy(update={"embedding_model": "m2"}))
    assert moved.version == 2
    with pytest.raises(ConditionFailed):
        repo.update_store(created.model_copy(update={"embedding_model": "m3"}))
    assert repo.get_store("demo").embedding_model == "m2"

    legacy = {k: v for k, v in table.get(STORES_PK, "demo").items() if k != "version"}
    table.put(legacy)
    assert repo.update_store(repo.get_store("demo")).version == 1
    repo.delete_store("demo")
    with pytest.raises(NotFound):
        repo.update_store(moved)


def test_request_ids_are_per_tenant_and_located_by_their_pointers(table: Table) -> None:
    repo = Repository(table)
    other = SCOPE.model_copy(update={"tenant_id": "u"})
    repo.claim_request("s", "req-1", SCOPE)
    repo.claim_request("s", "req-1", other)  # no squatting: the other tenant's claim stands beside it
    repo.claim_request("s", "req-1", SCOPE)  # a retried claim is idempotent
    repo.claim_request("s", "req-10", SCOPE)  # an id that the first one prefixes is not confused with it
    table.put({"pk": requests_pk("s"), "sk": "req-2", "app_id": "a", "tenant_id": "old"})  # before per tenant

    assert sorted(repo.task_owners("s", "req-1")) == [("a", "t"), ("a", "u")]
    assert repo.task_owners("s", "req-10") == [("a", "t")]
    assert repo.task_owners("s", "req-2") == [("a", "old")]
    assert repo.task_owners("s", "req-3") == []


def test_a_running_task_keeps_the_answer_it_noted_first(table: Table) -> None:
    """The extractor's answer a job records for its retry (Task.answer) reads back as written on every backend — an
    entry emptied by a deletion, a time and a fraction included — and a second noter does not replace it."""
    from memlane.domain.models import Candidate, Task, TaskStatus

    repo = Repository(table)
    task = Task(request_id="req-1", store="s", scope=SCOPE, status=TaskStatus.RUNNING, created_at=NOW, updated_at=NOW)
    repo.save_task(task)
    answer = {"k1": Candidate(text="User lives in Oslo.", evidence=["m1"], event_time=NOW, importance=0.7),
              "k2": None}
    repo.note_task_writes(task, ["id-1"], answer=answer)
    repo.note_task_writes(task, ["id-2"], answer={"k3": Candidate(text="another answer")})
    found = repo.find_task("s", "a", "t", "req-1")
    assert found is not None and found.written_ids == ["id-1", "id-2"] and found.answer == answer
