"""An add refused, or dead, before its task exists leaves nothing naming its tenant (a regression trial of
session 19). An add claims its request id (a pointer in the store's global partition) and registers an
open-task entry before it commits its task. Refused inside its commit loop (a concurrent add made the run
with another access policy), it answered 409 and left both: the pointer for good, surviving the tenant's
erasure and answering a lookup by id alone with 400 `tenant_required`. It now takes both back at once
(`release_request`); an add that dies there leaves them to the sweeper, which takes back both past the
deadline."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta
from typing import Any

import pytest

from memlane.domain.errors import Conflict
from memlane.domain.models import AccessPolicy
from memlane.domain.scope import write_scope
from memlane.faults import Faults
from memlane.repository import requests_pk
from memlane.services import erase, ingest, stores, sweep, tasks

from .test_access_policy_races import HoldAfterScopeRead

RUN = {"app_id": "app", "tenant_id": "alice", "agent_id": "bot", "run_id": "r-new"}


def refused_add(deps) -> None:
    """alice's add asks recall_only of a run that does not exist yet: its check passes; another add then makes
    the run (recall_and_store), so its commit fails and its retry is refused."""
    held = HoldAfterScopeRead(deps.table, "adder")
    out: dict[str, Any] = {}

    def add() -> None:
        try:
            ingest.add(dataclasses.replace(deps, table=held), "demo", scope=RUN, request_id="req-1",
                       text="My locker code is 4411.", access_policy=AccessPolicy.RECALL_ONLY)
        except Exception as error:  # noqa: BLE001
            out["error"] = error

    adder = threading.Thread(target=add, name="adder")
    adder.start()
    assert held.read.wait(30)
    ingest.add(deps, "demo", scope=RUN, text="Hello.")
    held.release.set()
    adder.join(30)
    assert isinstance(out.get("error"), Conflict) and out["error"].code == "access_policy_mismatch", out


def named(deps, tenant: str = "alice") -> dict[str, list[str]]:
    """The request-id pointers and open-task entries of the store that name `tenant`."""
    return {"pointers": [i["request_id"] for i in deps.table.query(requests_pk("demo"), limit=1000).items
                         if i.get("tenant_id") == tenant],
            "open": [e.request_id for e in deps.repo.open_tasks("demo") if e.tenant_id == tenant]}


@pytest.fixture()
def demo(service, deps):
    stores.create(deps, name="demo")
    return deps


def test_a_refused_add_leaves_no_pointer_and_no_open_task_entry(demo) -> None:
    refused_add(demo)
    assert "req-1" not in named(demo)["pointers"] and "req-1" not in named(demo)["open"]


def test_the_tenants_erasure_leaves_nothing_naming_it_after_a_refused_add(service, demo) -> None:
    refused_add(demo)
    erasure = erase.request_erasure(demo, app_id="app", tenant_id="alice", principal="ops")
    service.drain()
    assert demo.repo.get_erasure(erasure.erasure_id).status == "SUCCEEDED"
    assert named(demo) == {"pointers": [], "open": []}


def test_an_id_alone_finds_the_one_task_after_another_tenants_add_of_it_was_refused(demo) -> None:
    ingest.add(demo, "demo", scope={**RUN, "tenant_id": "bob"}, request_id="req-1", text="I like tea.")
    refused_add(demo)
    assert tasks.get(demo, "demo", "req-1").scope.tenant_id == "bob"


def test_an_add_that_dies_before_its_task_is_taken_back_by_the_sweeper(demo, monkeypatch) -> None:
    def die(point: str) -> None:
        raise RuntimeError(f"died at {point}")

    with pytest.raises(RuntimeError):
        ingest.add(dataclasses.replace(demo, faults=Faults("add.after_request_claim", crash=die)), "demo",
                   scope=RUN, request_id="req-2", text="My locker code is 4411.")
    assert named(demo) == {"pointers": ["req-2"], "open": ["req-2"]}
    assert sweep.sweep(demo).closed == 0  # within the deadline: the add may still be running
    later = demo.clock.now() + timedelta(seconds=demo.settings.task_deadline_seconds + 1)
    monkeypatch.setattr(demo.clock, "now", lambda: later)
    assert sweep.sweep(demo).closed == 1
    assert named(demo) == {"pointers": [], "open": []}
    # The same id again is a new add, accepted and claimed anew.
    assert ingest.add(demo, "demo", scope=RUN, request_id="req-2", text="My locker code is 4411.").request_id == "req-2"
    assert named(demo)["pointers"] == ["req-2"]


def test_the_sweeper_leaves_the_entry_an_add_of_the_same_id_registered_again(demo, monkeypatch) -> None:
    """Past the deadline a dead add's entry goes with its pointer — unless the id was added again meanwhile
    (its entry registered anew): that add's pointer stays."""
    entry_time = demo.clock.now()
    demo.repo.open_task("demo", "req-3", write_scope(RUN), entry_time)
    demo.repo.claim_request("demo", "req-3", write_scope(RUN))
    [stale] = [e for e in demo.repo.open_tasks("demo") if e.request_id == "req-3"]
    demo.repo.open_task("demo", "req-3", write_scope(RUN), entry_time + timedelta(seconds=5))  # again
    assert demo.repo.release_request("demo", "req-3", "app", "alice", stale.since) is False
    assert named(demo) == {"pointers": ["req-3"], "open": ["req-3"]}


def test_a_refused_add_leaves_the_entry_and_pointer_of_an_add_of_the_same_id_under_way(demo) -> None:
    """B (same tenant and id) registered and claimed first, then A registered over B's entry and was refused:
    releasing on its own `since`, A took B's entry and pointer, and B's accepted task was found by its id alone
    nowhere (404) and off the sweeper's list. A refused add now releases only an entry it made."""
    held = HoldAfterScopeRead(demo.table, "A")
    out: dict[str, Any] = {}
    b_paused, b_go = threading.Event(), threading.Event()

    def pause(point: str) -> None:
        b_paused.set()
        assert b_go.wait(30)

    def add(name: str, deps, **kwargs: Any) -> None:
        try:
            out[name] = ingest.add(deps, "demo", scope=RUN, request_id="req-1", text="My locker code is 4411.", **kwargs)
        except Exception as error:  # noqa: BLE001
            out[name] = error

    a = threading.Thread(target=add, args=("a", dataclasses.replace(demo, table=held)),
                         kwargs={"access_policy": AccessPolicy.RECALL_ONLY}, name="A")
    a.start()
    assert held.read.wait(30)  # A checked the run (none yet): recall_only passes
    ingest.add(demo, "demo", scope=RUN, text="Hello.")  # another add makes the run, recall_and_store
    b = threading.Thread(target=add, args=("b", dataclasses.replace(
        demo, faults=Faults("add.after_request_claim", crash=pause))), name="B")
    b.start()
    assert b_paused.wait(30)  # B registered its entry and claimed req-1
    held.release.set()
    a.join(30)  # A registers over B's entry, claims, is refused
    assert isinstance(out["a"], Conflict) and out["a"].code == "access_policy_mismatch", out
    b_go.set()
    b.join(30)
    assert out["b"].request_id == "req-1"  # B accepted
    assert "req-1" in named(demo)["pointers"] and "req-1" in named(demo)["open"]
    assert tasks.get(demo, "demo", "req-1").scope.tenant_id == "alice"
