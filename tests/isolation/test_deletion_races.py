"""Deletion racing extraction: a run deleted, or a tenant erased, while an extraction job of that run is
between reading its messages and writing what it found. Nothing of the deleted run may come back — no
memory item, no index document (memory or message), no task item in an erased tenant."""

from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.models import RecordType, TaskStatus
from memlane.domain.scope import ScopeFilter
from memlane.ports import IndexQuery
from memlane.repository import tenant_pk
from memlane.services import erase, ingest, stores

RUN = {"app_id": "app", "tenant_id": "alice", "agent_id": "bot", "run_id": "r1"}
SAID = "I keep bees on my rooftop in Brooklyn."


def delete_the_run(deps):
    erase.delete_run(deps, "s", scope=RUN)


def erase_the_tenant(deps):
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="alice", principal="ops")
    erase.run_erasure(deps, erasure.erasure_id)


def documents(deps):
    found = deps.index.search("s", IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="alice"), text=SAID,
                                              vector=deps.embedder.embed([SAID])[0],
                                              record_types=(RecordType.MEMORY, RecordType.MESSAGE)))
    return {h.memory_id for h in [*found.vector, *found.keyword]}


@pytest.mark.parametrize("deleter", [delete_the_run, erase_the_tenant], ids=["run-deleted", "tenant-erased"])
@pytest.mark.parametrize("moment", ["extract", "index"], ids=["before-the-table-write", "before-the-index-write"])
def test_nothing_deleted_comes_back_from_a_job_that_read_it_before(service, deps, monkeypatch, deleter, moment):
    stores.create(deps, name="s")
    task = ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    assert documents(deps)  # the message is indexed at once
    target = deps.extractor if moment == "extract" else deps.index
    name = "extract" if moment == "extract" else "upsert"
    original, fired = getattr(target, name), []

    def deleted_meanwhile(*args, **kwargs):
        if not fired:
            fired.append(True)
            deleter(deps)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, deleted_meanwhile)
    service.drain()
    assert fired
    pk = tenant_pk("s", "app", "alice")
    left = deps.table.query(pk, limit=100).items
    assert [i["sk"] for i in left if not i["sk"].startswith("TASK#")] == []
    assert documents(deps) == set()
    if deleter is erase_the_tenant:
        assert left == []  # the job's end did not write its task back into the erased partition
    else:
        (ended,) = left
        assert ended["status"] == TaskStatus.FAILED and "deleted" in ended["error"]
        assert SAID not in str(ended)
    assert task.request_id == "add-1"


@pytest.mark.parametrize("deleter", [delete_the_run, erase_the_tenant], ids=["run-deleted", "tenant-erased"])
@pytest.mark.parametrize("late", [False, True], ids=["index-write-between-the-passes", "index-write-after-both"])
def test_an_add_deleted_before_it_indexed_its_messages_leaves_no_document(service, deps, monkeypatch, deleter, late):
    """The add committed its messages; the deletion removed them (and the documents it found) before the add
    wrote their index documents. Those are removed: by the deletion's second pass, or by the add itself,
    which finds its messages gone."""
    from memlane.services import message_index

    stores.create(deps, name="s")
    real, fired = message_index.index_after_add, []

    def deleted_meanwhile(d, store, msgs):
        if not fired:
            fired.append(True)
            if late:
                deleter(deps)
                return real(d, store, msgs)
            # The add's write lands inside the deletion: after its first pass over the documents.
            original = deps.index.delete

            def first_pass_then_index(*args, **kwargs):
                monkeypatch.setattr(deps.index, "delete", original)
                original(*args, **kwargs)
                real(d, store, msgs)

            monkeypatch.setattr(deps.index, "delete", first_pass_then_index)
            deleter(deps)
            return True
        return real(d, store, msgs)

    monkeypatch.setattr(message_index, "index_after_add", deleted_meanwhile)
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    service.drain()
    assert fired
    assert documents(deps) == set()
    assert [d for d in deps.index.documents("s")] == []


def _written_memory(deps):
    from memlane.services import explicit

    stores.create(deps, name="s")
    explicit.write(deps, "s", scope={"app_id": "app", "tenant_id": "alice"},
                   memories=[{"text": SAID, "memory_id": "bees"}])


def _memory_documents(deps):
    return {d.memory_id for d in deps.index.documents("s")} & {"bees"}


@pytest.mark.parametrize("deleter", ["memory", "tenant"])
@pytest.mark.parametrize("moment", ["table", "index"], ids=["before-the-table-write", "before-the-index-write"])
def test_an_edit_racing_a_delete_never_writes_the_memory_back(deps, monkeypatch, deleter, moment):
    """PATCH read the memory, then wrote it unconditionally: a delete (or an erasure) in between came back
    as a live memory in table and index — or, between its table and index writes, as a document."""
    from memlane.domain.errors import NotFound
    from memlane.repository import Repository
    from memlane.services import memories

    _written_memory(deps)
    # deps.repo is made per use; the edit builds its write with memory_put, then commits it with its index job
    target, name = (Repository, "memory_put") if moment == "table" else (deps.index, "upsert")
    original, fired = getattr(target, name), []

    def deleted_meanwhile(*args, **kwargs):
        if not fired:
            fired.append(True)
            if deleter == "memory":
                memories.delete(deps, "s", app_id="app", tenant_id="alice", memory_id="bees")
            else:
                erase_the_tenant(deps)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, deleted_meanwhile)
    try:
        memories.update(deps, "s", app_id="app", tenant_id="alice", memory_id="bees", text="I keep wasps now.")
    except NotFound:
        assert moment == "table"  # read again after the refused write: gone
    assert fired
    with pytest.raises(NotFound):
        memories.get(deps, "s", app_id="app", tenant_id="alice", memory_id="bees")
    assert _memory_documents(deps) == set()


@pytest.mark.parametrize("deleter", ["memory", "run", "tenant"])
def test_an_edit_that_lands_inside_a_delete_leaves_no_document(deps, monkeypatch, deleter):
    """A delete removes the index documents, then the table items: an edit written in between (its table
    write before the items went, its index write after the documents did) left its text in the index."""
    from memlane.repository import Repository
    from memlane.services import explicit, memories, redaction

    stores.create(deps, name="s")
    explicit.write(deps, "s", scope=RUN, memories=[{"text": SAID, "memory_id": "bees"}])
    fired = []

    def edit_first(real):
        def wrapped(*args, **kwargs):
            if not fired:
                fired.append(True)
                memories.update(deps, "s", app_id="app", tenant_id="alice", memory_id="bees",
                                text="I keep wasps on my rooftop in Queens now.")
            return real(*args, **kwargs)
        return wrapped

    # Between the documents and the items, a delete redacts the copies; an erasure reads the registry.
    target, name = (Repository, "dream_keys_outside") if deleter == "tenant" else (redaction, "redact")
    monkeypatch.setattr(target, name, edit_first(getattr(target, name)))
    if deleter == "memory":
        memories.delete(deps, "s", app_id="app", tenant_id="alice", memory_id="bees")
    elif deleter == "run":
        delete_the_run(deps)
    else:
        erase_the_tenant(deps)
    assert fired
    assert _memory_documents(deps) == set()
    assert [d.text for d in deps.index.documents("s") if "wasps" in d.text] == []


def _texts_of_the_tenant(deps):
    import json

    return json.dumps(deps.table.query(tenant_pk("s", "app", "alice"), limit=1000).items, default=str)


def test_a_run_deleted_after_the_jobs_check_does_not_get_the_tasks_texts_back(service, deps, monkeypatch):
    """The job checked its run, then saved its task SUCCEEDED unconditionally: a deletion between the two
    had redacted the task, and the save wrote the deleted memories' texts back into it. (Hooked between the task
    write's read and its conditional put: Repository.change_task.)"""
    from memlane.repository import Repository

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    real, fired = Repository.change_task, []

    def deleted_before_the_put(self, task, change):
        def hooked(found):
            new = change(found)
            if new is not None and new.status == TaskStatus.SUCCEEDED and not fired:
                fired.append(True)
                delete_the_run(deps)
            return new
        return real(self, task, hooked)

    monkeypatch.setattr(Repository, "change_task", deleted_before_the_put)
    service.drain()
    assert fired
    assert "Brooklyn" not in _texts_of_the_tenant(deps)
    assert documents(deps) == set()


def test_a_run_deleted_and_its_id_taken_again_keeps_nothing_the_old_job_found(service, deps, monkeypatch):
    """The job asked whether its run's registry entry still existed: a new add to the same thread id had
    made it again, so the memory of the deleted message stayed, in table and index."""
    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    original, fired = deps.extractor.extract, []

    def deleted_and_taken_again(*args, **kwargs):
        if not fired:
            fired.append(True)
            delete_the_run(deps)
            ingest.add(deps, "s", scope=RUN, request_id="add-2",
                       messages=[{"role": "user", "content": "I moved to a farm in Vermont with goats."}])
        return original(*args, **kwargs)

    monkeypatch.setattr(deps.extractor, "extract", deleted_and_taken_again)
    service.drain()
    assert fired
    assert "Brooklyn" not in _texts_of_the_tenant(deps)
    assert [d.text for d in deps.index.documents("s") if "Brooklyn" in d.text] == []
    assert "Vermont" in _texts_of_the_tenant(deps)  # the new add to the thread stays, extracted
    assert deps.repo.get_task("s", "app", "alice", "add-2").status == TaskStatus.SUCCEEDED


def test_a_job_that_writes_between_the_erasures_listing_and_its_deletes_leaves_nothing(service, deps, monkeypatch):
    """A trial found memories of messages sent before an erasure that survived it: the job wrote after the
    erasure listed the tenant (ids are random: the listing, page by page, never saw the memory), and its check
    after its writes passed — a new add had made the run again, and its messages were not deleted yet."""
    from memlane.repository import Repository
    from memlane.services import extract

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    real, fired = Repository.dream_keys_outside, []

    def listed_then_written(*args, **kwargs):  # called once the erasure has listed the tenant's items
        if not fired:
            fired.append(True)
            ingest.add(deps, "s", scope=RUN, request_id="add-2", sync=True,
                       messages=[{"role": "user", "content": "I moved to a farm in Vermont with goats."}])
            extract.run(deps, "s", "add-1", app_id="app", tenant_id="alice")
            assert "Brooklyn" in _texts_of_the_tenant(deps)  # written, and its check passed
        return real(*args, **kwargs)

    monkeypatch.setattr(Repository, "dream_keys_outside", listed_then_written)
    erase_the_tenant(deps)
    assert fired
    assert "Brooklyn" not in _texts_of_the_tenant(deps)
    assert [d.text for d in deps.index.documents("s") if "Brooklyn" in d.text] == []
    assert "Vermont" in _texts_of_the_tenant(deps)  # the add after the listing is kept whole, extracted
    assert deps.repo.get_task("s", "app", "alice", "add-2").status == TaskStatus.SUCCEEDED


def test_a_supersede_written_after_the_erasures_listing_leaves_no_pointer_naming_the_tenant(service, deps,
                                                                                            monkeypatch):
    """The same race, the late job superseding a memory at write time: its action went with the tenant's items, and
    the action's pointer in the store's dream partition (which names the tenant) stayed for good."""
    from memlane.repository import Repository, dream_pk
    from memlane.services import extract

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-0", sync=True,
               messages=[{"role": "user", "content": "I live in Boston."}])
    ingest.add(deps, "s", scope=RUN, request_id="add-1",
               messages=[{"role": "user", "content": "I moved to Denver last month."}])
    real, fired = Repository.dream_keys_outside, []

    def listed_then_written(*args, **kwargs):
        if not fired:
            fired.append(True)
            ingest.add(deps, "s", scope=RUN, request_id="add-2", messages=[{"role": "user", "content": "Hi."}])
            done = extract.run(deps, "s", "add-1", app_id="app", tenant_id="alice")
            assert [o.action_id for o in done.outcomes if o.action_id]  # a supersede, recorded as an action
        return real(*args, **kwargs)

    monkeypatch.setattr(Repository, "dream_keys_outside", listed_then_written)
    erase_the_tenant(deps)
    assert fired
    assert [i for i in deps.table.query(dream_pk("s"), limit=100).items if "alice" in str(i)] == []


@pytest.mark.parametrize("deleter", [delete_the_run, erase_the_tenant], ids=["run-deleted", "tenant-erased"])
def test_a_dream_that_read_what_is_deleted_meanwhile_writes_none_of_it_back(service, deps, monkeypatch, deleter):
    """The dream gathered the tenant's memories, then a deletion ran, then it applied a profile built from
    them (and, after an erasure, wrote its actions and profile into the emptied partition)."""
    from memlane.domain.models import DreamMode
    from memlane.dream.rules import RulesEngine
    from memlane.services import dream

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, sync=True,  # a profile attribute ("lives in") when the dream reads it
               messages=[{"role": "user", "name": "Ann", "content": "I live in Brooklyn."}])
    ingest.add(deps, "s", scope={**RUN, "run_id": "r2"}, sync=True,
               messages=[{"role": "user", "name": "Ann", "content": "I work as a nurse."}])
    service.drain()
    real, fired = RulesEngine.propose, []

    def deleted_meanwhile(self, data):
        fired.append(True)
        deleter(deps)
        return real(self, data)

    monkeypatch.setattr(RulesEngine, "propose", deleted_meanwhile)
    try:
        dream.start(deps, "s", scope={"app_id": "app", "tenant_id": "alice"}, mode=DreamMode.SAFE_AUTO, threshold=0.0,
                    sync=True)
    except Exception as refused:  # erased while it ran: its task went with the tenant, and the answer says so
        assert deleter is erase_the_tenant and getattr(refused, "code", "") == "dream_task_deleted"
    assert fired
    assert "Brooklyn" not in _texts_of_the_tenant(deps)
    assert [d.text for d in deps.index.documents("s") if "Brooklyn" in d.text] == []
    if deleter is erase_the_tenant:
        assert deps.table.query(tenant_pk("s", "app", "alice"), limit=100).items == []
        # Nor the pointers of its actions, which name the tenant (a trial of the AWS path: 3 of 3 racing runs).
        from memlane.repository import dream_pk
        assert [i for i in deps.table.query(dream_pk("s"), limit=100).items if "alice" in str(i)] == []


def test_a_dream_whose_redelivered_job_finished_first_takes_nothing_back(service, deps, monkeypatch):
    """The final save expects RUNNING: a redelivery that finished the task first is not an erasure."""
    from memlane.domain.models import DreamMode, TaskStatus as Status
    from memlane.dream.rules import RulesEngine
    from memlane.services import dream

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, sync=True, messages=[{"role": "user", "name": "Ann", "content": "I live in Oslo."}])
    real, nested = RulesEngine.propose, []

    def redelivered_meanwhile(self, data):
        if not nested:
            nested.append(True)
            dream.run(deps, "s", task.task_id)  # the same task's job, delivered again, runs to the end first
        return real(self, data)

    task = dream.start(deps, "s", scope={"app_id": "app", "tenant_id": "alice"}, mode=DreamMode.SAFE_AUTO,
                       threshold=0.0)
    monkeypatch.setattr(RulesEngine, "propose", redelivered_meanwhile)
    done = dream.run(deps, "s", task.task_id)
    assert nested and done.status == Status.SUCCEEDED
    profile = deps.repo.get_profile("s", "app", "alice", None)
    assert profile is not None and "Oslo" in profile.summary


def test_a_run_deletion_that_dies_half_way_is_finished_by_its_job(service, deps, monkeypatch):
    """The registry entry went first and the process died before the rest: the run's messages and memories
    stayed readable until the (unanswered) client retried, which it may never do."""
    import dataclasses

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, sync=True, messages=[{"role": "user", "content": SAID}])
    service.drain()
    assert documents(deps)

    class Crash(Exception):
        pass

    def dies(*args, **kwargs):
        raise Crash("killed after the registry entry went")

    monkeypatch.setattr(erase, "clear_run", dies)
    soon = dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, sync_retry_delay=0.2))
    with pytest.raises(Crash):
        erase.delete_run(soon, "s", scope=RUN)
    monkeypatch.undo()
    assert "Brooklyn" in _texts_of_the_tenant(deps)  # half-deleted: the entry gone, the rest still there
    service.drain()
    assert "Brooklyn" not in _texts_of_the_tenant(deps)
    assert documents(deps) == set()


def test_edits_whose_index_writes_land_out_of_order_leave_the_index_as_the_table(deps, monkeypatch):
    """An edit read the table to correct the index, and a newer edit was written before its correction
    landed: the index kept the older text (seen with concurrent PATCHes over HTTP, 1 of 40)."""
    from memlane.services import explicit, memories

    stores.create(deps, name="s")
    explicit.write(deps, "s", scope=RUN, memories=[{"text": SAID, "memory_id": "bees"}])
    original, calls = deps.index.upsert, []

    def late(store, docs):
        calls.append(docs[0][0].text)
        # The first edit's index write, then its correction: each time another edit runs to its end first.
        if len(calls) in (1, 3):
            memories.update(deps, "s", app_id="app", tenant_id="alice", memory_id="bees", text=f"Edit {len(calls)}.")
        return original(store, docs)

    monkeypatch.setattr(deps.index, "upsert", late)
    memories.update(deps, "s", app_id="app", tenant_id="alice", memory_id="bees", text="Version two.")
    (doc,) = [d for d in deps.index.documents("s") if d.memory_id == "bees"]
    assert doc.text == memories.get(deps, "s", app_id="app", tenant_id="alice", memory_id="bees").text


def erased_once_after(monkeypatch, deps, owner, name: str) -> list[bool]:
    """`owner.name` runs, then the tenant is erased — the first time only."""
    real, fired = getattr(owner, name), []

    def then_erased(*args, **kwargs):
        out = real(*args, **kwargs)
        if not fired:
            fired.append(True)
            erase_the_tenant(deps)
        return out

    monkeypatch.setattr(owner, name, then_erased)
    return fired


def test_an_extraction_finishing_after_its_tenant_was_erased_writes_nothing_back(service, deps, monkeypatch):
    """The erasure lands between the job's last look at its run and its final task write: the write is
    conditional on the task it moved to RUNNING, so the erased partition stays empty, and the add sent again
    is a new add (not the replay of a task that should not exist)."""
    from memlane.services import extract

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    fired = erased_once_after(monkeypatch, deps, extract, "_deleted_meanwhile")  # right after the job's check
    service.drain()
    assert fired
    assert deps.table.query(tenant_pk("s", "app", "alice"), limit=100).items == []
    assert documents(deps) == set()
    again = ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    assert again.status == TaskStatus.PENDING


def test_a_forced_summary_refresh_does_not_write_its_task_into_an_erased_tenant(service, deps, monkeypatch):
    from memlane.domain.scope import Scope
    from memlane.services import summaries

    stores.create(deps, name="s")
    for i in range(4):
        ingest.add(deps, "s", scope=RUN, sync=True, messages=[{"role": "user", "content": f"Turn {i}: {SAID}"}])
    service.drain()
    summaries.request_refresh(deps.for_tenant("s", "app", "alice"), "s", Scope(**RUN))
    fired = erased_once_after(monkeypatch, deps, summaries, "refresh")
    service.drain()
    assert fired
    assert deps.table.query(tenant_pk("s", "app", "alice"), limit=100).items == []


def test_a_dream_job_whose_tenant_is_erased_before_it_starts_writes_nothing_back(service, deps, monkeypatch):
    """The erasure lands between the job's read of its task and its RUNNING write (the embedder check between
    them may load a model for seconds): the write is conditional, so the erased partition stays empty."""
    from memlane.domain.models import DreamMode
    from memlane.services import dream, embedder_guard

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, sync=True, messages=[{"role": "user", "content": SAID}])
    task = dream.start(deps, "s", scope={"app_id": "app", "tenant_id": "alice"}, mode=DreamMode.SAFE_AUTO)
    fired = erased_once_after(monkeypatch, deps, embedder_guard, "ensure")
    service.drain()
    assert fired
    assert deps.table.query(tenant_pk("s", "app", "alice"), limit=100).items == []
    with pytest.raises(Exception) as gone:
        dream.get_task(deps, "s", task.task_id)
    assert getattr(gone.value, "code", "") == "dream_task_not_found"


@pytest.mark.parametrize("kind", ["extract", "dream"])
def test_a_job_given_up_as_its_tenant_is_erased_writes_nothing_back(service, deps, monkeypatch, kind):
    """The last delivery gives its job up (FAILED): it reads the task, the erasure lands, it writes FAILED —
    conditionally, so the erased partition stays empty."""
    from memlane.domain.models import DreamMode
    from memlane.ports import Job
    from memlane.repository import Repository
    from memlane.services import dream, jobs

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    if kind == "dream":
        service.drain()
        request_id = dream.start(deps, "s", scope={"app_id": "app", "tenant_id": "alice"},
                                 mode=DreamMode.SAFE_AUTO).task_id
    else:
        request_id = "add-1"
    fired = erased_once_after(monkeypatch, deps, Repository, "locate_task" if kind == "extract" else "get_dream_task")
    jobs.give_up(deps, Job.of_tenant(kind, "s", request_id, "app", "alice"), "gave up after 5 deliveries")
    assert fired
    assert deps.table.query(tenant_pk("s", "app", "alice"), limit=100).items == []


def _open_entries(deps):
    return [i for i in deps.table.query("s#~open", limit=100).items if i["tenant_id"] == "alice"]


def test_an_erasure_leaves_no_open_task_entry_naming_the_tenants_request_ids(service, deps):
    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="alice-crm-7731", messages=[{"role": "user", "content": SAID}])
    assert [i["request_id"] for i in _open_entries(deps)] == ["alice-crm-7731"]  # its job not run yet
    erase_the_tenant(deps)
    assert _open_entries(deps) == []
    service.drain()  # the held job finds nothing, and writes nothing
    assert _open_entries(deps) == []
    assert deps.table.query(tenant_pk("s", "app", "alice"), limit=100).items == []


def test_a_job_whose_task_went_after_the_erasure_listed_the_tasks_closes_its_open_entry(service, deps, monkeypatch):
    """An add racing the erasure: its entry is written, the erasure lists the tenant's items before the task
    is, and the task goes after. The job, finding no task, closes the entry (the sweeper would only after
    its deadline, 15 minutes later)."""
    from memlane.ports import Job
    from memlane.services import jobs

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])
    deps.table.delete(tenant_pk("s", "app", "alice"), "TASK#add-1")  # what the racing erasure deleted
    jobs.handle(deps, Job.of_tenant("extract", "s", "add-1", "app", "alice"))
    assert _open_entries(deps) == []


def test_a_dropped_job_whose_task_is_still_there_keeps_its_open_entry(service, deps, monkeypatch):
    """The entry is what lets the sweeper send a lost job again: a job dropped while its task exists keeps it."""
    from memlane.domain.errors import NotFound
    from memlane.ports import Job
    from memlane.services import extract, jobs

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-1", messages=[{"role": "user", "content": SAID}])

    def not_found(*args, **kwargs):
        raise NotFound("a record the job needed is gone", code="memory_not_found")

    monkeypatch.setattr(extract, "run", not_found)
    jobs.handle(deps, Job.of_tenant("extract", "s", "add-1", "app", "alice"))
    assert [i["request_id"] for i in _open_entries(deps)] == ["add-1"]


T_DREAM = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _explicit_write(service, deps, arm):
    from memlane.services import explicit

    arm()
    explicit.write(deps, "s", scope={"app_id": "app", "tenant_id": "alice"}, memories=[{"text": SAID}])


def _extraction(service, deps, arm):
    arm()
    ingest.add(deps, "s", scope=RUN, messages=[{"role": "user", "content": SAID}])
    service.drain()


def _dream_action(service, deps, arm):
    from memlane.domain.models import DreamMode
    from memlane.services import dream, explicit

    for day, text in ((1, "Ann lives in Boston."), (9, "Ann moved from Boston to Denver.")):
        explicit.write(deps, "s", scope={"app_id": "app", "tenant_id": "alice"},
                       memories=[{"text": text, "event_time": T_DREAM + timedelta(days=day)}])
    arm()
    done = dream.start(deps, "s", scope={"app_id": "app", "tenant_id": "alice"}, mode=DreamMode.SAFE_AUTO,
                       threshold=0.0, sync=True)
    assert done.stats.get("applied")  # the supersede was applied: its index write met the delete


@pytest.mark.parametrize("write", [_explicit_write, _extraction, _dream_action], ids=["explicit", "extracted", "dream"])
def test_a_memory_deleted_between_its_table_and_index_writes_leaves_no_document(service, deps, monkeypatch, write):
    """Every memory write goes to the table, then the index: a delete in between (it found no document yet)
    was undone by the late index write — the deleted text back in the index file, an orphan fsck reports."""
    from memlane.domain.models import RecordType as Kind
    from memlane.services import memories

    stores.create(deps, name="s")
    real, armed, deleted = deps.index.upsert, [], []

    def deleted_first(store, docs):
        mine = [m for m, _ in docs if m.record_type == Kind.MEMORY]
        if mine and armed and not deleted:
            deleted.append(mine[0].memory_id)
            memories.delete(deps, "s", app_id="app", tenant_id="alice", memory_id=mine[0].memory_id)
        return real(store, docs)

    monkeypatch.setattr(deps.index, "upsert", deleted_first)
    write(service, deps, lambda: armed.append(True))
    assert deleted
    assert deleted[0] not in {d.memory_id for d in deps.index.documents("s")}


@pytest.mark.parametrize("moment", ["before_the_claim_goes", "after_the_listing"])
def test_a_thread_made_again_by_an_add_racing_the_erasure_keeps_its_id(service, deps, monkeypatch, moment):
    """The add found its thread id's old claim (so wrote none) and committed while the erasure deleted what it
    had listed, the claim included: the thread was listed but not found by its id, and another agent could
    claim the id — two threads under one id."""
    from memlane.repository import Repository
    from memlane.services import threads

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, messages=[{"role": "user", "content": SAID}])
    service.drain()
    real, fired = Repository.tenant_keys, []

    def listed(self, store, app_id, tenant_id, prefix=None):
        out = list(real(self, store, app_id, tenant_id, prefix=prefix))
        if prefix is None and not fired:  # the erasure has its list; the add comes in now
            fired.append(True)
            if moment == "before_the_claim_goes":
                ingest.add(deps, "s", scope=RUN, messages=[{"role": "user", "content": "I keep wasps too."}])
            else:
                deleting = Repository.delete_items

                def add_first(self_, keys):  # the add reads the claim, then the erasure deletes, then it commits
                    Repository.delete_items = deleting
                    ingest.add(deps, "s", scope=RUN, messages=[{"role": "user", "content": "I keep wasps too."}])
                    return deleting(self_, keys)
                monkeypatch.setattr(Repository, "delete_items", add_first)
        return out

    monkeypatch.setattr(Repository, "tenant_keys", listed)
    erase_the_tenant(deps)
    assert fired
    found = threads.get(deps, "s", app_id="app", tenant_id="alice", thread_id="r1")  # by its id, no agent named
    assert found.scope.agent_id == "bot"
    with pytest.raises(Exception) as taken:  # another agent cannot take the id
        threads.create(deps, "s", scope={"app_id": "app", "tenant_id": "alice", "agent_id": "intruder"},
                       thread_id="r1")
    assert getattr(taken.value, "code", "") == "thread_exists"
    assert ("app", "alice") in set(deps.repo.iter_tenants("s"))  # the store's purge finds what the add left


def test_an_add_whose_threads_old_claim_goes_before_it_commits_claims_the_id_itself(service, deps, monkeypatch):
    """The add read the old claim (a deletion under way had removed the run's entry, not yet the claim), wrote
    none, and committed after the claim went — too late for the erasure to give the claim back. The add's
    commit requires the claim it read: it reads again and claims the id itself."""
    from memlane.repository import Repository
    from memlane.services import threads

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, messages=[{"role": "user", "content": SAID}])
    service.drain()
    pk = tenant_pk("s", "app", "alice")
    deps.table.delete(pk, "SCOPE#bot#r1")  # the deletion's first step: the run's entry
    real, fired = Repository.new_run_claim, []

    def claim_then_gone(self, store, scope):
        writes = real(self, store, scope)
        if not fired:
            fired.append(True)
            deps.table.delete(pk, "THREAD#r1")  # the deletion's later step, before the add commits
        return writes

    monkeypatch.setattr(Repository, "new_run_claim", claim_then_gone)
    ingest.add(deps, "s", scope=RUN, messages=[{"role": "user", "content": "I keep wasps too."}])
    assert fired
    assert threads.get(deps, "s", app_id="app", tenant_id="alice", thread_id="r1").scope.agent_id == "bot"


def test_a_thread_created_as_its_old_claim_goes_claims_its_id(service, deps, monkeypatch):
    """POST /threads found its agent's old claim (a deletion had removed the run, not yet the claim), wrote none,
    and committed after the claim went: the thread was listed but not found by its id."""
    from memlane.repository import Repository
    from memlane.services import threads

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, messages=[{"role": "user", "content": SAID}])
    service.drain()
    pk = tenant_pk("s", "app", "alice")
    deps.table.delete(pk, "SCOPE#bot#r1")  # the deletion's first step
    real, fired = Repository.thread_agent, []

    def read_then_gone(self, store, app_id, tenant_id, thread_id):
        holder = real(self, store, app_id, tenant_id, thread_id)
        if not fired:
            fired.append(True)
            deps.table.delete(pk, "THREAD#r1")  # the deletion's later step, before the create commits
        return holder

    monkeypatch.setattr(Repository, "thread_agent", read_then_gone)
    _, created = threads.create(deps, "s", scope={"app_id": "app", "tenant_id": "alice", "agent_id": "bot"},
                                thread_id="r1")
    assert fired and created
    assert threads.get(deps, "s", app_id="app", tenant_id="alice", thread_id="r1").scope.agent_id == "bot"


def test_a_thread_created_again_as_a_deletion_removes_it_is_made_again_not_a_500(service, deps, monkeypatch):
    from memlane.repository import Repository
    from memlane.services import threads

    stores.create(deps, name="s")
    scope = {"app_id": "app", "tenant_id": "alice", "agent_id": "bot"}
    threads.create(deps, "s", scope=scope, thread_id="r1")
    real, fired = Repository.get_scope, []

    def deleted_after_the_read(self, store, where):
        found = real(self, store, where)
        if found is not None and not fired:  # the create read it: the deletion lands now
            fired.append(True)
            erase.delete_run(deps, "s", scope={**scope, "run_id": "r1"})
        return found

    monkeypatch.setattr(Repository, "get_scope", deleted_after_the_read)
    info, _ = threads.create(deps, "s", scope=scope, thread_id="r1")
    assert fired and info.scope.run_id == "r1"
    assert threads.get(deps, "s", app_id="app", tenant_id="alice", thread_id="r1").scope.agent_id == "bot"


def test_a_memory_written_again_under_its_id_during_its_delete_keeps_its_document(service, deps, monkeypatch):
    """The delete's second index pass (for an edit that indexed late) removed the document of a memory an
    explicit write had made again under the id after the table delete: a live memory search never found."""
    from memlane.repository import Repository
    from memlane.services import explicit, memories

    stores.create(deps, name="s")
    tenant = {"app_id": "app", "tenant_id": "alice"}
    explicit.write(deps, "s", scope=tenant, memories=[{"text": SAID, "memory_id": "bees"}])
    real, fired = Repository.delete_memory, []

    def written_again(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        if not fired:
            fired.append(True)
            explicit.write(deps, "s", scope=tenant, memories=[{"text": "I keep wasps now.", "memory_id": "bees"}])
        return out

    monkeypatch.setattr(Repository, "delete_memory", written_again)
    memories.delete(deps, "s", memory_id="bees", **tenant)
    assert fired
    assert memories.get(deps, "s", memory_id="bees", **tenant).text == "I keep wasps now."
    assert [d.text for d in deps.index.documents("s") if d.memory_id == "bees"] == ["I keep wasps now."]


def test_two_agents_creating_one_thread_id_at_once_get_one_thread(service, deps, monkeypatch):
    """The first create read the id free; the second committed its claim; the first, reading the claim again
    before its commit, required the second's claim instead of claiming — both were answered 'created'."""
    from memlane.domain.errors import Conflict
    from memlane.repository import Repository
    from memlane.services import threads

    stores.create(deps, name="s")
    tenant = {"app_id": "app", "tenant_id": "alice"}
    real, fired = Repository.get_scope, []

    def beta_first(self, store, where):
        found = real(self, store, where)
        if not fired and where.agent_id == "alpha":  # alpha read the id free; beta creates it now
            fired.append(True)
            threads.create(deps, "s", scope={**tenant, "agent_id": "beta"}, thread_id="r1")
        return found

    monkeypatch.setattr(Repository, "get_scope", beta_first)
    with pytest.raises(Conflict) as taken:
        threads.create(deps, "s", scope={**tenant, "agent_id": "alpha"}, thread_id="r1")
    assert fired and taken.value.code == "thread_exists"
    listed, _ = threads.list_(deps, "s", limit=10, cursor=None, **tenant)
    assert [(t.scope.agent_id, t.scope.run_id) for t in listed] == [("beta", "r1")]


def test_an_erasure_between_a_jobs_recorded_change_and_its_memory_leaves_nothing(service, deps, monkeypatch):
    """A trial: the extraction recorded its write-time change (an action), then the tenant's erasure ran whole and
    deleted that action, then the job wrote its memory and, applying the change, found no action: the job was dropped
    as "not found", its memory left in the erased tenant, searchable — and the erasure SUCCEEDED."""
    from memlane.repository import Repository
    from memlane.services import search

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, sync=True, messages=[{"role": "user", "content": "My locker code is 1111."}])
    ingest.add(deps, "s", scope=RUN, request_id="add-2",
               messages=[{"role": "user", "content": "My locker code is now 2222."}])
    real, fired = Repository.put_memory, []

    def erased_first(self, store, memory, **kwargs):
        if not fired and kwargs.get("new"):
            fired.append(erase_the_tenant(deps))
        return real(self, store, memory, **kwargs)

    monkeypatch.setattr(Repository, "put_memory", erased_first)
    service.drain()
    assert fired
    assert "locker" not in _texts_of_the_tenant(deps)
    assert [d.text for d in deps.index.documents("s") if "locker" in d.text] == []
    assert search.search(deps, "s", query="locker code", scope={"app_id": "app", "tenant_id": "alice"}) == []


@pytest.mark.parametrize("moment", ["extract", "record"], ids=["before-the-model", "after-the-neighbours"])
def test_an_extraction_the_erasure_ran_beside_leaves_nothing_naming_the_tenant(service, deps, monkeypatch, moment):
    """A trial of the AWS path (17 of 18 runs): the erasure ran while the job waited on its model (or once it had read
    the memories its statements change); the job then wrote (a supersede recorded as an action, the scope's activity
    touched), found its run gone and took its memories back — but left the activity registry entry naming the
    erased tenant, from which the next scheduled dream wrote a dream task into the erased partition, and (2 of 18)
    its action's item and pointer."""
    from memlane.repository import activity_pk, dream_pk
    from memlane.services import consolidate

    stores.create(deps, name="s")
    ingest.add(deps, "s", scope=RUN, request_id="add-0", sync=True,
               messages=[{"role": "user", "content": "I live in Boston."}])
    ingest.add(deps, "s", scope=RUN, request_id="add-1",
               messages=[{"role": "user", "content": "I moved to Denver last month."}])
    owner, name = (deps.extractor, "extract") if moment == "extract" else (consolidate, "_record")
    real, fired = getattr(owner, name), []

    def erased_meanwhile(*args, **kwargs):
        if not fired:
            fired.append(True)
            erase_the_tenant(deps)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, erased_meanwhile)
    service.drain()
    assert fired
    naming = [i for pk in (activity_pk("s"), dream_pk("s")) for i in deps.table.query(pk, limit=100).items
              if "alice" in str(i)]
    assert naming == []
    assert deps.table.query(tenant_pk("s", "app", "alice"), limit=100).items == []
