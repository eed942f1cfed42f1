"""Working memory end to end, as a new user tries it: two threads of one tenant, summaries that refresh by
themselves, and a context card of the second thread that holds the profile, its summary, what the first
thread said and the recent turns, within the budget and with evidence. Also the seams between the parts:
a thread shows its summary's state, and search finds summaries as records."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlane.adapters.tokenizers.hf import HFTokenizer
from memlane.domain.models import RecordType
from memlane.domain.scope import Scope
from memlane.services import context, ingest, profiles, search, stores, threads

APP, TENANT = "travel", "maya"
FIRST = {"app_id": APP, "tenant_id": TENANT, "agent_id": "planner", "run_id": "trip-planning"}
SECOND = {**FIRST, "run_id": "lisbon-week"}
START = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)

FACTS = ["I have a severe peanut allergy, so restaurants must know about it.",
         "My daughter Nora is seven and she loves tram rides.",
         "We are flying into Lisbon on the 14th of April and staying near Alfama.",
         "I prefer quiet hotels with a bathtub over anything with a rooftop bar."]


def _turns(thread_facts: list[str], n: int, start: datetime) -> list[dict]:
    """n turns alternating user / assistant; the user's turns cycle through small talk and the facts."""
    turns = []
    for i in range(n):
        if i % 2:
            content = f"Noted, thank you. Anything else for the plan, step {i}?"
            role = "assistant"
        else:
            fact = thread_facts[(i // 2) % len(thread_facts)] if (i // 2) < len(thread_facts) else \
                f"Let us also check museum number {i} and its opening hours on weekdays."
            content, role = fact, "user"
        turns.append({"role": role, "content": content, "created_at": start + timedelta(minutes=i)})
    return turns


@pytest.fixture()
def store(service, deps) -> str:
    name = stores.create(deps, name="wm", summary_trigger_tokens=100, summary_keep_recent=6).name
    threads.create(deps, name, scope={k: FIRST[k] for k in ("app_id", "tenant_id", "agent_id")},
                   thread_id=FIRST["run_id"])
    for chunk in range(0, 60, 10):  # sixty turns, ten per add, as a chat client writes them
        ingest.add(deps, name, scope=FIRST, messages=_turns(FACTS, 60, START)[chunk:chunk + 10])
        service.drain()
    later = START + timedelta(days=2)
    ingest.add(deps, name, scope=SECOND, messages=_turns(
        ["We landed and the hotel is lovely.", "Tonight we want dinner somewhere Nora can eat early."], 20, later))
    service.drain()
    profiles.put(deps, name, app_id=APP, tenant_id=TENANT, text="Maya plans family trips.",
                 attributes={"home_city": "Boston"})
    return name


def test_summaries_refresh_by_themselves_and_leave_the_recent_turns_out(deps, store) -> None:
    for scope, total in ((FIRST, 60), (SECOND, 20)):
        summary = context.get_summary(deps, store, Scope(**scope))
        assert summary is not None and summary.sentences, scope
        assert summary.covered_messages <= total - 6  # the last six turns stay out
        thread = threads.get(deps, store, app_id=APP, tenant_id=TENANT, thread_id=scope["run_id"])
        assert thread.message_count == total


def test_a_new_threads_card_holds_profile_summary_first_thread_memories_and_recent_turns(deps, store) -> None:
    card = context.build(deps, store, app_id=APP, tenant_id=TENANT, thread_id=SECOND["run_id"],
                         query="Which restaurant is safe for us tonight?", budget_tokens=1500)
    assert "Maya plans family trips." in card.text and "home_city: Boston" in card.text
    assert card.kept["summary"], "the second thread's own summary is in the card"
    memories = " ".join(e.text for e in card.kept["memories"])
    assert "peanut" in memories  # said in the first thread, weeks of turns away
    recent = card.kept["recent"]
    assert len(recent) == 6 and recent[-1].text.endswith("step 19?")
    assert HFTokenizer().count(card.text) == card.total <= 1500
    first_thread = {m.message_id for m in deps.repo.list_messages(store, Scope(**FIRST), limit=100, cursor=None)[0]}
    assert first_thread & set(card.evidence), "the first thread's memories cite their messages"
    # the sections that change least come first, so a provider's prompt cache keeps the prefix
    assert card.text.index("Maya plans family trips.") < card.text.index(recent[-1].text)


def test_search_finds_a_thread_summary_as_a_record(deps, store) -> None:
    hits = search.search(deps, store, query="peanut allergy restaurants", scope={"app_id": APP, "tenant_id": TENANT},
                         record_types=["summary"], top_k=5)
    assert hits and {h.memory.record_type for h in hits} == {RecordType.SUMMARY}
    assert {h.memory.scope.run_id for h in hits} <= {FIRST["run_id"], SECOND["run_id"]}
    # another tenant's search never reaches them
    assert search.search(deps, store, query="peanut allergy restaurants",
                         scope={"app_id": APP, "tenant_id": "someone-else"}, record_types=["summary"]) == []


def test_a_thread_shows_its_summarys_state(deps, store) -> None:
    import json

    from memlane.api.app import build_api
    from tests.isolation.api_events import api_event

    api = build_api(deps)
    q = f"app_id={APP}&tenant_id={TENANT}"
    got = json.loads(api.resolve(api_event("GET", f"/v1/stores/{store}/threads/{FIRST['run_id']}", query=q),
                                 None)["body"])
    summary = context.get_summary(deps, store, Scope(**FIRST))
    assert got["summary"]["covered_until"] == summary.covered_until
    assert got["summary"]["covered_messages"] == summary.covered_messages and got["summary"]["tokens"] > 0
    listed = json.loads(api.resolve(api_event("GET", f"/v1/stores/{store}/threads", query=q), None)["body"])["threads"]
    assert {t["thread_id"]: t["summary"]["covered_messages"] for t in listed} == {
        s["run_id"]: context.get_summary(deps, store, Scope(**s)).covered_messages for s in (FIRST, SECOND)}


def test_search_reads_the_summaries_it_found_by_key_not_every_summary_of_the_tenant(deps, store, monkeypatch) -> None:
    """summaries.documents read all of a tenant's summaries for every search that found one: a tenant with
    thousands of threads paid for all of them. The index hit names its thread, so one batch read does."""
    def scan(*args, **kwargs):
        raise AssertionError("a search scanned every summary of the tenant")

    monkeypatch.setattr(type(deps.repo), "iter_summaries", scan)  # deps.repo is made per call
    hits = search.search(deps, store, query="peanut allergy restaurants", scope={"app_id": APP, "tenant_id": TENANT},
                         record_types=["summary"], top_k=5)
    assert hits and {h.memory.record_type for h in hits} == {RecordType.SUMMARY}
    assert all(h.memory.text for h in hits)
