"""Extraction context through the service: an agent that adds one exchange at a time gets the memories
a whole-session add gets; the earlier messages come from the same run only and are never extracted
again; the store's extract_roles decide whose turns are extracted."""

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memlane.api.app import build_api
from memlane.domain.errors import InvalidInput
from memlane.domain.models import MemoryStatus
from memlane.services import ingest, stores
from tests.isolation.api_events import api_event

T = datetime(2024, 3, 11, 10, 0, tzinfo=timezone.utc)


def turn(i, role, content):
    return {"role": role, "content": content, "created_at": T + timedelta(minutes=i),
            **({"name": "Ann"} if role == "user" else {})}


CONVO = [
    turn(1, "user", "We finally closed on the house in Denver last Friday."),
    turn(2, "assistant", "Congratulations! Did you get the keys yesterday?"),
    turn(3, "user", "Yes!"),
    turn(4, "assistant", "So the movers are booked for next Saturday at 9am."),
    turn(5, "user", "Exactly."),
    turn(6, "assistant", "How is your daughter settling in at the new school?"),
    turn(7, "user", "She loves it, her teacher says she is already reading chapter books."),
]
EXCHANGES = [CONVO[0:2], CONVO[2:4], CONVO[4:6], CONVO[6:7]]


def scope(tenant, run="r1", agent="bot"):
    return {"app_id": "app", "tenant_id": tenant, "agent_id": agent, "run_id": run}


def memories(deps, store, tenant):
    """(text, evidence as the contents of the cited messages) of the tenant's active memories."""
    found = [m for m in deps.repo.iter_memories(store, "app", tenant) if m.status == MemoryStatus.ACTIVE]
    out = []
    for m in found:
        cited = deps.repo.get_messages(store, m.scope, m.evidence)
        out.append((m.text, tuple(sorted(c.content for c in cited)), m.event_time, m.request_id))
    return out


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo", extract_roles=["user", "assistant_confirmed"]).name


def test_one_exchange_per_add_extracts_what_a_whole_session_add_does(service, deps, store):
    ingest.add(deps, store, scope=scope("whole"), messages=CONVO)
    for exchange in EXCHANGES:
        ingest.add(deps, store, scope=scope("live"), messages=exchange)
    service.drain()
    whole = sorted(x[:3] for x in memories(deps, store, "whole"))
    live = sorted(x[:3] for x in memories(deps, store, "live"))
    assert live == whole
    texts = [t for t, *_ in live]
    assert "Ann: Yes! (replying to Assistant: Congratulations! Did you get the keys yesterday?)" in texts
    assert "Ann confirmed: the movers are booked for next Saturday at 9am." in texts
    assert any(t.startswith("Ann: She loves it") and "daughter" in t for t in texts)


def test_context_messages_are_never_extracted_again(service, deps, store):
    tasks = [ingest.add(deps, store, scope=scope("live"), messages=exchange) for exchange in EXCHANGES]
    service.drain()
    found = memories(deps, store, "live")
    assert len({t for t, *_ in found}) == len(found)  # no memory twice
    own = {t.request_id: {c["content"] for c in ex} for t, ex in zip(tasks, EXCHANGES)}
    for text, cited, _, request_id in found:
        # Every memory cites a message of its own add; an earlier one only beside it.
        assert set(cited) & own[request_id], text
    by_add = {t.request_id: [x for x in found if x[3] == t.request_id] for t in tasks}
    assert [len(by_add[t.request_id]) for t in tasks] == [1, 1, 1, 1]  # "Denver"; "Yes!"; confirmed; "She"


@pytest.mark.parametrize("elsewhere", [scope("u1", run="r2"), scope("u1", agent="other"), scope("u2")],
                         ids=["another-run", "another-agent", "another-tenant"])
def test_context_comes_from_the_same_run_only(service, deps, store, elsewhere):
    spy = deps.extractor = Spy(deps.extractor)
    ingest.add(deps, store, scope=scope("u1"), messages=EXCHANGES[0])  # asks "Did you get the keys yesterday?"
    ingest.add(deps, store, scope=elsewhere, messages=[turn(3, "user", "Yes!")])
    ingest.add(deps, store, scope=scope("u1"), messages=[turn(3, "user", "Yes!")])
    service.drain()
    # Alone, "Yes!" states nothing: the question of another run, agent or tenant is not its context.
    assert sorted(map(len, spy.contexts)) == [0, 0, 2]
    assert not any("Yes!" in t for t, *_ in memories(deps, store, elsewhere["tenant_id"])
                   if elsewhere["tenant_id"] != "u1")
    replies = [t for t, *_ in memories(deps, store, "u1") if "Yes!" in t]
    assert replies == ["Ann: Yes! (replying to Assistant: Congratulations! Did you get the keys yesterday?)"]


class Spy:
    """Records the context each extraction is given, then extracts as the real extractor does."""

    def __init__(self, inner):
        self.inner, self.contexts = inner, []

    def extract(self, messages, *, context=(), **kw):
        self.contexts.append([m.content for m in context])
        return self.inner.extract(messages, context=context, **kw)


def test_the_context_is_the_newest_earlier_messages_within_the_bounds(service, deps, store):
    spy = deps.extractor = Spy(deps.extractor)
    deps.settings = replace(deps.settings, extract_context_messages=3, extract_context_chars=10_000)
    for exchange in EXCHANGES:
        ingest.add(deps, store, scope=scope("u1"), messages=exchange)
        service.drain()
    assert spy.contexts == [[], [c["content"] for c in CONVO[0:2]], [c["content"] for c in CONVO[1:4]],
                            [c["content"] for c in CONVO[3:6]]]
    spy.contexts.clear()
    # The character bound keeps the newest messages that fit, whole.
    deps.settings = replace(deps.settings, extract_context_chars=len(CONVO[6]["content"]) + 5)
    ingest.add(deps, store, scope=scope("u1"), messages=[turn(8, "user", "Thanks!")])
    service.drain()
    assert spy.contexts == [[CONVO[6]["content"]]]


def test_adds_dated_alike_keep_the_order_they_came_in(service, deps, store):
    """An import dated once per session, added an exchange at a time: each add's context is the
    exchanges before it, and the run reads back in the order it was said."""
    spy = deps.extractor = Spy(deps.extractor)
    deps.settings = replace(deps.settings, extract_context_messages=2)
    for exchange in EXCHANGES:
        ingest.add(deps, store, scope=scope("u1"), messages=[{**m, "created_at": T} for m in exchange])
    service.drain()
    assert spy.contexts == [[]] + [[c["content"] for c in CONVO[2 * n - 2:2 * n]] for n in (1, 2, 3)]
    listed, _ = deps.repo.list_messages(store, ingest.write_scope(scope("u1")), limit=50, cursor=None)
    assert [m.content for m in listed] == [c["content"] for c in CONVO]


def test_roles_are_the_store_setting(service, deps):
    plain = stores.create(deps, name="plain")
    assert [r.value for r in plain.extract_roles] == ["user"]
    for exchange in EXCHANGES:
        ingest.add(deps, "plain", scope=scope("u1"), messages=exchange)
    service.drain()
    texts = [t for t, *_ in memories(deps, "plain", "u1")]
    assert not any("confirmed" in t or "movers" in t for t in texts)  # the assistant's statement: opted out
    assert any("Yes!" in t for t in texts)  # the user's answer is the user's fact


@pytest.mark.parametrize("roles", [[], ["user", "user"], "user"])
def test_bad_roles_are_refused_by_the_core(deps, roles):
    with pytest.raises(InvalidInput) as refused:
        stores.create(deps, name="bad", extract_roles=roles)
    assert refused.value.code == "invalid_extract_roles" and refused.value.field == "extract_roles"


@pytest.mark.parametrize("roles, code", [([], "invalid_input"), (["user", "robot"], "invalid_input"),
                                         ("user", "invalid_input"), (["user", "user"], "invalid_extract_roles")])
def test_bad_roles_get_a_4xx_with_a_code(deps, roles, code):
    api = build_api(deps)
    out = api.resolve(api_event("POST", "/v1/stores", {"name": "bad", "extract_roles": roles}), None)
    assert out["statusCode"] == 400, out
    error = json.loads(out["body"])["error"]
    assert error["code"] == code and error["field"].startswith("extract_roles")
    assert api.resolve(api_event("GET", "/v1/stores/bad"), None)["statusCode"] == 404  # nothing half-written


def test_roles_round_trip_through_the_api(deps):
    api = build_api(deps)
    out = api.resolve(api_event("POST", "/v1/stores", {"name": "opted", "extract_roles": ["user",
                                                                                          "assistant_confirmed"]}),
                      None)
    assert out["statusCode"] == 201, out
    assert json.loads(out["body"])["extract_roles"] == ["user", "assistant_confirmed"]
    got = json.loads(api.resolve(api_event("GET", "/v1/stores/opted"), None)["body"])
    assert got["extract_roles"] == ["user", "assistant_confirmed"]


def test_a_stores_roles_can_be_changed_and_are_validated(deps):
    api = build_api(deps)
    assert api.resolve(api_event("POST", "/v1/stores", {"name": "later"}), None)["statusCode"] == 201
    out = api.resolve(api_event("PATCH", "/v1/stores/later", {"extract_roles": ["user", "assistant_confirmed"]}),
                      None)
    assert out["statusCode"] == 200, out
    assert json.loads(out["body"])["extract_roles"] == ["user", "assistant_confirmed"]
    assert [r.value for r in stores.get(deps, "later").extract_roles] == ["user", "assistant_confirmed"]
    for bad, code in (([], "invalid_input"), (["user", "user"], "invalid_extract_roles"), (["bot"], "invalid_input")):
        out = api.resolve(api_event("PATCH", "/v1/stores/later", {"extract_roles": bad}), None)
        assert out["statusCode"] == 400 and json.loads(out["body"])["error"]["code"] == code, out
    assert [r.value for r in stores.get(deps, "later").extract_roles] == ["user", "assistant_confirmed"]
    out = api.resolve(api_event("PATCH", "/v1/stores/nope", {"extract_roles": ["user"]}), None)
    assert out["statusCode"] == 404 and json.loads(out["body"])["error"]["code"] == "store_not_found"
    out = api.resolve(api_event("PATCH", "/v1/stores/later", {"name": "renamed"}), None)
    assert out["statusCode"] == 400  # the name and the embedding model are not settings


def test_summary_settings_change_through_patch_and_are_checked(deps):
    api = build_api(deps)
    assert api.resolve(api_event("POST", "/v1/stores", {"name": "sums"}), None)["statusCode"] == 201
    out = api.resolve(api_event("PATCH", "/v1/stores/sums", {"summary_trigger_tokens": 500}), None)
    assert out["statusCode"] == 200, out
    assert stores.get(deps, "sums").summary_trigger_tokens == 500
    assert stores.get(deps, "sums").summary_keep_recent == 6  # untouched
    out = api.resolve(api_event("PATCH", "/v1/stores/sums", {"summary_keep_recent": -1}), None)
    assert out["statusCode"] == 400, out
    with pytest.raises(InvalidInput):
        stores.update(deps, "sums", summary_trigger_tokens=True)  # the core refuses what the route would
    assert stores.get(deps, "sums").summary_trigger_tokens == 500
