"""Working memory as a new user tries it, over HTTP against a running `memlane serve` (issue 12, "Done when"):
a profile, a thread of 60 turns added one exchange at a time, its summary refreshing by itself, then a second
thread of the same tenant whose context card holds the profile, what the first thread said and its own recent
turns, within the budget and with evidence — and the first thread's card holds that thread's summary."""

from datetime import datetime, timedelta, timezone

import pytest

from memlane.bench.live_thread import REQUESTS
from memlane.client import MemlaneClient

from .test_summaries_http import until

pytestmark = pytest.mark.e2e

APP, TENANT, AGENT = "travel", "maya", "planner"
WHO = {"app_id": APP, "tenant_id": TENANT}
FIRST, SECOND = "trip-planning", "lisbon-week"
KEEP, BUDGET = 6, 800
START = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)

FACTS = [("I have a severe peanut allergy, so restaurants must know about it.",
          "Noted: I will check every restaurant for peanuts and peanut oil."),
         ("My daughter Nora is seven and she loves tram rides.",
          "Lovely, Lisbon's old trams will be a hit with her."),
         ("We are flying into Lisbon on the 14th of April and staying near Alfama.",
          "Alfama is charming and close to the river; I will plan around it."),
         ("I prefer quiet hotels with a bathtub over anything with a rooftop bar.",
          "Quiet with a bathtub it is; I will skip the party hotels.")]


def exchanges(pairs, start):
    """One add per exchange, as a chat client writes: [(user, assistant)] → message pairs, a minute apart."""
    for i, (user, assistant) in enumerate(pairs):
        when = start + timedelta(minutes=2 * i)
        yield [{"role": "user", "content": user, "created_at": when.isoformat()},
               {"role": "assistant", "content": assistant, "created_at": (when + timedelta(seconds=30)).isoformat()}]


def thread_ids(c, thread):
    return [m["message_id"] for m in c.messages("demo", {**WHO, "agent_id": AGENT, "run_id": thread},
                                                limit=100)["messages"]]


def test_a_new_user_talks_60_turns_then_a_second_threads_card_holds_profile_memories_and_recent_turns(server):
    c = MemlaneClient(server.url)
    c.create_store("demo", summary_trigger_tokens=300, summary_keep_recent=KEEP)
    c.put_profile("demo", TENANT, app_id=APP, text="Maya plans family trips.", attributes={"home_city": "Boston"})
    c.create_thread("demo", {**WHO, "agent_id": AGENT}, thread_id=FIRST)

    # 60 turns: the facts first, then the kind of one-off requests a real thread is full of
    tasks = [c.add("demo", {**WHO, "agent_id": AGENT, "run_id": FIRST}, messages=pair)["request_id"]
             for pair in exchanges(FACTS + REQUESTS[:30 - len(FACTS)], START)]
    assert all(c.wait_task("demo", r, timeout=120)["status"] == "SUCCEEDED" for r in tasks)
    first = thread_ids(c, FIRST)
    assert len(first) == 60

    # the summary refreshed by itself (nothing forced it) and leaves the recent turns out
    summary = until(lambda: (s := c.get_thread("demo", FIRST, **WHO)["summary"]) and s)
    assert summary, "no summary appeared on its own past the trigger"
    full = c.get_summary("demo", FIRST, **WHO)
    assert full["covered_until"] in first[:-KEEP] and set(full["evidence"]) <= set(first[:-KEEP])

    # a second thread of the same tenant, days later
    c.create_thread("demo", {**WHO, "agent_id": AGENT}, thread_id=SECOND)
    later = [("We landed in Lisbon and the hotel is lovely and quiet.", "Wonderful! Enjoy your first evening."),
             ("Nora wants to ride a tram tomorrow morning.", "Tram 28 starts early; go before nine to get seats."),
             ("Tonight we want dinner somewhere Nora can eat early. Which restaurant is safe for us?",
              "Let me look at places that open early and can handle your allergy.")]
    for pair in exchanges(later, START + timedelta(days=44)):
        c.wait_task("demo", c.add("demo", {**WHO, "agent_id": AGENT, "run_id": SECOND}, messages=pair)["request_id"])
    second = thread_ids(c, SECOND)

    card = c.context("demo", SECOND, **WHO, budget_tokens=BUDGET)
    sections = card["sections"]
    assert "Maya plans family trips." in card["text"] and "home_city: Boston" in card["text"]
    assert [e["id"] for e in sections["recent"]] == second[-KEEP:]
    recalled = [e for e in sections["memories"] if "peanut" in e["text"].lower()]
    assert recalled, f"the first thread's allergy is not among the memories: {sections['memories']}"
    assert set(recalled[0]["evidence"]) <= set(first) and recalled[0]["evidence"]
    assert set(first) & set(card["evidence"]) and set(second[-KEEP:]) <= set(card["evidence"])
    assert card["tokens"]["total"] <= BUDGET and card["tokens"]["tokenizer"].startswith("hf:")
    assert card["text"].index("Maya plans family trips.") < card["text"].index(sections["recent"][-1]["text"])

    # the first thread's own card holds its summary, citing the turns it covers
    own = c.context("demo", FIRST, **WHO, budget_tokens=BUDGET)
    assert own["sections"]["summary"], "the first thread's card has no summary"
    cited = {m for e in own["sections"]["summary"] for m in e["evidence"]}
    assert cited and cited <= set(first[:-KEEP])
    assert [e["id"] for e in own["sections"]["recent"]] == first[-KEEP:]
    assert own["tokens"]["total"] <= BUDGET
