"""An add racing its store's deletion. The add checks the store at its start; the store is deleted — its purge
run to the end, the name freed, perhaps a store made again under it — before the add has written everything.
The purge finds a store's tenants in the activity registry, which such an add entered too late: nothing of the
add may stay behind, neither in the deleted store's partition nor in a store made again under the name. Both
table backends: the services code is shared."""

import pytest

from memlane.domain.errors import NotFound
from memlane.domain.models import RecordType
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery
from memlane.repository import tenant_pk
from memlane.services import ingest, message_index, stores
from tests.isolation.test_scope_properties import service_on

RUN = {"app_id": "app", "tenant_id": "carol", "agent_id": "bot", "run_id": "r1"}
SAID = "My locker code is Xq4242 and I keep bees on the roof."


def found(deps):
    """The tenant's index documents of the text (memories and messages)."""
    hits = deps.index.search("s", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="carol"), text=SAID,
                                             vector=deps.embedder.embed([SAID])[0],
                                             record_types=(RecordType.MEMORY, RecordType.MESSAGE)))
    return {h.memory_id for h in [*hits.vector, *hits.keyword]}


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb-moto"])
@pytest.mark.parametrize("made_again", [False, True], ids=["deleted", "deleted-and-made-again"])
@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_an_add_whose_store_is_deleted_meanwhile_leaves_nothing(backend, made_again, sync, tmp_path, monkeypatch):
    with service_on(backend, tmp_path) as svc:
        deps = svc.deps
        stores.create(deps, name="s")
        real, fired = message_index.index_after_add, []

        def store_deleted_meanwhile(d, store, msgs):
            if not fired:
                fired.append(True)
                stores.delete(deps, "s")
                svc.drain()  # the purge (and the add's job, already queued) run to the end
                assert deps.repo.purge_state("s") is None  # the name is free
                if made_again:
                    stores.create(deps, name="s")
            return real(d, store, msgs)

        monkeypatch.setattr(message_index, "index_after_add", store_deleted_meanwhile)
        with pytest.raises(NotFound) as refused:
            ingest.add(deps, "s", scope=RUN, request_id="add-1", sync=sync,
                       messages=[{"role": "user", "content": SAID}])
        assert refused.value.code == "store_not_found"
        monkeypatch.setattr(message_index, "index_after_add", real)
        svc.drain()
        assert deps.table.query(tenant_pk("s", "app", "carol"), limit=100).items == []
        if made_again:
            assert deps.repo.list_messages("s", Scope(**RUN), limit=10, cursor=None)[0] == []
            assert found(deps) == set()
            # The name is the new store's: the same add, sent again, is a new add there.
            again = ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
            assert again.request_id == "add-1" and found(deps)


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb-moto"])
def test_a_store_deleted_after_the_adds_check_is_purged_of_it(backend, tmp_path, monkeypatch):
    """The other side of the check: a delete that comes once the add has written everything (and entered
    the registry) purges the add with the store."""
    with service_on(backend, tmp_path) as svc:
        deps = svc.deps
        stores.create(deps, name="s")
        ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
        stores.delete(deps, "s")
        svc.drain()
        assert deps.table.query(tenant_pk("s", "app", "carol"), limit=100).items == []
        stores.create(deps, name="s")
        assert found(deps) == set()


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb-moto"])
@pytest.mark.parametrize("made_again", [False, True], ids=["deleted", "deleted-and-made-again"])
def test_an_extraction_whose_store_is_purged_while_it_runs_leaves_nothing(backend, made_again, tmp_path,
                                                                         monkeypatch):
    """A trial of the AWS path (6 of 6 runs): the store deleted and purged to the end while its extraction job ran;
    the job then wrote its memories, found its run gone and set out to withdraw them — but re-homing them read the
    store, found none and raised NotFound, which the job runner took for its task gone: it dropped the job, and the
    memories stayed in the partition, listed by a store made again under the name."""
    from memlane.services import erase

    with service_on(backend, tmp_path) as svc:
        deps = svc.deps
        stores.create(deps, name="s")
        ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
        real, fired = deps.extractor.extract, []

        def purged_meanwhile(*args, **kwargs):
            if not fired:
                fired.append(True)
                stores.delete(deps, "s")
                erase.purge_store(deps, "s")  # its job, run to the end before this one writes
                assert deps.repo.purge_state("s") is None
                if made_again:
                    stores.create(deps, name="s")
            return real(*args, **kwargs)

        monkeypatch.setattr(deps.extractor, "extract", purged_meanwhile)
        svc.drain()
        assert fired
        assert deps.table.query(tenant_pk("s", "app", "carol"), limit=100).items == []
        if made_again:
            assert found(deps) == set()


# -- trial A (session 38): a write that lands between the purge's listing and its deletes --------------------------


def test_an_extraction_that_writes_after_the_purge_listed_its_tenant_leaves_nothing(tmp_path, monkeypatch):
    """The job wrote its memory after the purge listed the tenant's items and checked its run (still there: the purge
    had not deleted yet) — SUCCEEDED; the purge then deleted what it had listed, and the memory showed in the store
    made again under the name (32 of 32 rounds of a trial). The job checks its store too now."""
    import threading

    from memlane.repository import Repository
    from memlane.services import erase

    with service_on("sqlite", tmp_path) as svc:
        deps = svc.deps
        stores.create(deps, name="s")
        ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
        started, listed, job_done = threading.Event(), threading.Event(), threading.Event()
        table = type(deps.table)
        real_transact, real_delete = table.transact, Repository.delete_items

        def transact(self, writes):  # the job's memory write waits for the purge's listing
            if threading.current_thread().name == "job" and not started.is_set() and any(
                    getattr(w, "item", {}).get("sk", "").startswith("MEM#") for w in writes):
                started.set()
                assert listed.wait(60)
            return real_transact(self, writes)

        def delete_items(self, keys):
            if threading.current_thread().name == "purge" and not listed.is_set():
                listed.set()  # the tenant's items listed, about to be deleted
                assert job_done.wait(60)
            return real_delete(self, keys)

        monkeypatch.setattr(table, "transact", transact)
        monkeypatch.setattr(Repository, "delete_items", delete_items)
        job = threading.Thread(target=svc.drain, name="job")
        job.start()
        assert started.wait(60)
        stores.delete(deps, "s")
        svc.queue.db.conn.execute("DELETE FROM jobs WHERE kind = 'purge_store'")  # run here, in its own thread
        purge = threading.Thread(target=erase.purge_store, args=(deps, "s"), name="purge")
        purge.start()
        job.join(120)
        job_done.set()
        purge.join(120)
        monkeypatch.undo()
        svc.drain()
        stores.create(deps, name="s")
        assert deps.table.query(tenant_pk("s", "app", "carol"), limit=100).items == []
        assert found(deps) == set()


def _deleted_and_purged_at(deps, monkeypatch, point):
    """The store deleted and purged to the end (the name free, made again) once the write reaches `point`."""
    from memlane.services import erase

    class Meanwhile:
        def point(self, name):
            if name == point:
                stores.delete(deps, "s")
                erase.purge_store(deps, "s")
                stores.create(deps, name="s")

    monkeypatch.setattr(deps, "faults", Meanwhile())


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb-moto"])
def test_an_explicit_write_whose_store_is_deleted_meanwhile_is_404_and_leaves_nothing(backend, tmp_path, monkeypatch):
    """A trial: the write answered 201 after the delete's 204, and its memory was listed (and, after a restart,
    found) in the store made again under the name — the purge never knew the tenant, which the write entered in the
    activity registry only after its commit."""
    from memlane.services import explicit

    with service_on(backend, tmp_path) as svc:
        deps = svc.deps
        stores.create(deps, name="s")
        _deleted_and_purged_at(deps, monkeypatch, "explicit.after_commit")
        with pytest.raises(NotFound) as refused:
            explicit.write(deps, "s", scope=RUN, request_id="w-1", memories=[{"text": SAID, "memory_id": "bees"}])
        assert refused.value.code == "store_not_found"
        assert deps.table.query(tenant_pk("s", "app", "carol"), limit=100).items == []
        assert found(deps) == set()


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb-moto"])
def test_a_thread_created_as_its_store_is_deleted_is_404_and_not_in_the_store_made_again(backend, tmp_path,
                                                                                         monkeypatch):
    """A trial: the create answered 201 after the delete's 204, and the store made again under the name listed the
    thread, metadata and all."""
    from memlane.repository import Repository
    from memlane.services import erase, threads

    with service_on(backend, tmp_path) as svc:
        deps = svc.deps
        stores.create(deps, name="s")
        real, fired = Repository.transact, []

        def transact(self, writes):
            real(self, writes)
            if not fired and any(getattr(w, "item", {}).get("sk", "").startswith("SCOPE#") for w in writes):
                fired.append(True)  # the thread's commit made: the store deleted, purged and made again
                stores.delete(deps, "s")
                erase.purge_store(deps, "s")
                stores.create(deps, name="s")

        monkeypatch.setattr(Repository, "transact", transact)
        with pytest.raises(NotFound) as refused:
            threads.create(deps, "s", scope={"app_id": "app", "tenant_id": "carol", "agent_id": "bot"},
                           thread_id="t1", metadata={"topic": SAID})
        assert fired and refused.value.code == "store_not_found"
        monkeypatch.undo()
        assert deps.table.query(tenant_pk("s", "app", "carol"), limit=100).items == []
