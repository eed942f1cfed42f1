"""request_id: a replay of the same add returns the first task; the same id with another body is
refused (409 request_id_reused); ids are namespaced per tenant, so no tenant can squat another's."""

import pytest

from memlane.domain.errors import Conflict, InvalidInput
from memlane.domain.models import TaskStatus
from memlane.repository import tenant_pk
from memlane.services import ingest, stores, tasks

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
CONVO = [
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Max last Saturday."},
    {"role": "assistant", "content": "Congratulations! Beagles are lovely dogs."},
]


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def items(deps, store, tenant="u1"):
    return deps.table.query(tenant_pk(store, "app", tenant), limit=1000).items


def first_add(deps, store, **changes):
    return ingest.add(deps, store, **{"scope": SCOPE, "messages": CONVO, "metadata": {"channel": "chat"},
                                      "request_id": "req-1", **changes})


@pytest.mark.parametrize("changes", [
    {"messages": [CONVO[0]]},
    {"messages": [{**CONVO[0], "content": "I adopted a cat."}, CONVO[1]]},
    {"messages": None, "text": "Ann adopted a beagle."},
    {"metadata": {"channel": "email"}},
    {"metadata": None},
    {"scope": {**SCOPE, "run_id": "r2"}},
    {"scope": {**SCOPE, "agent_id": "other"}},
    {"access_policy": "recall_only"},
], ids=["fewer-messages", "other-content", "text", "other-metadata", "no-metadata", "other-run", "other-agent",
        "access-policy"])
def test_request_id_reused_with_another_body_is_refused_and_writes_nothing(deps, store, changes):
    first_add(deps, store)
    before = items(deps, store)

    with pytest.raises(Conflict) as e:
        first_add(deps, store, **changes)

    assert (e.value.code, e.value.field) == ("request_id_reused", "request_id")
    assert items(deps, store) == before


def test_a_replay_of_the_same_body_returns_the_first_task_whatever_sync_says(deps, store):
    first = first_add(deps, store)
    before = items(deps, store)
    # the same request, keys in another order and sync on: still the same body
    again = ingest.add(deps, store, request_id="req-1", sync=True, metadata={"channel": "chat"},
                       messages=[dict(reversed(list(m.items()))) for m in CONVO], scope=dict(reversed(SCOPE.items())))
    assert again.request_id == first.request_id and again.created_at == first.created_at
    assert items(deps, store) == before


def test_a_replay_that_only_spells_out_the_defaults_is_the_same_body(deps, store):
    ingest.add(deps, store, scope={"app_id": "app"}, text="Paris is the capital of France.", request_id="req-d")
    again = ingest.add(deps, store, scope={"app_id": "app", "tenant_id": "__default__", "agent_id": "__default__",
                                           "run_id": "__default__"}, text="Paris is the capital of France.",
                       request_id="req-d")
    assert again.request_id == "req-d"


def test_another_tenant_may_use_the_same_request_id_without_touching_the_first(service, deps, store):
    mine = first_add(deps, store)
    theirs = first_add(deps, store, scope={**SCOPE, "tenant_id": "u2"},
                       messages=[{"role": "user", "content": "I play the cello."}])
    service.drain()

    assert theirs.request_id == mine.request_id == "req-1"
    assert theirs.scope.tenant_id == "u2"
    one = tasks.get(deps, store, "req-1", app_id="app", tenant_id="u1")
    two = tasks.get(deps, store, "req-1", app_id="app", tenant_id="u2")
    assert one.status == two.status == TaskStatus.SUCCEEDED  # each job ran in its own tenant
    assert one.message_ids != two.message_ids
    assert [i["content"] for i in items(deps, store, "u2") if i["sk"].startswith("MSG#")] == ["I play the cello."]


def test_a_task_named_only_by_its_request_id_needs_the_tenant_once_two_tenants_share_it(deps, store):
    first_add(deps, store)
    assert tasks.get(deps, store, "req-1").scope.tenant_id == "u1"  # unique: found without the tenant
    first_add(deps, store, scope={**SCOPE, "tenant_id": "u2"})
    with pytest.raises(InvalidInput) as e:
        tasks.get(deps, store, "req-1")
    assert e.value.code == "tenant_required"
    assert tasks.get(deps, store, "req-1", app_id="app", tenant_id="u2").scope.tenant_id == "u2"


@pytest.mark.parametrize("request_id", [".", "..", "..."])
def test_a_request_id_of_dots_alone_is_refused_and_writes_nothing(deps, store, request_id):
    """An intra-tenant trial: `..` was accepted (202), and its task could not be polled — clients rewrite a dot
    segment of a path (`GET .../tasks/..`) — as scope ids and memory ids already refuse it."""
    with pytest.raises(InvalidInput) as refused:
        first_add(deps, store, request_id=request_id)
    assert refused.value.field == "request_id"
    assert items(deps, store) == []


def test_a_task_whose_id_of_dots_an_older_version_took_is_still_read(deps, store, monkeypatch):
    """The regression trial: the refusal of dots alone also refused reading tasks an older version had accepted."""
    from memlane.domain import validation

    with monkeypatch.context() as older:
        older.setattr(validation, "_REQUEST_ID", validation._STORED_REQUEST_ID)
        first_add(deps, store, request_id="...")
    assert tasks.get(deps, store, "...", app_id="app", tenant_id="u1").request_id == "..."
