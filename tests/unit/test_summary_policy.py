"""The extractive thread summary (policies/summary.py): statements in time order with their dates and
messages, capped by real tokens; the merge of an older summary with new statements under the cap."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlane.adapters.tokenizers.hf import HFTokenizer
from memlane.domain.models import Message, SummarySentence
from memlane.domain.scope import Scope
from memlane.policies import summary

SCOPE = Scope(app_id="app", tenant_id="t", agent_id="a", run_id="r")
T0 = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def count():
    return HFTokenizer().count_many


def msg(i: int, content: str, role: str = "user", name: str | None = None, day: int = 0) -> Message:
    return Message(message_id=f"m{i:04d}", scope=SCOPE, role=role, content=content, name=name,
                   created_at=T0 + timedelta(days=day, minutes=i), request_id="r")


def test_statements_keep_their_date_speaker_and_message_in_the_order_said(count):
    draft = summary.extract([
        msg(1, "Hi!"),
        msg(2, "I adopted a beagle called Max on 3 May.", name="Caroline"),
        msg(3, "That is lovely. What breed is he?", role="assistant"),
        msg(4, "We decided to book the flight to Lisbon for June 12.", name="Caroline", day=1),
    ], count, cap=400)
    assert [s.text for s in draft.sentences] == [
        "2023-05-08 Caroline: I adopted a beagle called Max on 3 May.",
        "2023-05-09 Caroline: We decided to book the flight to Lisbon for June 12.",
    ]
    assert draft.sentences[0].evidence == ["m0002"]
    assert draft.sentences[-1].evidence == ["m0004"]
    assert draft.decisions == ["2023-05-09 Caroline: We decided to book the flight to Lisbon for June 12."]
    assert all("?" not in s.text and "Hi" not in s.text for s in draft.sentences)


def test_the_cap_keeps_the_most_informative_statements_within_the_token_budget(count):
    filler = [msg(i, "I think that it was kind of a nice day for me overall.") for i in range(20)]
    facts = [msg(100, "Melanie ran the Boston marathon in 3 hours 41 minutes on 17 April 2023."),
             msg(101, "Her daughter Rosa starts at Stanford in September 2024.")]
    cap = 60
    draft = summary.extract(filler[:10] + facts[:1] + filler[10:] + facts[1:], count, cap)
    assert summary.tokens(draft, count) <= cap
    kept = " ".join(s.text for s in draft.sentences)
    assert "Boston marathon" in kept and "Stanford" in kept
    ids = [s.evidence[0] for s in draft.sentences]
    assert ids == sorted(ids)  # back in the order said


def test_merge_drops_the_older_halfs_least_informative_sentences_first_and_keeps_the_new(count):
    old = summary.Draft([
        SummarySentence(text="2023-05-01 User: Ok so that was that and it was fine.", evidence=["m1"]),
        SummarySentence(text="2023-05-01 User: My passport number ends in 4471 and expires March 2027.",
                        evidence=["m2"]),
        SummarySentence(text="2023-05-02 User: I guess it is what it is for now.", evidence=["m3"]),
    ])
    new = summary.Draft([SummarySentence(text="2023-05-09 User: I moved to Denver in May 2023.", evidence=["m9"])])
    sizes = count([s.text for s in old.sentences + new.sentences])
    cap = sum(sizes) - 1  # one sentence has to go
    merged = summary.merge(old, new, count, cap)
    assert summary.tokens(merged, count) <= cap
    texts = [s.text for s in merged.sentences]
    assert texts[-1].endswith("Denver in May 2023.")  # the new statement stays
    assert any("4471" in t for t in texts)  # the informative old one stays
    assert not any("that was that" in t for t in texts)  # the older half's least informative went first


def test_merge_under_the_cap_keeps_everything_in_order(count):
    old = summary.Draft([SummarySentence(text="2023-05-01 User: I live in Brooklyn with two cats.", evidence=["m1"])],
                        open_items=["2023-05-01 User: I need to renew my lease."])
    new = summary.Draft([SummarySentence(text="2023-05-03 User: My sister Ana visits in July.", evidence=["m5"])])
    merged = summary.merge(old, new, count, 400)
    assert [s.evidence for s in merged.sentences] == [["m1"], ["m5"]]
    assert merged.open_items == ["2023-05-01 User: I need to renew my lease."]


def test_the_cap_holds_for_any_cap(count):
    messages = [msg(i, f"On day {i} I met colleague number {i * 7} at the Berlin office to discuss budget item {i}.")
                for i in range(40)]
    for cap in (20, 50, 120, 400):
        previous = summary.extract(messages[:20], count, cap)
        merged = summary.merge(previous, summary.extract(messages[20:], count, cap), count, cap)
        assert summary.tokens(merged, count) <= cap


def test_a_statement_said_again_is_kept_once_where_it_was_said_last_citing_every_time(count):
    """A fact the user repeated filled the summary (and the card's summary section) once per time it was said."""
    said = "My new door code is 4417, please remember it."
    draft = summary.extract([msg(1, said), msg(2, "I keep bees on my roof in Brooklyn."), msg(3, said.upper()),
                             msg(4, said, role="assistant")], count, cap=400)
    assert [(s.text, s.evidence) for s in draft.sentences] == [
        ("2023-05-08 User: I keep bees on my roof in Brooklyn.", ["m0002"]),
        ("2023-05-08 User: " + said.upper(), ["m0001", "m0003"]),
        ("2023-05-08 Assistant: " + said, ["m0004"]),  # another speaker says it: another statement
    ]
    later = summary.extract([msg(5, said, day=2), msg(6, "I will fly to Lisbon on March 21.", day=2)], count, cap=400)
    merged = summary.merge(summary.merge(draft, later, count, cap=400), later, count, cap=400)
    door = [s for s in merged.sentences if "4417" in s.text and "User" in s.text]
    assert [(s.text[:10], s.evidence) for s in door] == [("2023-05-10", ["m0001", "m0003", "m0005"])]
    assert merged.open_items.count("2023-05-10 User: I will fly to Lisbon on March 21.") == 1


def test_open_items_and_decisions_cite_the_messages_that_said_them(count):
    first = summary.extract([msg(1, "I plan to repaint the kitchen in May.")], count, cap=400)
    merged = summary.merge(first, summary.extract([msg(2, "We decided to book the Alfama flat.")], count, cap=400),
                           count, cap=400)
    assert merged.cited == {merged.open_items[0]: ["m0001"], merged.decisions[0]: ["m0002"]}


def test_an_open_item_reported_done_later_is_no_longer_open(count):
    """The card offered "need to book the hotel" as open after the thread said it was booked."""
    first = summary.extract([
        msg(1, "I need to book the hotel near Alfama.", name="Priya"),
        msg(2, "I need to renew my passport before June.", name="Priya"),
        msg(3, "I also want to order a travel adapter.", name="Priya"),
        msg(4, "I ordered a travel adapter online.", name="Priya"),  # done in the same batch
    ], count, cap=400)
    assert [summary._said(t) for t in first.open_items] == ["I need to book the hotel near Alfama.",
                                                            "I need to renew my passport before June."]
    later = summary.extract([
        msg(5, "I haven't renewed my passport before June yet.", name="Priya", day=2),  # not done: negated
        msg(6, "I booked the hotel near Alfama yesterday, a quiet street.", name="Priya", day=2),
        msg(7, "I booked the flight too, finally.", name="Priya", day=2),  # names less than the item
    ], count, cap=400)
    merged = summary.merge(first, later, count, cap=400)
    assert [summary._said(t) for t in merged.open_items] == ["I need to renew my passport before June."]
    assert set(merged.cited) == set(merged.open_items + merged.decisions)


def test_a_done_cue_on_something_else_closes_nothing(count):
    draft = summary.extract([
        msg(1, "I need to book the flight to Lisbon.", name="Priya"),
        msg(2, "I booked the hotel in Lisbon.", name="Priya"),
        msg(3, "Finished it!", name="Priya"),
    ], count, cap=400)
    assert [summary._said(t) for t in draft.open_items] == ["I need to book the flight to Lisbon."]


NOT_DONE = [
    ("a question", "Wait, have I booked the hotel near Alfama?", "Priya"),
    ("the assistant asks", "Have you booked the hotel near Alfama yet?", None),
    ("a plan of its own", "I'll tell you once I've booked the hotel near Alfama.", "Priya"),
    ("a condition", "If I booked the hotel near Alfama today, could I still cancel it?", "Priya"),
    ("a wish", "I wish I had already booked the hotel near Alfama.", "Priya"),
    ("someone else's doing", "Mark booked the hotel near Alfama for his own trip last year.", "Priya"),
    ("another clause's", "The flights are booked but the hotel near Alfama is still to do.", "Priya"),
    ("undone", "The hotel near Alfama cancelled my booking, so I must book again.", "Priya"),
    ("another verb", "I sent you a reminder to book the hotel near Alfama.", None),
    ("no room left", "I confirmed the hotel near Alfama is fully booked.", "Priya"),
    ("another's, after a clause of one's own", "I paid the deposit, and Mark booked the hotel near Alfama for himself.",
     "Priya"),
    ("not this time", "I booked the hotel near Alfama last year, this time I'll try Baixa.", "Priya"),
    ("still open", "We booked the hotel near Alfama for the wrong trip, so it is still open.", "Priya"),
    ("another's, as a passive", "The hotel near Alfama was booked by Mark for his own trip.", "Priya"),
    ("long ago", "I booked the hotel near Alfama last year.", "Priya"),
    ("in doubt", "Mark asked whether I booked the hotel near Alfama.", "Priya"),
]
DONE = ["We booked the hotel near Alfama!", "Just booked the hotel near Alfama.", "The hotel near Alfama is booked.",
        "I've gone ahead and booked the hotel near Alfama.", "We booked the hotel near Alfama for next week.",
        "I booked the hotel near Alfama, so we will have a base.", "OK, I went ahead and booked the hotel near Alfama."]


@pytest.mark.parametrize("item,said", [
    ("I need to pay the electricity bill.", "I paid the electricity bill this morning."),
    ("I have to cancel the gym membership.", "I cancelled the gym membership."),
    ("I need to book the hotel near Alfama.", "I booked the hotel near Alfama but not the flight."),
])
def test_an_irregular_or_doubled_past_form_closes_its_item(count, item, said):
    draft = summary.extract([msg(1, item, name="Priya"), msg(2, said, name="Priya")], count, cap=400)
    assert item not in [summary._said(t) for t in draft.open_items]


@pytest.mark.parametrize("said", DONE)
def test_the_items_own_verb_done_by_the_speaker_or_as_a_passive_closes_it(count, said):
    """A cue right after an explicit I/we missed these (session 19's second regression trial)."""
    draft = summary.extract([msg(1, "I need to book the hotel near Alfama.", name="Priya"),
                             msg(2, said, name="Priya")], count, cap=400)
    assert "I need to book the hotel near Alfama." not in [summary._said(t) for t in draft.open_items]


@pytest.mark.parametrize("said,name", [(s, n) for _, s, n in NOT_DONE], ids=[c for c, _, _ in NOT_DONE])
def test_a_sentence_that_does_not_say_the_speaker_did_it_closes_no_open_item(count, said, name):
    """The first rule closed the item on a done cue anywhere in a later sentence (session 19's regression trial)."""
    item = msg(1, "I need to book the hotel near Alfama.", name="Priya")
    later = msg(2, said, role="user" if name else "assistant", name=name)
    at_once = summary.extract([item, later], count, cap=400)
    merged = summary.merge(summary.extract([item], count, cap=400), summary.extract([later], count, cap=400),
                           count, cap=400)
    for draft in (at_once, merged):
        assert [summary._said(t) for t in draft.open_items] == ["I need to book the hotel near Alfama."]
