"""Deletion: a run, and a whole tenant in every store — nothing of it readable or searchable after."""

import dataclasses
from datetime import timedelta

import pytest

from memlane.domain.models import TaskStatus
from memlane.repository import requests_pk, tenant_pk
from memlane.services import erase, ingest, messages, search, stores

ALICE_R1 = {"app_id": "app", "tenant_id": "alice", "agent_id": "bot", "run_id": "r1"}
ALICE_R2 = {**ALICE_R1, "run_id": "r2"}
BOB = {"app_id": "app", "tenant_id": "bob", "agent_id": "bot", "run_id": "r1"}


@pytest.fixture()
def loaded(service, deps):
    for name in ("one", "two"):
        stores.create(deps, name=name)
        ingest.add(deps, name, scope=ALICE_R1, request_id=f"{name}-a1",
                   messages=[{"role": "user", "content": "I keep bees on my rooftop in Brooklyn."}])
        ingest.add(deps, name, scope=ALICE_R2, request_id=f"{name}-a2",
                   messages=[{"role": "user", "content": "I am learning to play the cello."}])
        ingest.add(deps, name, scope=BOB, request_id=f"{name}-b1",
                   messages=[{"role": "user", "content": "I keep bees in the countryside too."}])
    service.drain()
    return deps


def hits(deps, store, tenant, query="bees cello"):
    return search.search(deps, store, query=query, scope={"app_id": "app", "tenant_id": tenant}, top_k=20)


def test_delete_run_removes_its_messages_and_memories_only(loaded):
    deps = loaded
    assert erase.delete_run(deps, "one", scope=ALICE_R1).items() >= {"messages": 1, "memories": 1}.items()
    assert messages.list_(deps, "one", scope=ALICE_R1, limit=10, cursor=None)[0] == []
    texts = [h.memory.text for h in hits(deps, "one", "alice")]
    assert texts and all("bees" not in t for t in texts) and any("cello" in t for t in texts)
    assert hits(deps, "one", "bob")  # another tenant untouched
    assert hits(deps, "two", "alice", "bees")  # another store untouched


def test_erase_tenant_leaves_zero_items_in_table_and_index(service, loaded):
    deps = loaded
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    assert erasure.status == TaskStatus.PENDING
    service.drain()
    done = deps.repo.get_erasure(erasure.erasure_id)
    assert done.status == TaskStatus.SUCCEEDED and done.stores == ["one", "two"] and done.principal == "ops"
    for store in ("one", "two"):
        assert deps.table.query(tenant_pk(store, "app", "alice"), limit=1000).items == []
        assert hits(deps, store, "alice") == []
        assert deps.table.get(requests_pk(store), f"{store}-a1") is None
        assert len(hits(deps, store, "bob")) == 1
    # idempotent: a second run finds nothing more and still succeeds
    again = erase.run_erasure(deps, erasure.erasure_id)
    assert again.status == TaskStatus.SUCCEEDED
    rerun = deps.repo.get_erasure(erasure.erasure_id).model_copy(update={"status": TaskStatus.RUNNING})
    deps.repo.put_erasure(rerun)
    assert erase.run_erasure(deps, erasure.erasure_id).deleted_items == done.deleted_items


def test_an_erasure_asked_again_before_it_starts_is_the_same_erasure(service, loaded):
    """A trial (session 30): a retried erasure request made a second erasure of the tenant. One that has not started
    erases all the tenant has when it runs, so the request again is it; once it runs (a store it passed may be written
    again) or has ended, a request is a new erasure."""
    deps = loaded
    first = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    assert erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops") == first
    other = erase.request_erasure(deps, app_id="app", tenant_id="bob", principal="ops")
    assert other.erasure_id != first.erasure_id
    service.drain()
    assert [e.status for e in deps.repo.erasures()] == [TaskStatus.SUCCEEDED] * 2
    after = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    assert after.erasure_id != first.erasure_id and after.status == TaskStatus.PENDING
    deps.repo.put_erasure(after.model_copy(update={"status": TaskStatus.RUNNING}))
    assert erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops").erasure_id not in (
        first.erasure_id, after.erasure_id)


def test_an_erasure_of_a_tenant_with_nothing_rewrites_no_file(service, loaded, monkeypatch):
    """A regression trial (session 31): each erasure rewrote the data files (VACUUM, seconds at 10⁵ memories, holding
    every write), an empty tenant's too — any key could stall the others by erasing itself again and again."""
    deps = loaded
    rewrites: list[bool] = []
    for compactor in deps.compactors:
        monkeypatch.setattr(compactor, "compact", lambda *, rewrite=False, real=compactor.compact: (
            rewrites.append(rewrite), real(rewrite=rewrite))[1])
    erase.request_erasure(deps, app_id="app", tenant_id="nobody", principal="ops")
    service.drain()
    assert rewrites == [False] * len(deps.compactors) and rewrites
    erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    service.drain()
    assert rewrites[len(deps.compactors):] == [True] * len(deps.compactors)


@pytest.mark.parametrize("point", ["erase.after_store", "erase.mid_store"])
def test_an_erasure_resumed_after_a_crash_reports_what_it_deleted_before_it(loaded, point):
    """The counts were kept in memory and saved once at the end: a job that died after the first store and ran again
    found that store empty, and its SUCCEEDED report left the store out. Then they were kept after each store: a
    deletion trial killed one after a store's 10,000 messages were deleted and before its counts were kept, and the
    resumed erasure reported `deleted_documents: 0` and no messages."""
    from dataclasses import replace

    from memlane.faults import Faults

    class Crash(Exception):
        pass

    def crash(point: str) -> None:
        raise Crash(point)

    deps = loaded
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    with pytest.raises(Crash):
        erase.run_erasure(replace(deps, faults=Faults(f"{point}@1", crash=crash)), erasure.erasure_id)
    done = erase.run_erasure(deps, erasure.erasure_id)
    assert done.status == TaskStatus.SUCCEEDED and done.stores == ["one", "two"]
    for store in ("one", "two"):  # two messages, two memories, two tasks in each
        assert {k: done.deleted[store][k] for k in ("messages", "memories", "tasks", "index_documents")} == \
            {"messages": 2, "memories": 2, "tasks": 2, "index_documents": 4}, done.deleted


@pytest.mark.parametrize("dies", ["before-the-catalog", "before-the-index"])
def test_a_store_delete_that_dies_after_its_commit_is_finished_by_its_job(service, loaded, monkeypatch, dies):
    """kill -9 inside DELETE /stores/{name}: the purge job was committed with the record that holds the name,
    so it takes the store out of the catalog and the index and purges it; the name is free after."""
    deps = loaded
    from memlane.repository import Repository

    target = Repository if dies == "before-the-catalog" else deps.index
    name = "delete_store" if dies == "before-the-catalog" else "drop_store"

    def killed(*args, **kwargs):
        raise SystemExit("killed")

    monkeypatch.setattr(target, name, killed)
    with pytest.raises(SystemExit):
        stores.delete(deps, "one")
    monkeypatch.undo()
    service.drain()  # the process comes back: its worker runs the queue
    for tenant in ("alice", "bob"):
        assert deps.table.query(tenant_pk("one", "app", tenant), limit=10).items == []
    stores.create(deps, name="one")
    assert hits(deps, "one", "alice") == []
    assert len(hits(deps, "two", "alice")) == 2


def test_a_lost_purge_job_is_sent_again_by_the_sweeper(service, loaded, monkeypatch):
    """On SQS the job is sent after the record commits: a crash in between loses it. The sweeper sends the
    purge of a record that waited past the deadline again; a redelivered purge after it is done does nothing."""
    from memlane.domain.errors import Conflict
    from memlane.services import sweep

    deps = loaded
    monkeypatch.setattr(deps.queue, "commit", lambda table, writes, job, **kw: table.transact(writes))
    stores.delete(deps, "one")
    monkeypatch.undo()
    service.drain()
    with pytest.raises(Conflict):
        stores.create(deps, name="one")  # no job ran: the name is still held
    assert sweep.sweep(deps).requeued == 0  # within the deadline: the job may still be on its way
    later = dataclasses.replace(deps, clock=_Later(deps.clock, deps.settings.task_deadline_seconds + 1))
    assert sweep.sweep(later).requeued == 1
    assert sweep.sweep(later).requeued == 0  # sent: its record waits another deadline
    service.drain()
    assert deps.table.query(tenant_pk("one", "app", "alice"), limit=10).items == []
    made = stores.create(deps, name="one")
    ingest.add(deps, "one", scope=ALICE_R1, request_id="new", messages=[{"role": "user", "content": "I keep bees."}])
    deps.queue.enqueue(stores.purge_job("one"))  # a late copy of the old purge job
    service.drain()
    assert stores.get(deps, "one") == made and messages.list_(deps, "one", scope=ALICE_R1, limit=10, cursor=None)[0]


def test_a_lost_erasure_job_is_sent_again_by_the_sweeper(service, loaded, monkeypatch):
    """An AWS-path trial: the erasure's record committed, its job's send failed (503 to the client), and the erasure
    stayed PENDING for ever with the tenant's data all there — the sweeper re-sent tasks and purges only."""
    from memlane.services import sweep

    deps = loaded
    monkeypatch.setattr(deps.queue, "commit", lambda table, writes, job, **kw: table.transact(writes))
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    monkeypatch.undo()
    service.drain()
    assert sweep.sweep(deps).requeued == 0  # within the deadline: the job may still be on its way
    later = dataclasses.replace(deps, clock=_Later(deps.clock, deps.settings.task_deadline_seconds + 1))
    assert sweep.sweep(later).requeued == 1
    assert sweep.sweep(later).requeued == 0  # sent: it waits another deadline

    service.drain()

    assert deps.repo.get_erasure(erasure.erasure_id).status == TaskStatus.SUCCEEDED
    assert deps.table.query(tenant_pk("one", "app", "alice"), limit=10).items == []
    assert deps.table.query(tenant_pk("one", "app", "bob"), limit=10).items  # another tenant's stay
    assert sweep.sweep(dataclasses.replace(deps, clock=_Later(deps.clock, 3 * deps.settings.task_deadline_seconds))
                       ).requeued == 0  # done: never sent again


def test_deleting_a_store_purges_its_items_and_frees_the_name_after(service, loaded):
    from memlane.domain.errors import Conflict, NotFound
    from memlane.repository import activity_pk

    deps = loaded
    stores.delete(deps, "one")
    with pytest.raises(NotFound):
        search.search(deps, "one", query="bees", scope={"app_id": "app", "tenant_id": "alice"})
    with pytest.raises(Conflict) as e:
        stores.create(deps, name="one")  # not before the purge is done
    assert e.value.code == "store_deleting"
    service.drain()
    for tenant in ("alice", "bob"):
        assert deps.table.query(tenant_pk("one", "app", tenant), limit=10).items == []
    assert deps.table.query(requests_pk("one"), limit=10).items == []
    assert deps.table.query(activity_pk("one"), limit=10).items == []
    assert len(hits(deps, "two", "alice")) == 2  # the other store is untouched
    stores.create(deps, name="one")
    assert hits(deps, "one", "alice") == []


class _Later:
    """The clock, `seconds` ahead."""

    def __init__(self, clock, seconds):
        self.clock, self.seconds = clock, seconds

    def now(self):
        return self.clock.now() + timedelta(seconds=self.seconds)
