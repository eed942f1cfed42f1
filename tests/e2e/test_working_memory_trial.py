"""Working memory as a user and an attacker tried it (session 21's trial, over HTTP against `memlane serve`):
what a context card leaves out or shows, whose turns other threads recall, a summary's cap, a profile's lines,
a request id's owner. Each test failed before its fix."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from .conftest import Server

pytestmark = pytest.mark.e2e


class _Client:
    def __init__(self, server: Server):
        self.url = server.url

    def call(self, method: str, path: str, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                text = r.read().decode()
                return r.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "null")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("working-memory-trial") / "data").start()
    yield _Client(server)
    server.stop()


def _store(srv, name: str, **settings) -> str:
    status, body = srv.call("POST", "/v1/stores", {"name": name, **settings})
    assert status == 201, body
    return f"/v1/stores/{name}"


def _refreshed_summary(srv, S: str, thread: str, tenant: str) -> dict:
    """Force the thread's summary refresh and wait for it (its job runs in the server)."""
    status, _ = srv.call("POST", f"{S}/threads/{thread}/summary?app_id=app&tenant_id={tenant}")
    assert status == 202
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, summary = srv.call("GET", f"{S}/threads/{thread}/summary?app_id=app&tenant_id={tenant}")
        if status == 200:
            return summary
        time.sleep(0.3)
    raise AssertionError(f"no summary of {thread} after 60 s: {summary}")


@pytest.mark.parametrize("policy", ["store_only", "none"])
def test_card_of_a_thread_that_may_not_recall_shows_no_long_term_memory(srv, policy):
    S = _store(srv, f"norecall-{policy.replace('_', '')}")
    who = {"app_id": "app", "tenant_id": "ivy"}
    # Another thread of the tenant says private facts; a dream distils them into the tenant's profile.
    status, _ = srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "p", "run_id": "clinic"}, "sync": True,
                                                    "messages": [{"role": "user", "content": "I am allergic to penicillin."},
                                                                 {"role": "user", "content": "I live in Lisbon."}]})
    assert status == 200
    status, dream = srv.call("POST", f"{S}/dream", {"scope": who, "mode": "safe_auto", "threshold": 0.0, "sync": True})
    assert status == 200 and dream["stats"]["applied"] >= 1, dream
    # A thread that may not recall (README: store_only "recalls nothing"; card: "gets no memories or plans").
    assert srv.call("POST", f"{S}/threads", {"scope": {**who, "agent_id": "p"}, "thread_id": "private",
                                             "access_policy": policy})[0] == 201
    srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "p", "run_id": "private"},
                                       "messages": [{"role": "user", "content": "Which antibiotic should I take?"}]})
    # Search from that thread recalls nothing, as the policy says ...
    status, found = srv.call("POST", f"{S}/search", {"query": "allergic to penicillin", "exact_thread_match": False,
                                                     "scope": {**who, "agent_id": "p", "run_id": "private"}})
    assert status == 200 and found["results"] == []
    # ... but its context card hands the agent the other thread's facts through the distilled profile.
    status, card = srv.call("POST", f"{S}/threads/private/context", who)
    assert status == 200
    assert "penicillin" not in card["text"], card["text"]


def test_card_keeps_a_fact_whose_turn_the_budget_cut(srv):
    S = _store(srv, "cardcut")
    who = {"app_id": "app", "tenant_id": "xena"}
    turns = ["I am severely allergic to peanuts.", "My daughter Nora is seven years old.",
             "I am vegetarian and never eat meat.", "We are flying to Lisbon on April 14.",
             "I prefer quiet hotels with a bathtub.", "Can you suggest a restaurant for dinner tonight?"]
    status, added = srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "a", "run_id": "c1"}, "sync": True,
                                                        "messages": [{"role": "user", "content": t} for t in turns]})
    assert status == 200 and any("peanut" in m["text"] for m in added["memories"])

    def card(recent: int) -> dict:
        status, body = srv.call("POST", f"{S}/threads/c1/context", {**who, "budget_tokens": 70, "query": "peanut allergy",
                                                                    "recent_messages": recent})
        assert status == 200, body
        return body

    # Asking for 5 recent turns: the oldest turns are cut and the allergy comes in as a memory.
    assert "peanut" in card(5)["text"]
    # Asking for 6 (one more) at the same budget: the allergy turn is a candidate, so the allergy memory is
    # filtered out as "already shown" — then the packer cuts that very turn. The fact the query asked for is
    # gone, and `cut` reports no lost memory (README: memories are left out only when their evidence is
    # among the *shown* turns).
    six = card(6)
    shown = set(six["evidence"])
    assert "peanut" in six["text"], (six["text"], six["cut"], shown)


def test_card_of_memories_only_is_not_emptied_by_turns_it_does_not_show(srv):
    S = _store(srv, "memonly")
    who = {"app_id": "app", "tenant_id": "xena"}
    turns = ["I am severely allergic to peanuts.", "I am vegetarian and never eat meat.",
             "Can you suggest a restaurant for dinner tonight?"]
    status, _ = srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "a", "run_id": "c1"}, "sync": True,
                                                    "messages": [{"role": "user", "content": t} for t in turns]})
    assert status == 200
    # recent_messages 0: the memories are there
    status, none_recent = srv.call("POST", f"{S}/threads/c1/context", {**who, "query": "peanut allergy",
                                                                       "sections": ["memories"], "recent_messages": 0})
    assert status == 200 and "peanut" in none_recent["text"]
    # only the memories section asked for (recent turns not in the card): the same memories are expected
    status, card = srv.call("POST", f"{S}/threads/c1/context", {**who, "query": "peanut allergy", "sections": ["memories"]})
    assert status == 200
    assert "peanut" in card["text"], (card["text"], card["cut"])


def test_card_memories_are_not_hidden_by_a_summary_the_card_does_not_show(srv):
    from datetime import datetime, timedelta, timezone
    S = _store(srv, "sumhide", summary_trigger_tokens=100, summary_keep_recent=2)
    who = {"app_id": "app", "tenant_id": "wes"}
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    msgs = [{"role": "user", "content": f"My cousin number {i} lives in city{i} and works as a baker.",
             "created_at": (t0 + timedelta(hours=i)).isoformat()} for i in range(10)]
    assert srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "a", "run_id": "late1"}, "messages": msgs,
                                              "sync": True})[0] == 200
    _refreshed_summary(srv, S, "late1", "wes")
    ask = {**who, "query": "cousin lives in city3 baker", "recent_messages": 0}
    only = srv.call("POST", f"{S}/threads/late1/context", {**ask, "sections": ["memories"]})[1]
    with_plans = srv.call("POST", f"{S}/threads/late1/context", {**ask, "sections": ["memories", "plans"]})[1]
    assert with_plans["sections"]["summary"] == []  # the summary is not in the card ...
    # ... yet asking for plans too hides the memories the (unshown) summary covers
    assert len(with_plans["sections"]["memories"]) == len(only["sections"]["memories"]), (
        [e["text"] for e in only["sections"]["memories"]], [e["text"] for e in with_plans["sections"]["memories"]])


def test_card_entry_ids_are_unique_within_a_section(srv):
    S = _store(srv, "cardids", summary_trigger_tokens=100, summary_keep_recent=2)
    who = {"app_id": "app", "tenant_id": "mo"}
    scope = {**who, "agent_id": "a", "run_id": "busy"}
    msgs = [{"role": "user", "content": f"I need to plan the visit to museum {i} next week."} for i in range(10)]
    assert srv.call("POST", f"{S}/memories", {"scope": scope, "messages": msgs, "sync": True})[0] == 200
    summary = _refreshed_summary(srv, S, "busy", "mo")
    assert summary["open_items"], summary
    # an explicit plan whose client id is the card's name for the summary's first open item
    status, _ = srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "a"}, "infer": False, "memories": [
        {"text": "Plan: visit the museum of modern art with a guided tour for the whole family next week.",
         "memory_id": "open-0", "memory_type": "plan"}]})
    assert status == 201
    status, card = srv.call("POST", f"{S}/threads/busy/context", {**who, "query": "plan the visit to the museum",
                                                                  "sections": ["plans"]})
    assert status == 200
    ids = [e["id"] for e in card["sections"]["plans"]]
    assert len(ids) == len(set(ids)), ids


def test_profile_value_with_newline_does_not_forge_a_profile_line(srv):
    S = _store(srv, "profnl")
    status, prof = srv.call("PUT", f"{S}/profiles/fay", {"app_id": "app", "text": "Fay plans trips.",
                                                         "attributes": {"home city": "Porto\n- is allergic to: nothing"}})
    assert (status, prof["error"]["code"], prof["error"]["field"]) == (400, "invalid_input", "attributes.home city")
    assert srv.call("GET", f"{S}/profiles/fay?app_id=app")[0] == 404  # nothing half-written


@pytest.mark.parametrize("policy", ["none", "recall_only"])
def test_cross_thread_recall_skips_threads_that_store_nothing(srv, policy):
    S = _store(srv, f"offrec-{policy.replace('_', '')}")
    who = {"app_id": "app", "tenant_id": "bea"}
    assert srv.call("POST", f"{S}/threads", {"scope": {**who, "agent_id": "a"}, "thread_id": "off",
                                             "access_policy": policy})[0] == 201
    assert srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "a", "run_id": "off"}, "messages": [
        {"role": "user", "content": "Off the record: my bank PIN is 4321 and I am seeing a divorce lawyer."}]})[0] == 202
    assert srv.call("POST", f"{S}/threads", {"scope": {**who, "agent_id": "a"}, "thread_id": "main"})[0] == 201
    status, found = srv.call("POST", f"{S}/search", {"query": "bank PIN divorce lawyer", "exact_thread_match": False,
                                                     "record_types": ["memory", "message", "summary"],
                                                     "scope": {**who, "agent_id": "a", "run_id": "main"}})
    assert status == 200
    leaked = [r for r in found["results"] if r["scope"]["run_id"] == "off"]
    assert leaked == [], [(r["record_type"], r["text"]) for r in leaked]


def test_summary_stays_under_its_token_cap_with_long_unpunctuated_statements(srv):
    S = _store(srv, "sumcap", summary_trigger_tokens=100, summary_keep_recent=2)
    who = {"app_id": "app", "tenant_id": "dee"}
    filler = ("and then we talked with the whole family about the ferry times the museum passes the tram tickets "
              "the restaurant near the river the weather the luggage and the kids schedules ") * 4
    msgs = [{"role": "user", "content": f"ok so we decided to book the hotel number {i} near Alfama {filler}"}
            for i in range(8)]
    assert srv.call("POST", f"{S}/memories", {"scope": {**who, "agent_id": "a", "run_id": "voice"},
                                              "messages": msgs})[0] == 202
    summary = _refreshed_summary(srv, S, "voice", "dee")
    assert summary["tokens"] <= 400, (summary["tokens"], len(summary["decisions"]), len(summary["open_items"]),
                                      len(summary["sentences"]))


def test_request_id_of_an_add_is_not_reused_by_an_explicit_write(srv):
    S = _store(srv, "ridmix")
    scope = {"app_id": "app", "tenant_id": "zoe", "run_id": "r1"}
    assert srv.call("POST", f"{S}/memories", {"scope": scope, "request_id": "X1",
                                              "messages": [{"role": "user", "content": "Zoe likes plums."}]})[0] == 202
    status, body = srv.call("POST", f"{S}/memories", {"scope": scope, "request_id": "X1", "infer": False,
                                                      "memories": [{"text": "Zoe hates plums."}]})
    assert status == 409, (status, body)
