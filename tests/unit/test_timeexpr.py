from datetime import datetime, timezone

import pytest

from memlane.policies.timeexpr import resolve

REF = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)  # a Monday


@pytest.mark.parametrize("text, day, label", [
    ("I went there yesterday", "2023-05-07", "7 May 2023"),
    ("We met last Saturday at the park", "2023-05-06", "6 May 2023"),
    ("see you tomorrow", "2023-05-09", "9 May 2023"),
    ("a few days ago I ran", "2023-05-05", "5 May 2023"),
    ("two weeks ago we moved", "2023-04-24", "week of 24 April 2023"),
    ("3 days ago", "2023-05-05", "5 May 2023"),
    ("last year I visited Rome", "2022-05-08", "2022"),
    ("in March I started", "2023-03-01", "March 2023"),
    ("in December we travelled", "2022-12-01", "December 2022"),
    ("next Friday is the party", "2023-05-12", "12 May 2023"),
    # a year said with the month is that year, before or after the message's
    ("My passport expires in March 2027.", "2027-03-01", "March 2027"),
    ("My visa expires in June, 2028.", "2028-06-01", "June 2028"),
    ("We married in December 2019.", "2019-12-01", "December 2019"),
    ("The lease ends September 2024.", "2024-09-01", "September 2024"),
])
def test_resolves_against_message_time(text, day, label):
    r = resolve(text, REF)
    assert r is not None
    assert r.when.date().isoformat() == day
    assert r.label() == label


def test_no_time_expression():
    assert resolve("I like green tea", REF) is None
    assert resolve("I may 2023 times have said so", REF) is None  # "may" the verb is no month


def test_earliest_expression_wins():
    assert resolve("yesterday, and also last year", REF).when.date().isoformat() == "2023-05-07"


@pytest.mark.parametrize("text, day", [
    ("I'm flying to Paris in March.", "2024-03-01"),  # said in May 2023: next March, not the last one
    ("We will move in December.", "2023-12-01"),
    ("The marathon is scheduled in April, and I'm training for it.", "2024-04-01"),
    ("I'm starting the new job in May.", "2023-05-01"),  # this month
    ("I ran a marathon in April.", "2023-04-01"),  # said of the past: the last one
    ("We're going to talk about what happened last March.", "2022-03-01"),
    # Not said of the past: the next one, as a day of a month is (a trial: "My exam is in February." said in
    # December was dated the February gone, and a search from January left it out).
    ("Our wedding is in June.", "2023-06-01"),
    ("My exam is in February.", "2024-02-01"),
    ("My daughter starts school in September.", "2023-09-01"),
    ("We got married in June.", "2022-06-01"),
    ("this March was rough", "2023-03-01"),
    ("I go skiing in February every year.", "2023-02-01"),  # a habit, as before: not the next one (a regression trial)
])
def test_a_month_of_a_plan_is_the_next_one(text, day):
    assert resolve(text, REF).when.date().isoformat() == day


@pytest.mark.parametrize("said", ["My day off is on Tuesday since I started the new job.",
                                  "I want to try the new climbing gym on Thursday since Sarah made it sound fun.",
                                  "I always play tennis on Saturday since I moved here."])
def test_a_bare_weekday_stays_undated_whatever_tense_a_turn_holds_elsewhere(said):
    """A regression trial: "on <weekday>" dated by any past-tense word in the turn made a habit or a plan an event
    already past, which no later change could close ("my day off is Wednesday now" left both current)."""
    assert resolve(said, REF) is None


@pytest.mark.parametrize("text, day", [
    ("I'm flying to Oslo on March 14.", "2024-03-14"),  # a plan: the next March 14, said in May 2023
    ("I'm flying to Rome on June 2nd.", "2023-06-02"),
    ("I ran the Boston marathon on April 17.", "2023-04-17"),  # said in the past: the nearest
    ("My niece was born on the 3rd of March.", "2023-03-03"),
    ("Got tickets for the Warriors game on May 28!", "2023-05-28"),  # a past verb arranging what is to come
    ("rebooked my tokyo flight for june 25", "2023-06-25"),
    ("The dentist is June 3.", "2023-06-03"),  # said in the present: the next
    ("Our anniversary is January 2.", "2024-01-02"),
    ("The parent-teacher conference was pushed to May 1.", "2024-05-01"),  # put off to a day: ahead
    ("The contract was signed on May 2, 2021.", "2021-05-02"),  # the year said, and not "in May"
    ("The deadline is 14 March 2025.", "2025-03-14"),
])
def test_a_day_of_a_month_is_that_day_of_the_year_the_words_point_to(text, day):
    """A plans trial: "flying to Oslo on March 14" then "flying to Rome on April 2" read as one trip changed, the
    days unread."""
    r = resolve(text, REF)
    assert r is not None and r.granularity == "day"
    assert r.when.date().isoformat() == day


def test_a_day_no_month_has_is_no_date():
    assert resolve("The deadline is February 30.", REF) is None
    assert resolve("Everyone may 12 times ask", REF) is None


@pytest.mark.parametrize("text, day", [
    ("rebooked the denver flight for may 8", "2023-05-08"),  # lower-case "may" before a day: the month
    ("may 20th works for me", "2023-05-20"),
    ("moved the dentist to the 14th", "2023-05-14"),  # a day alone, put off to: the next one
    ("the 18th at 3pm is the new slot", "2023-05-18"),
    ("we met on the 2nd.", "2023-05-02"),  # said in the past tense: the nearest
    ("the party is on the 31st", "2023-05-31"),
    ("dentist is on the 14th in the morning", "2023-05-14"),
    ("moved it to the 14th lol", "2023-05-14"),
    ("the 14th of may", "2023-05-14"),
    ("may 12 9am works", "2023-05-12"),
])
def test_a_day_typed_in_lower_case_or_as_an_ordinal_alone_is_dated(text, day):
    """A knowledge-update trial (session 34): "may 8" was the modal verb (and the plan's move thrown away as a
    hedge), "the 14th" no date at all."""
    r = resolve(text, REF)
    assert r is not None and r.granularity == "day" and r.when.date().isoformat() == day


@pytest.mark.parametrize("text", ["We may 12 times ask", "finished the 3rd book", "lives on the 3rd floor",
                                  "the 5th time this week", "it may 10:30 start",
                                  # a regression trial: ordinals of a rank or a film, dated as days
                                  "Jo was the 1st and only stylist I trust.", "She finished the 3rd at the bee.",
                                  "We're seeing the 2nd, and maybe the 3rd, Dune movie.",
                                  "Our team will be the 4th at the relay."])
def test_an_ordinal_of_something_else_or_the_modal_before_a_number_is_no_date(text):
    assert resolve(text, REF) is None
