"""Add: atomic writes, idempotency on request_id, refusals that leave nothing behind."""

from datetime import datetime, timezone

import pytest

from memlane.domain.errors import Conflict, InvalidInput, InvalidScope, NotFound, PayloadTooLarge
from memlane.domain.limits import MAX_MESSAGES_PER_ADD
from memlane.domain.models import TaskStatus
from memlane.repository import tenant_pk
from memlane.services import ingest, messages, stores, tasks

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
CONVO = [
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Max last Saturday."},
    {"role": "assistant", "content": "Congratulations! Beagles are lovely dogs."},
]


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def all_items(deps, pk):
    return deps.table.query(pk, limit=1000).items


def test_add_stores_messages_and_pending_task(deps, store):
    task = ingest.add(deps, store, scope=SCOPE, messages=CONVO)
    assert task.status == TaskStatus.PENDING
    found, cursor = messages.list_(deps, store, scope=SCOPE, limit=10, cursor=None)
    assert [m.content for m in found] == [c["content"] for c in CONVO]  # readable at once, in order
    assert found[0].name == "Ann" and cursor is None
    assert tasks.get(deps, store, task.request_id).message_ids == [m.message_id for m in found]


def test_add_defaults_scope_fields(deps, store):
    task = ingest.add(deps, store, scope={"app_id": "app"}, text="Paris is the capital of France.")
    assert task.scope.tenant_id == task.scope.agent_id == task.scope.run_id == "__default__"


def test_replay_with_same_request_id_creates_nothing_new(deps, store):
    first = ingest.add(deps, store, scope=SCOPE, messages=CONVO, request_id="req-1")
    before = all_items(deps, tenant_pk(store, "app", "u1"))
    again = ingest.add(deps, store, scope=SCOPE, messages=CONVO, request_id="req-1")
    assert again.request_id == first.request_id == "req-1"
    assert all_items(deps, tenant_pk(store, "app", "u1")) == before


def test_request_id_reused_for_another_scope_is_a_conflict(deps, store):
    ingest.add(deps, store, scope=SCOPE, messages=CONVO, request_id="req-1")
    with pytest.raises(Conflict) as e:
        ingest.add(deps, store, scope={**SCOPE, "run_id": "r2"}, messages=CONVO, request_id="req-1")
    assert e.value.code == "request_id_reused"
    assert [i["sk"] for i in all_items(deps, tenant_pk(store, "app", "u1")) if "r2" in i["sk"].split("#")] == []


def test_request_ids_are_per_tenant(deps, store):
    ingest.add(deps, store, scope=SCOPE, messages=CONVO, request_id="req-1")
    theirs = ingest.add(deps, store, scope={**SCOPE, "tenant_id": "u2"}, messages=CONVO, request_id="req-1")
    assert theirs.scope.tenant_id == "u2"
    assert [i["sk"] for i in all_items(deps, tenant_pk(store, "app", "u2")) if i["sk"].startswith("TASK#")] == \
        ["TASK#req-1"]


@pytest.mark.parametrize("kwargs, error, field", [
    ({"scope": {"tenant_id": "u1"}, "messages": CONVO}, InvalidScope, "scope.app_id"),
    ({"scope": {**SCOPE, "run_id": "*"}, "messages": CONVO}, InvalidScope, "scope.run_id"),
    ({"scope": {**SCOPE, "tenant_id": "u1#x"}, "messages": CONVO}, InvalidScope, "scope.tenant_id"),
    ({"scope": SCOPE, "messages": []}, InvalidInput, "messages"),
    ({"scope": SCOPE}, InvalidInput, "messages"),
    ({"scope": SCOPE, "messages": CONVO, "text": "both"}, InvalidInput, "messages"),
    ({"scope": SCOPE, "messages": [{"role": "robot", "content": "x"}]}, InvalidInput, "messages[0].role"),
    ({"scope": SCOPE, "messages": [CONVO[0], {"role": "user", "content": "  "}]}, InvalidInput,
     "messages[1].content"),
    ({"scope": SCOPE, "messages": [{"role": "user", "content": "x" * 40_000}]}, PayloadTooLarge,
     "messages[0].content"),
    ({"scope": SCOPE, "messages": [CONVO[0]] * (MAX_MESSAGES_PER_ADD + 1)}, PayloadTooLarge, "messages"),
    ({"scope": SCOPE, "messages": CONVO, "metadata": {"a": {"b": {"c": {"d": {"e": 1}}}}}}, InvalidInput,
     "metadata"),
    ({"scope": SCOPE, "messages": CONVO, "request_id": "bad id"}, InvalidInput, "request_id"),
    # before 1970 a message's id would sort as the newest (its time prefix wraps)
    ({"scope": SCOPE, "messages": [{**CONVO[0], "created_at": datetime(1965, 3, 1, tzinfo=timezone.utc)}]},
     InvalidInput, "messages[0].created_at"),
    # a trial: a turn dated 2099 stayed the thread's newest for good, and made each later add refresh its summary
    ({"scope": SCOPE, "messages": [{**CONVO[0], "created_at": datetime(2099, 1, 1, tzinfo=timezone.utc)}]},
     InvalidInput, "messages[0].created_at"),
    # named by the message that said it (the untimed one before takes its time)
    ({"scope": SCOPE, "messages": [CONVO[0], {**CONVO[1], "created_at": datetime(2099, 1, 1, tzinfo=timezone.utc)}]},
     InvalidInput, "messages[1].created_at"),
])
def test_bad_input_refused_and_nothing_written(deps, store, kwargs, error, field):
    with pytest.raises(error) as e:
        ingest.add(deps, store, **kwargs)
    assert e.value.field == field
    assert all_items(deps, tenant_pk(store, "app", "u1")) == []


def test_unknown_store(deps):
    with pytest.raises(NotFound) as e:
        ingest.add(deps, "nope", scope=SCOPE, messages=CONVO)
    assert e.value.code == "store_not_found"


def test_message_pagination(deps, store):
    many = [{"role": "user", "content": f"message number {i}"} for i in range(25)]
    ingest.add(deps, store, scope=SCOPE, messages=many)
    seen, cursor = [], None
    while True:
        page, cursor = messages.list_(deps, store, scope=SCOPE, limit=7, cursor=cursor)
        seen += [m.content for m in page]
        if cursor is None:
            break
    assert seen == [m["content"] for m in many]
    newest, _ = messages.list_(deps, store, scope=SCOPE, limit=1, cursor=None, newest_first=True)
    assert newest[0].content == "message number 24"


def test_message_reads_need_all_four_scope_fields(deps, store):
    with pytest.raises(InvalidScope):
        messages.list_(deps, store, scope={"app_id": "app", "tenant_id": "u1", "agent_id": "bot"}, limit=5,
                       cursor=None)


def test_untimed_message_takes_its_neighbours_time_not_the_server_clock(deps, store):
    """An assistant reply without created_at between two turns of 2025 belongs to 2025 and sorts
    between them, not after the turn that followed it."""
    from datetime import datetime, timezone

    t1, t2 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc), datetime(2025, 3, 1, 9, 5, tzinfo=timezone.utc)
    convo = [{"role": "user", "content": "I live in Boston.", "created_at": t1},
             {"role": "assistant", "content": "Noted, Boston it is."},
             {"role": "user", "content": "And I work as a nurse.", "created_at": t2}]
    ingest.add(deps, store, scope=SCOPE, messages=convo)
    found, _ = messages.list_(deps, store, scope=SCOPE, limit=10, cursor=None)
    assert [m.content for m in found] == [c["content"] for c in convo]
    assert [m.created_at for m in found] == [t1, t1, t2]


def test_untimed_first_message_takes_the_next_messages_time(deps, store):
    from datetime import datetime, timezone

    t2 = datetime(2024, 7, 4, 12, 0, tzinfo=timezone.utc)
    convo = [{"role": "user", "content": "Quick question about my order."},
             {"role": "user", "content": "It was placed last week.", "created_at": t2}]
    ingest.add(deps, store, scope=SCOPE, messages=convo)
    found, _ = messages.list_(deps, store, scope=SCOPE, limit=10, cursor=None)
    assert [m.created_at for m in found] == [t2, t2]


def test_an_add_dated_ahead_that_was_accepted_before_the_check_still_replays(deps, store, monkeypatch):
    """A trial: re-running an import after upgrading refused the lines an earlier version had accepted with a date
    far ahead, where the docs say a re-run replays what is in."""
    from datetime import timedelta

    ahead = {**CONVO[0], "created_at": datetime(2099, 1, 1, tzinfo=timezone.utc)}
    monkeypatch.setattr(ingest, "MAX_AHEAD", timedelta(days=365 * 200))  # the version before the check
    first = ingest.accept(deps, store, scope=SCOPE, messages=[ahead], request_id="imp-1")
    monkeypatch.undo()
    again = ingest.accept(deps, store, scope=SCOPE, messages=[ahead], request_id="imp-1")
    assert again.replayed and again.task.request_id == first.task.request_id
    with pytest.raises(InvalidInput):
        ingest.accept(deps, store, scope=SCOPE, messages=[ahead], request_id="imp-2")


def test_a_time_that_is_no_date_time_is_refused_not_taken_for_now(deps, store):
    """An in-process caller's ISO string was dropped, and the message stamped with the server's clock: a trial's
    history of a year told as one day (session 29). The HTTP API parses the string before; the service refuses."""
    with pytest.raises(InvalidInput) as refused:
        ingest.add(deps, store, scope={"app_id": "a", "tenant_id": "t"},
                   messages=[{"role": "user", "content": "I live in Boston.", "created_at": "2025-01-05T10:00:00Z"}])
    assert refused.value.field == "messages[0].created_at"
    assert not deps.table.query(tenant_pk(store, "a", "t"), prefix="MSG#", limit=10).items
