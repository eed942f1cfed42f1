"""Read-modify-writes of the scope registry under real concurrent threads: an add and a policy change
can never overwrite each other, and an add never silently ignores the access policy it names.

A table wrapper holds one thread right after it read the scope entry until the other thread's write
is done: the interleaving that lost updates, forced instead of hoped for."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from memlane.domain.errors import Conflict
from memlane.domain.models import AccessPolicy
from memlane.domain.scope import exact_scope
from memlane.services import ingest, scopes, stores, tasks

SCOPE = {"app_id": "app", "tenant_id": "ann", "agent_id": "bot", "run_id": "r1"}


class HoldAfterScopeRead:
    """The Table port, passing through; the first scope-entry read made by the thread named `who`
    signals `read` and waits for `release` before returning what it read."""

    def __init__(self, table: Any, who: str):
        self.table, self.who = table, who
        self.read, self.release = threading.Event(), threading.Event()

    def get(self, pk: str, sk: str) -> Any:
        item = self.table.get(pk, sk)
        if sk.startswith("SCOPE#") and threading.current_thread().name == self.who and not self.read.is_set():
            self.read.set()
            assert self.release.wait(30), "the other thread never finished"
        return item

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def in_thread(name: str, target: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = target()
        except Exception as error:  # noqa: BLE001 — handed to the test thread
            out["error"] = error

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread, out


def test_a_policy_change_to_none_is_never_reverted_by_an_add_that_read_the_entry_before_it(service, deps, store):
    ingest.add(deps, store, scope=SCOPE, text="I live in Oslo.")  # the run exists, recall_and_store
    held = HoldAfterScopeRead(deps.table, "adder")
    adder, out = in_thread("adder", lambda: ingest.add(replace(deps, table=held), store, scope=SCOPE,
                                                       text="My bank PIN is in my wallet."))
    assert held.read.wait(30)
    changed = scopes.set_access_policy(deps, store, scope=SCOPE, policy=AccessPolicy.NONE)  # acknowledged...
    held.release.set()
    adder.join(30)
    service.drain()

    assert "error" not in out, out
    assert changed.access_policy == AccessPolicy.NONE
    info = deps.repo.get_scope(store, exact_scope(SCOPE))
    assert info.access_policy == AccessPolicy.NONE  # ...and still in force
    assert info.message_count == 2  # and the add's message is counted
    task = tasks.get(deps, store, out["result"].request_id)
    assert not task.extract and task.outcomes == []  # the add ran under the new policy: nothing extracted


def test_an_add_is_never_lost_by_a_policy_change_that_read_the_entry_before_it(service, deps, store):
    ingest.add(deps, store, scope=SCOPE, text="I live in Oslo.")
    held = HoldAfterScopeRead(deps.table, "changer")
    changer, out = in_thread("changer", lambda: scopes.set_access_policy(
        replace(deps, table=held), store, scope=SCOPE, policy=AccessPolicy.RECALL_ONLY))
    assert held.read.wait(30)
    ingest.add(deps, store, scope=SCOPE, text="I moved to Bergen.")
    held.release.set()
    changer.join(30)

    assert "error" not in out, out
    info = deps.repo.get_scope(store, exact_scope(SCOPE))
    assert (info.access_policy, info.message_count) == (AccessPolicy.RECALL_ONLY, 2)
    assert out["result"].message_count == 2  # the answer shows what was written


def test_many_concurrent_adds_and_policy_changes_lose_nothing(service, deps, store):
    ingest.add(deps, store, scope=SCOPE, text="first")
    policies = [AccessPolicy.RECALL_ONLY, AccessPolicy.STORE_ONLY, AccessPolicy.NONE, AccessPolicy.RECALL_AND_STORE]
    errors: list[Exception] = []

    def adds(n: int) -> None:
        for i in range(10):
            try:
                ingest.add(deps, store, scope=SCOPE, text=f"adder {n} message {i}")
            except Exception as error:  # noqa: BLE001
                errors.append(error)

    def changes() -> None:
        for policy in policies * 3:
            scopes.set_access_policy(deps, store, scope=SCOPE, policy=policy)

    threads = [threading.Thread(target=adds, args=(n,)) for n in range(4)] + [threading.Thread(target=changes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert errors == []
    info = deps.repo.get_scope(store, exact_scope(SCOPE))
    assert info.message_count == 41  # every add counted
    assert info.access_policy == AccessPolicy.RECALL_AND_STORE  # the last change stands


def test_an_add_naming_another_policy_than_its_runs_is_refused(deps, store):
    ingest.add(deps, store, scope=SCOPE, text="I run marathons.", access_policy=AccessPolicy.RECALL_ONLY)
    before = deps.repo.get_scope(store, exact_scope(SCOPE))

    with pytest.raises(Conflict) as e:
        ingest.add(deps, store, scope=SCOPE, text="I swim.", access_policy=AccessPolicy.RECALL_AND_STORE)

    assert (e.value.code, e.value.field) == ("access_policy_mismatch", "access_policy")
    assert deps.repo.get_scope(store, exact_scope(SCOPE)) == before
    # the same policy, or none named, is the run's own: accepted
    ingest.add(deps, store, scope=SCOPE, text="I cycle.", access_policy=AccessPolicy.RECALL_ONLY)
    ingest.add(deps, store, scope=SCOPE, text="I row.")
    assert deps.repo.get_scope(store, exact_scope(SCOPE)).message_count == 3
