"""Deleting a run makes the tenant's memory as if the run had never been said: what one of its memories
superseded (a write-time update) or absorbed (a dream merge) in another run — whose conversation is still
there — is current again, or superseded by the memory further down its chain that stays. Before, it stayed
SUPERSEDED by a memory that no longer existed: hidden from every read, with a stale id in the history."""

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.errors import Conflict
from memlane.domain.models import DreamActionKind, DreamMode, ExtractAction, MemoryStatus, RecordType
from memlane.domain.scope import ScopeFilter
from memlane.ports import IndexQuery
from memlane.services import dream, erase, explicit, ingest, profiles, search, stores

APP, TENANT = "app", "u1"
T0 = datetime(2025, 1, 10, 9, 0, tzinfo=timezone.utc)
WHERE = "Where does the user live?"


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def run_of(run, tenant=TENANT):
    return {"app_id": APP, "tenant_id": tenant, "agent_id": "assistant", "run_id": run}


def say(deps, store, text, *, day, run, tenant=TENANT, **message):
    return ingest.add(deps, store, scope=run_of(run, tenant), sync=True,
                      messages=[{"role": "user", "content": text, "created_at": T0 + timedelta(days=day), **message}])


def ask(deps, store, query=WHERE, tenant=TENANT, **kw):
    return search.search(deps, store, query=query, scope={"app_id": APP, "tenant_id": tenant}, top_k=5, **kw)


def no_stale_links(deps, store, tenant=TENANT):
    """Every supersede link in the tenant's history names a memory that exists."""
    held = {m.memory_id for m in deps.repo.iter_memories(store, APP, tenant)}
    for h in ask(deps, store, tenant=tenant, include_superseded=True):
        assert h.memory.superseded_by in (None, *held), h.memory
        assert h.memory.supersedes in (None, *held), h.memory


def paris_then_berlin(deps, store, tenant=TENANT):
    paris = say(deps, store, "I live in Paris.", day=0, run="a", tenant=tenant).outcomes[0].memory_id
    (moved,) = say(deps, store, "I moved from Paris to Berlin.", day=30, run="b", tenant=tenant).outcomes
    assert moved.action == ExtractAction.UPDATE and moved.target_id == paris
    assert not any("Paris" in h.memory.text and "Berlin" not in h.memory.text for h in ask(deps, store, tenant=tenant))
    return paris


def assert_back(deps, store, memory_id, tenant=TENANT, query=WHERE):
    back = deps.repo.get_memory(store, APP, tenant, memory_id)
    assert back.status == MemoryStatus.ACTIVE and back.superseded_by is None and back.valid_to is None
    assert [h.memory.memory_id for h in ask(deps, store, query, tenant=tenant)][:1] == [memory_id]
    # The index says so too (a default search asks the index for active documents only).
    found = deps.index.search(store, IndexQuery(scope=ScopeFilter(app_id=APP, tenant_id=tenant), text=query,
                                                vector=deps.embedder.embed([query])[0], k=10,
                                                statuses=(MemoryStatus.ACTIVE,), record_types=(RecordType.MEMORY,)))
    assert memory_id in {h.memory_id for h in [*found.keyword, *found.vector]}


def test_deleting_the_thread_that_said_the_move_gives_the_old_city_back(deps, store):
    paris = paris_then_berlin(deps, store)
    erase.delete_run(deps, store, scope=run_of("b"))
    assert_back(deps, store, paris)
    assert "Paris" in ask(deps, store)[0].memory.text
    history = ask(deps, store, include_superseded=True)
    assert not any("Berlin" in h.memory.text for h in history)
    no_stale_links(deps, store)


def test_deleting_the_middle_of_a_chain_links_the_first_to_the_last(deps, store):
    paris = paris_then_berlin(deps, store)
    berlin = deps.repo.get_memory(store, APP, TENANT, paris).superseded_by
    (rome,) = say(deps, store, "I moved from Berlin to Rome.", day=60, run="c").outcomes
    assert rome.action == ExtractAction.UPDATE and rome.target_id == berlin
    erase.delete_run(deps, store, scope=run_of("b"))

    first = deps.repo.get_memory(store, APP, TENANT, paris)
    assert first.status == MemoryStatus.SUPERSEDED and first.superseded_by == rome.memory_id
    assert first.valid_to == T0 + timedelta(days=60)  # held until Rome was said
    last = deps.repo.get_memory(store, APP, TENANT, rome.memory_id)
    assert last.status == MemoryStatus.ACTIVE and last.supersedes == paris
    now = ask(deps, store)
    assert "Rome" in now[0].memory.text and not any("Paris" in h.memory.text and "Rome" not in h.memory.text
                                                     for h in now)
    history = {h.memory.memory_id for h in ask(deps, store, include_superseded=True)}
    assert {paris, rome.memory_id} <= history and berlin not in history
    no_stale_links(deps, store)
    then = ask(deps, store, as_of=T0 + timedelta(days=45))  # Berlin was never said: Paris held until Rome
    assert "Paris" in then[0].memory.text


def test_deleting_the_run_of_a_merge_survivor_gives_the_retired_duplicate_back(deps, store, monkeypatch):
    # Two phrasings kept apart at write time (as memories written before write-time consolidation): a dream merges.
    monkeypatch.setattr(deps, "settings", dataclasses.replace(deps.settings, consolidate_on_write=False))
    say(deps, store, "I'm allergic to peanuts.", day=0, run="a", name="Ann")
    say(deps, store, "I have a peanut allergy.", day=1, run="b", name="Ann")
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, kinds=[DreamActionKind.MERGE],
                       sync=True)
    assert task.engine == "rules"
    (merge,) = [a for a in dream.list_actions(deps, store, task.task_id)[0] if a.kind == DreamActionKind.MERGE]
    dream.apply_action(deps, store, merge.action_id)
    (retired,) = merge.target_ids
    keep = deps.repo.get_memory(store, APP, TENANT, merge.keep_id)
    assert deps.repo.get_memory(store, APP, TENANT, retired).superseded_by == keep.memory_id

    erase.delete_run(deps, store, scope=keep.scope.as_dict())
    assert_back(deps, store, retired, query="peanut allergy")
    no_stale_links(deps, store)
    # The applied merge cannot be undone into a broken state: its survivor is gone, it refuses.
    with pytest.raises(Conflict):
        dream.undo_action(deps, store, merge.action_id)
    assert deps.repo.get_memory(store, APP, TENANT, retired).status == MemoryStatus.ACTIVE


class Crash(Exception):
    pass


@pytest.mark.parametrize("moment", ["before-the-reinstate-is-written", "after-its-table-write",
                                    "before-the-runs-items-go"])
def test_a_run_deletion_that_dies_half_way_still_gives_the_old_city_back(service, deps, store, monkeypatch, moment):
    """The clear_run job finishes a deletion that died; whatever had been written, the memory comes back (not
    current in the table but superseded in the index, which a retry would not look at again)."""
    paris = paris_then_berlin(deps, store)
    repo_type, fired = type(deps.repo), []
    name = {"before-the-reinstate-is-written": "put_memory", "after-its-table-write": "put_memory",
            "before-the-runs-items-go": "delete_items"}[moment]
    original = getattr(repo_type, name)

    def dies(repo, *args, **kwargs):
        if moment == "after-its-table-write":
            original(repo, *args, **kwargs)
        fired.append(True)
        raise Crash(moment)

    monkeypatch.setattr(repo_type, name, dies)
    soon = dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, sync_retry_delay=0.2))
    with pytest.raises(Crash):
        erase.delete_run(soon, store, scope=run_of("b"))
    monkeypatch.undo()
    assert fired
    service.drain()  # the clear_run job
    assert not deps.repo.newest_messages(store, erase.exact_scope(run_of("b")), limit=1)[0]  # finished
    assert_back(deps, store, paris)
    assert not any("Berlin" in h.memory.text for h in ask(deps, store, include_superseded=True))
    no_stale_links(deps, store)


def test_another_tenant_with_the_same_memory_ids_is_untouched(deps, store):
    for tenant in ("alice", "bob"):
        explicit.write(deps, store, scope=run_of("a", tenant), memories=[{"text": "Ann lives in Paris.",
                                                                          "memory_id": "home-1"}])
        explicit.write(deps, store, scope=run_of("b", tenant),
                       memories=[{"text": "Ann moved from Paris to Berlin.", "memory_id": "home-2"}])
        dream.start(deps, store, scope={"app_id": APP, "tenant_id": tenant}, mode=DreamMode.SAFE_AUTO,
                    threshold=0.0, kinds=[DreamActionKind.UPDATE], sync=True)
        assert deps.repo.get_memory(store, APP, tenant, "home-1").superseded_by == "home-2"

    erase.delete_run(deps, store, scope=run_of("b", "alice"))
    assert_back(deps, store, "home-1", tenant="alice", query="Where does Ann live?")
    bob = deps.repo.get_memory(store, APP, "bob", "home-1")
    assert bob.status == MemoryStatus.SUPERSEDED and bob.superseded_by == "home-2"
    assert [h.memory.memory_id for h in ask(deps, store, "Where does Ann live?", tenant="bob")] == ["home-2"]


def test_an_explicit_delete_of_the_successor_leaves_what_it_superseded_as_it_was(deps, store):
    """A deleted memory was wrong, not unsaid: only a run deletion reinstates."""
    from memlane.services import memories

    paris = paris_then_berlin(deps, store)
    berlin = deps.repo.get_memory(store, APP, TENANT, paris).superseded_by
    memories.delete(deps, store, app_id=APP, tenant_id=TENANT, memory_id=berlin)
    kept = deps.repo.get_memory(store, APP, TENANT, paris)
    assert kept.status == MemoryStatus.SUPERSEDED and kept.superseded_by == berlin
    assert not any(h.memory.memory_id == paris for h in ask(deps, store))


@pytest.mark.parametrize("meanwhile", ["an-edit", "a-new-supersede"])
def test_a_reinstate_racing_another_write_keeps_that_write(deps, store, monkeypatch, meanwhile):
    """The reinstate is written over the version it read: an edit that lands first is kept (and the memory
    still comes back); a new supersede that lands first is not undone."""
    from memlane.services import memories

    paris = paris_then_berlin(deps, store)
    (elsewhere,) = explicit.write(deps, store, scope=run_of("c"),
                                  memories=[{"text": "Ann lives in Lyon.", "memory_id": "lyon"}]).memories
    repo_type, fired = type(deps.repo), []
    original = repo_type.put_memory

    def other_write_first(repo, store_, memory, **kwargs):
        if memory.memory_id == paris and not fired:
            fired.append(True)
            if meanwhile == "an-edit":
                memories.update(deps, store, app_id=APP, tenant_id=TENANT, memory_id=paris, importance=0.9)
            else:
                now = deps.repo.get_memory(store, APP, TENANT, paris)
                original(repo, store, now.model_copy(update={"superseded_by": "lyon", "updated_at": deps.clock.now(),
                                                             "valid_to": elsewhere.created_at}), previous=now)
        return original(repo, store_, memory, **kwargs)

    monkeypatch.setattr(repo_type, "put_memory", other_write_first)
    erase.delete_run(deps, store, scope=run_of("b"))
    assert fired
    if meanwhile == "an-edit":
        assert deps.repo.get_memory(store, APP, TENANT, paris).importance == 0.9
        assert_back(deps, store, paris)
    else:
        kept = deps.repo.get_memory(store, APP, TENANT, paris)
        assert kept.status == MemoryStatus.SUPERSEDED and kept.superseded_by == "lyon"
        assert paris not in {h.memory.memory_id for h in ask(deps, store)}


def test_a_store_of_another_embedder_gets_its_reinstated_memories_at_its_reindex(tmp_path, minilm):
    """The process that deletes the run may embed with another model than the store's vectors (a changed
    setting): the deletion is not refused for it — the memory is current again in the table, and the reindex
    that the store needs before any search indexes it with the rest."""
    from memlane.adapters.embedders.hashing import HashingEmbedder
    from memlane.bootstrap import build_local
    from memlane.config import Settings
    from memlane.services.reindex import reindex

    data = tmp_path / "data"
    first = build_local(Settings.from_env(env={}, data_dir=data, reranker="none"), embedder=minilm)
    stores.create(first.deps, name="demo")
    paris = paris_then_berlin(first.deps, "demo")
    first.close()
    # Another dimension too: its vectors could not even be written to the store's index.
    second = build_local(Settings.from_env(env={}, data_dir=data, reranker="none"), embedder=HashingEmbedder(dim=64))
    try:
        deps = second.deps
        erase.delete_run(deps, "demo", scope=run_of("b"))
        assert deps.repo.get_memory("demo", APP, TENANT, paris).status == MemoryStatus.ACTIVE
        with pytest.raises(Conflict):
            ask(deps, "demo")
        reindex(deps, "demo")
        assert [h.memory.memory_id for h in ask(deps, "demo", "Paris")][:1] == [paris]
    finally:
        second.close()


# -- races with other writers (regression trial of 3b4945f; each fails before its fix) --------------------------


def chain(deps, store):
    """Paris (run a) -> Berlin (run b) -> Rome (run c)."""
    paris = say(deps, store, "I live in Paris.", day=0, run="a").outcomes[0].memory_id
    (berlin,) = say(deps, store, "I moved from Paris to Berlin.", day=30, run="b").outcomes
    assert berlin.action == ExtractAction.UPDATE and berlin.target_id == paris
    (rome,) = say(deps, store, "I moved from Berlin to Rome.", day=60, run="c").outcomes
    assert rome.action == ExtractAction.UPDATE and rome.target_id == berlin.memory_id
    return paris, berlin.memory_id, rome.memory_id


def no_dangling(deps, store):
    held = {m.memory_id: m for m in deps.repo.iter_memories(store, APP, TENANT)}
    for m in held.values():
        assert m.superseded_by in (None, *held), f"{m.memory_id} superseded by missing {m.superseded_by}"
        assert m.supersedes in (None, *held), f"{m.memory_id} supersedes missing {m.supersedes}"


def test_two_run_deletions_interleaved_lose_the_first_memory(deps, store, monkeypatch):
    """DELETE run b and DELETE run c at the same time (both list the tenant's memories before either
    reinstates). Sequentially Paris ends ACTIVE; interleaved it ends SUPERSEDED by Rome, which is gone."""
    paris, berlin, rome = chain(deps, store)
    original, fired = erase.reinstate, []

    def slow_reinstate(d, s, deleted, others=None):
        others = list(others) if others is not None else None  # b's listing is already taken here
        if not fired:
            fired.append(True)
            erase.delete_run(deps, store, scope=run_of("c"))  # the other request runs whole meanwhile
        return original(d, s, deleted, others)

    monkeypatch.setattr(erase, "reinstate", slow_reinstate)
    erase.delete_run(deps, store, scope=run_of("b"))
    assert fired
    m = deps.repo.get_memory(store, APP, TENANT, paris)
    assert (m.status, m.superseded_by) == (MemoryStatus.ACTIVE, None), m
    assert paris in {h.memory.memory_id for h in ask(deps, store)}
    no_dangling(deps, store)


def test_an_extraction_that_supersedes_the_deleted_memory_mid_deletion(deps, store, monkeypatch):
    """Run c's extraction supersedes Berlin (run b) after the deletion of run b listed the memories but
    before it reinstated: Paris comes back ACTIVE beside Rome, and Rome keeps a link to the deleted Berlin.
    Expected: as the sequential order gives, Paris superseded by Rome, Rome.supersedes == Paris."""
    paris = say(deps, store, "I live in Paris.", day=0, run="a").outcomes[0].memory_id
    (berlin,) = say(deps, store, "I moved from Paris to Berlin.", day=30, run="b").outcomes
    index_type = type(deps.index)
    original, fired, rome = index_type.delete, [], []

    def delete_after_the_extraction(index, *args, **kwargs):
        # clear_run has listed the tenant's memories; run c's add (another request) lands now
        if not fired:
            fired.append(True)
            monkeypatch.setattr(index_type, "delete", original)
            (o,) = say(deps, store, "I moved from Berlin to Rome.", day=60, run="c").outcomes
            assert o.action == ExtractAction.UPDATE and o.target_id == berlin.memory_id
            rome.append(o.memory_id)
        return original(index, *args, **kwargs)

    monkeypatch.setattr(index_type, "delete", delete_after_the_extraction)
    erase.delete_run(deps, store, scope=run_of("b"))
    assert fired
    current = {h.memory.memory_id for h in ask(deps, store)}
    assert not (paris in current and rome[0] in current), "Paris and Rome both current"
    no_dangling(deps, store)


def test_a_profile_rebuilt_by_the_deletion_misses_the_reinstated_memory(deps, store):
    """redaction.redact rebuilds the profiles from the ACTIVE memories before reinstate runs: the memory
    that comes back is not in them. A fresh distillation says 'lives in: Boston'; the deletion leaves none."""
    for run, day, text in (("r1", 0, "I live in Boston."), ("r2", 9, "I moved from Boston to Denver.")):
        ingest.add(deps, store, scope=run_of(run), sync=True,
                   messages=[{"role": "user", "name": "Ann", "content": text, "created_at": T0 + timedelta(days=day)}])
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, sync=True,
                kinds=[DreamActionKind.EMIT_PROFILE], mode=DreamMode.SAFE_AUTO)
    before = profiles.tenant_profile(deps, store, APP, TENANT)
    assert any("Denver" in f.value for f in before.attributes)
    erase.delete_run(deps, store, scope=run_of("r2"))
    boston = [m for m in deps.repo.iter_memories(store, APP, TENANT) if "Boston" in m.text]
    assert boston and boston[0].status == MemoryStatus.ACTIVE  # reinstated
    after = profiles.tenant_profile(deps, store, APP, TENANT)
    values = {(f.name, f.value) for f in after.attributes} if after else set()
    assert any("Boston" in v for _, v in values), values


def test_a_fact_another_thread_said_again_stays_when_the_first_thread_is_deleted(deps, store):
    """Deleting a thread took away a fact another thread, still there, had said again: write time had not stored
    it twice (NOOP), so the only memory of it went with the first thread. It is written in the other thread now,
    in that thread's words, and that add's task says ADD."""
    first = say(deps, store, "I am allergic to peanuts.", day=0, run="a").outcomes[0]
    again = say(deps, store, "I am allergic to peanuts!", day=5, run="b")
    assert [(o.action, o.target_id) for o in again.outcomes] == [(ExtractAction.NOOP, first.memory_id)]
    erase.delete_run(deps, store, scope=run_of("a"))
    (kept,) = deps.repo.iter_memories(store, APP, TENANT)
    assert kept.scope.run_id == "b" and kept.status == MemoryStatus.ACTIVE and "peanuts!" in kept.text
    assert set(kept.evidence) <= set(again.message_ids)
    assert [h.memory.memory_id for h in ask(deps, store, "What is the user allergic to?")] == [kept.memory_id]
    task = deps.repo.get_task(store, APP, TENANT, again.request_id)
    assert [(o.action, o.memory_id) for o in task.outcomes] == [(ExtractAction.ADD, kept.memory_id)]
    erase.delete_run(deps, store, scope=run_of("a"))  # again (a retry): nothing more
    assert [m.memory_id for m in deps.repo.iter_memories(store, APP, TENANT)] == [kept.memory_id]
    erase.delete_run(deps, store, scope=run_of("b"))  # and the fact goes with the last thread that said it
    assert list(deps.repo.iter_memories(store, APP, TENANT)) == []
    no_stale_links(deps, store)


def test_a_fact_said_again_takes_its_time_from_the_thread_it_stays_in(deps, store):
    """A trial (session 32): the fact written into the other thread kept the deleted memory's event time — "last
    week" as the deleted thread said it, two weeks before: the deleted conversation's day stayed. It is read from
    the turn that said it again, as that thread's extraction would have."""
    first = say(deps, store, "I started at Google last week.", day=0, run="a").outcomes[0]
    again = say(deps, store, "I started at Google last week.", day=14, run="b")
    assert [o.action for o in again.outcomes] == [ExtractAction.NOOP]
    alone = deps.repo.get_memories(store, APP, TENANT, [first.memory_id])[0]
    erase.delete_run(deps, store, scope=run_of("a"))
    (kept,) = deps.repo.iter_memories(store, APP, TENANT)
    assert kept.scope.run_id == "b" and kept.event_time == alone.event_time + timedelta(days=14)


def test_a_fact_said_in_three_threads_stays_with_the_last_one_and_never_in_a_thread_that_stores_nothing(
        deps, store):
    """The third regression trial of the re-homing: a thread switched since to a policy that stores nothing got the
    fact written into it; and with three threads saying it, the third's repeat stayed pointed at the first memory,
    was emptied by its redaction, and deleting the second thread lost the fact though the third still said it."""
    from memlane.services import scopes

    first = say(deps, store, "I am allergic to peanuts.", day=0, run="a").outcomes[0]
    for day, run in ((3, "quiet"), (5, "b"), (7, "c")):
        (again,) = say(deps, store, "I am allergic to peanuts!", day=day, run=run).outcomes
        assert (again.action, again.target_id) == (ExtractAction.NOOP, first.memory_id)
    scopes.set_access_policy(deps, store, scope=run_of("quiet"), policy="recall_only")
    erase.delete_run(deps, store, scope=run_of("a"))
    assert [m.scope.run_id for m in deps.repo.iter_memories(store, APP, TENANT)] == ["b"]
    erase.delete_run(deps, store, scope=run_of("b"))
    (kept,) = deps.repo.iter_memories(store, APP, TENANT)
    assert kept.scope.run_id == "c" and kept.status == MemoryStatus.ACTIVE
    assert [h.memory.memory_id for h in ask(deps, store, "What is the user allergic to?")] == [kept.memory_id]


def test_a_thread_deleted_while_a_fact_is_written_into_it_keeps_nothing(deps, store, monkeypatch):
    """The same trial: the other thread's whole deletion ran while the first deletion wrote its memory there, after
    checking it was there: an active memory stayed in a deleted thread, its evidence a deleted turn."""
    from memlane.services import rehome

    say(deps, store, "I am allergic to peanuts.", day=0, run="a")
    say(deps, store, "I am allergic to peanuts!", day=5, run="b")
    real = rehome._statement

    def meanwhile(*args, **kwargs):
        made = real(*args, **kwargs)
        monkeypatch.setattr(rehome, "_statement", real)
        erase.delete_run(deps, store, scope=run_of("b"))
        return made

    monkeypatch.setattr(rehome, "_statement", meanwhile)
    erase.delete_run(deps, store, scope=run_of("a"))
    assert list(deps.repo.iter_memories(store, APP, TENANT)) == []
    assert ask(deps, store, "What is the user allergic to?") == []
