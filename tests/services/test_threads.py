"""Threads: a run made explicit — created with a stable id, listed newest activity first, deleted whole."""

from datetime import timedelta

import pytest

from memlane.domain.errors import Conflict, InvalidInput, NotFound
from memlane.domain.models import AccessPolicy, MemoryStatus
from memlane.repository import tenant_pk
from memlane.services import explicit, extract, ingest, search, stores, threads

TENANT = {"app_id": "app", "tenant_id": "ann"}


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def say(deps, store, run, *contents, agent="bot", request_id=None):
    return ingest.add(deps, store, scope={**TENANT, "agent_id": agent, "run_id": run},
                      messages=[{"role": "user", "content": c} for c in contents], request_id=request_id)


def test_create_is_idempotent_on_the_thread_id(deps, store):
    made, created = threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="t-1",
                                   access_policy=AccessPolicy.RECALL_ONLY, metadata={"topic": "trip"})
    assert created and made.scope.run_id == "t-1" and made.access_policy == AccessPolicy.RECALL_ONLY
    assert made.metadata == {"topic": "trip"} and made.message_count == made.token_count == 0
    again, created = threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="t-1",
                                    access_policy=AccessPolicy.RECALL_ONLY, metadata={"topic": "trip"})
    assert not created and again == made
    assert threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="t-1") == made


def test_a_thread_id_names_one_thread_of_the_tenant(deps, store):
    threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="t-1")
    with pytest.raises(Conflict) as e:
        threads.create(deps, store, scope={**TENANT, "agent_id": "other-bot"}, thread_id="t-1")
    assert (e.value.code, e.value.field) == ("thread_exists", "scope.agent_id")
    with pytest.raises(Conflict) as e:
        threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="t-1", metadata={"x": 1})
    assert (e.value.code, e.value.field) == ("thread_exists", "metadata")
    with pytest.raises(Conflict) as e:
        threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="t-1",
                       access_policy=AccessPolicy.NONE)
    assert e.value.code == "access_policy_mismatch"
    # nothing of the refused creates was written
    assert threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="t-1").metadata == {}
    with pytest.raises(NotFound):
        threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="t-1", agent_id="other-bot")
    # another tenant's thread of the same id is its own
    theirs, created = threads.create(deps, store, scope={"app_id": "app", "tenant_id": "bob", "agent_id": "x"},
                                     thread_id="t-1")
    assert created and theirs.scope.tenant_id == "bob"


def test_adds_count_messages_and_tokens_in_the_thread(deps, store):
    threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="t-1")
    say(deps, store, "t-1", "I am flying to Lisbon on Friday.", "Unbelievably, tokenization happens.")
    say(deps, store, "t-1", "Book a window seat.")
    found = threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="t-1")
    expected = sum(deps.tokenizer.count_many(["I am flying to Lisbon on Friday.", "Unbelievably, tokenization happens.",
                                              "Book a window seat."]))
    assert found.message_count == 3 and found.token_count == expected
    assert expected > len("I am flying to Lisbon on Friday. Unbelievably, tokenization happens. Book a window "
                          "seat.".split())  # model tokens, not words
    # a replayed add counts nothing twice
    say(deps, store, "t-1", "Book a window seat.", request_id="r-1")
    say(deps, store, "t-1", "Book a window seat.", request_id="r-1")
    assert threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="t-1").message_count == 4


def test_a_run_started_by_an_add_is_a_thread(deps, store):
    say(deps, store, "conv-9", "Hello there.")
    found = threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="conv-9")
    assert found.scope.agent_id == "bot" and found.message_count == 1
    again, created = threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="conv-9")
    assert not created and again == found


def test_list_newest_activity_first_with_a_cursor(deps, store, monkeypatch):
    clock = deps.clock
    start = clock.now()
    for n, run in enumerate(["a", "b", "c", "d", "e"]):
        monkeypatch.setattr(clock, "now", lambda n=n: start + timedelta(seconds=n))
        say(deps, store, run, f"message in {run}", agent="bot" if run != "c" else "helper")
    monkeypatch.setattr(clock, "now", lambda: start + timedelta(seconds=10))
    say(deps, store, "b", "b again")  # b moves to the front
    first, cursor = threads.list_(deps, store, app_id="app", tenant_id="ann", limit=2, cursor=None)
    assert [t.scope.run_id for t in first] == ["b", "e"] and cursor
    rest, cursor = threads.list_(deps, store, app_id="app", tenant_id="ann", limit=10, cursor=cursor)
    assert [t.scope.run_id for t in rest] == ["d", "c", "a"] and cursor is None
    bots, _ = threads.list_(deps, store, app_id="app", tenant_id="ann", agent_id="bot", limit=10, cursor=None)
    assert [t.scope.run_id for t in bots] == ["b", "e", "d", "a"]
    # one entry per run in the order: the move deleted b's old place
    order = [i["sk"] for i in deps.table.query(tenant_pk(store, "app", "ann"), prefix="RECENT#").items]
    assert len(order) == 5
    with pytest.raises(InvalidInput) as e:
        threads.list_(deps, store, app_id="app", tenant_id="ann", limit=10, cursor="not-a-cursor")
    assert e.value.code == "invalid_cursor"


def test_delete_takes_the_thread_and_leaves_tenant_memories(deps, store):
    threads.create(deps, store, scope={**TENANT, "agent_id": "bot"}, thread_id="t-1")
    task = ingest.add(deps, store, scope={**TENANT, "agent_id": "bot", "run_id": "t-1"},
                      messages=[{"role": "user", "content": "My sister Clara lives in Porto."}])
    extract.run(deps, store, task.request_id, app_id="app", tenant_id="ann")
    explicit.write(deps, store, scope=TENANT, memories=[{"text": "Ann is vegetarian."}])
    assert len(search.search(deps, store, query="Clara Porto", scope={**TENANT, "run_id": "*"}, top_k=5)) == 2

    gone = threads.delete(deps, store, app_id="app", tenant_id="ann", thread_id="t-1")
    assert gone["messages"] == 1 and gone["memories"] >= 1
    pk = tenant_pk(store, "app", "ann")
    left = [i["sk"] for i in deps.table.query(pk, limit=1000).items]
    assert not [sk for sk in left if sk.startswith(("MSG#", "RECENT#", "THREAD#", "SCOPE#bot#t-1"))]
    hits = search.search(deps, store, query="Clara Porto vegetarian", scope={**TENANT, "run_id": "*"}, top_k=5)
    assert [h.memory.text for h in hits] == ["Ann is vegetarian."]
    assert hits[0].memory.status == MemoryStatus.ACTIVE
    with pytest.raises(NotFound) as e:
        threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="t-1")
    assert e.value.code == "thread_not_found"
    with pytest.raises(NotFound):
        threads.delete(deps, store, app_id="app", tenant_id="ann", thread_id="t-1")
    # the id is free again, even for another agent
    assert threads.create(deps, store, scope={**TENANT, "agent_id": "other"}, thread_id="t-1")[1]


def test_deleting_a_thread_that_holds_only_explicit_memories_deletes_them(deps, store):
    """A trial's finding: memories written to a run with `infer: false` make no thread in the registry, so its
    DELETE answered 404 thread_not_found and the memories stayed (DELETE .../runs/{id} deleted them)."""
    explicit.write(deps, store, scope={**TENANT, "agent_id": "bot", "run_id": "t-7"},
                   memories=[{"text": "Ann's locker code is 5521."}])
    explicit.write(deps, store, scope=TENANT, memories=[{"text": "Ann is vegetarian."}])
    gone = threads.delete(deps, store, app_id="app", tenant_id="ann", thread_id="t-7", agent_id="bot")
    assert gone["memories"] == 1
    hits = search.search(deps, store, query="locker code vegetarian", scope={**TENANT, "run_id": "*"}, top_k=5)
    assert [h.memory.text for h in hits] == ["Ann is vegetarian."]
    with pytest.raises(NotFound):  # nothing left of it
        threads.delete(deps, store, app_id="app", tenant_id="ann", thread_id="t-7", agent_id="bot")


def test_the_largest_add_stays_within_one_transaction(deps, store):
    """96 messages + the task + the thread's entry, its order item moved (or created) and its id claim: at most
    100 writes, DynamoDB's limit for one transaction (the local table refuses more too)."""
    from memlane.domain.limits import MAX_MESSAGES_PER_ADD

    seen = []
    transact = deps.table.transact

    def counting(writes):
        seen.append(len(writes))
        return transact(writes)

    deps.table.transact = counting
    for _ in range(2):  # a new run (entry, order item, claim), then the same run again (entry, order moved)
        say(deps, store, "big", *[f"turn {i}" for i in range(MAX_MESSAGES_PER_ADD)])
    assert max(seen) <= 100 and threads.get(deps, store, app_id="app", tenant_id="ann",
                                            thread_id="big").message_count == 2 * MAX_MESSAGES_PER_ADD


def test_concurrent_creates_and_adds_agree_on_one_thread(deps, store):
    """Creates of one thread id by two agents and adds to it race: one agent owns the id, every create
    answers that thread or 409, and no add's messages or tokens are lost from its counts."""
    from concurrent.futures import ThreadPoolExecutor

    def create(n):
        try:
            return threads.create(deps, store, scope={**TENANT, "agent_id": f"agent-{n % 2}"}, thread_id="hot")[0]
        except Conflict as error:
            return error.code

    def add(n):
        return say(deps, store, "hot", f"message {n}", agent="agent-0")

    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(create, range(16)))
        list(pool.map(add, range(16)))
    owner = threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="hot")
    assert {m.scope.agent_id if not isinstance(m, str) else m for m in made} <= {owner.scope.agent_id, "thread_exists"}
    added = threads.get(deps, store, app_id="app", tenant_id="ann", thread_id="hot", agent_id="agent-0")
    assert added.message_count == 16
    assert added.token_count == sum(deps.tokenizer.count_many([f"message {n}" for n in range(16)]))
    order = [i for i in deps.table.query(tenant_pk(store, "app", "ann"), prefix="RECENT#").items]
    assert len([i for i in order if i["run_id"] == "hot"]) == len({(i["agent_id"]) for i in order})
