"""The context card's packer and renderer (policies/context_card.py): budget, cuts, stable text."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings, strategies as st

from memlane.adapters.tokenizers.hf import HFTokenizer
from memlane.policies.context_card import SECTIONS, Entry, Section, pack

TOKENIZER = HFTokenizer()

WORDS = ["Caroline", "went", "to", "the", "LGBTQ", "support", "group", "on", "7", "May", "2023", "Melanie",
         "paints", "sunsets", "Überraschung", "naïve", "café", "🙂", "pottery", "adoption", "agency", "it's",
         "re-reading", "(draft)", "#tag", "e-mail:", "x@y.z", "1,300", "euros", "—", "Lisbon", "tokenization"]
ENDS = [".", "!", "?", "", ";"]
GROUPS = ["", "2023-05-07", "2023-06-01", "2024-01-20"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    sentences = []
    for _ in range(draw(st.integers(1, 4))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=25))
        sentences.append(" ".join(words) + draw(st.sampled_from(ENDS)))
    return " ".join(sentences)


@st.composite
def section_lists(draw: st.DrawFn) -> list[Section]:
    out = []
    for name in draw(st.lists(st.sampled_from(SECTIONS), unique=True, max_size=len(SECTIONS))):
        n = draw(st.integers(0, 8))
        entries = tuple(Entry(key=f"{name}-{i}", text=draw(texts()), value=draw(st.floats(0.0, 1.0)), position=i,
                              evidence=tuple(draw(st.lists(st.sampled_from(["m1", "m2", "m3", "m4"]), max_size=2))),
                              group=draw(st.sampled_from(GROUPS)) if name == "memories" else "")
                        for i in range(n))
        out.append(Section(name, entries, contiguous=name == "recent"))
    return out


@settings(max_examples=300, deadline=None)
@given(section_lists(), st.integers(0, 400))
def test_the_rendered_card_never_exceeds_the_budget(sections: list[Section], budget: int) -> None:
    card = pack(sections, budget, TOKENIZER)
    assert TOKENIZER.count(card.text) == card.total <= budget
    # Nothing vanishes without a trace: every entry is kept, or counted in the section's cut.
    for s in sections:
        kept = len(card.kept.get(s.name, ()))
        cut = next((c for c in card.cut if c.section == s.name), None)
        assert kept + (cut.dropped if cut else 0) == len(s.entries)


class CharTokenizer:
    """A tokenizer whose counts do not add up line by line (one token per 4 characters of the whole text):
    the packer's estimate is then wrong, and the check of the rendered text must still hold the budget."""

    name = "chars/4"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(t) for t in texts]


@settings(max_examples=200, deadline=None)
@given(section_lists(), st.integers(0, 400))
def test_the_budget_holds_with_a_tokenizer_that_does_not_add_up(sections: list[Section], budget: int) -> None:
    tok = CharTokenizer()
    card = pack(sections, budget, tok)
    assert tok.count(card.text) == card.total <= budget


def _state() -> list[Section]:
    return [
        Section("recent", tuple(Entry(f"msg-{i}", f"Caroline: message number {i}.", 1.0 - i / 10, position=10 - i,
                                      evidence=(f"msg-{i}",)) for i in range(6)), contiguous=True),
        Section("memories", (Entry("mem-a", "Caroline went to a support group on 7 May 2023.", 0.9, 0, ("m1",)),
                             Entry("mem-b", "Melanie paints sunsets.", 0.4, 1, ("m2",)))),
        Section("agent_profile", (Entry("role", "A friendly travel planner.", 1.0, 0),)),
        Section("user_profile", (Entry("residence", "residence: Lisbon", 0.9, 0),)),
        Section("summary", (Entry("s0", "Caroline and Melanie talked about art.", 0.6, 0, ("m3",)),)),
        Section("plans", (Entry("plan", "Caroline plans to adopt a child.", 0.5, 0, ("m4",)),)),
    ]


def test_sections_render_least_volatile_first_and_byte_identical_for_the_same_state() -> None:
    card = pack(_state(), 1500, TOKENIZER)
    shuffled = [Section(s.name, tuple(random.Random(7).sample(s.entries, len(s.entries))), s.contiguous)
                for s in reversed(_state())]
    again = pack(shuffled, 1500, TOKENIZER)

    assert again.text.encode() == card.text.encode()
    headers = [line for line in card.text.splitlines() if line.startswith("## ")]
    assert headers == ["## Agent profile", "## User profile", "## Conversation summary", "## Relevant memories",
                       "## Open plans", "## Recent messages"]
    # Recent turns in their order in the thread, however they were valued.
    recent = card.text.split("## Recent messages\n", 1)[1].splitlines()
    assert recent == [f"- Caroline: message number {i}." for i in reversed(range(6))]
    assert card.cut == ()
    assert card.evidence[:1] == ("m3",) and set(card.evidence) >= {"m1", "m2", "m4", "msg-0", "msg-5"}
    assert sum(card.tokens.values()) == card.total


def test_a_section_that_does_not_fit_is_cut_and_says_so() -> None:
    long_turn = ("Caroline: I went to the support group yesterday. It was powerful. Everyone shared their story. "
                 "I felt accepted for the first time in years. I want to give back to the community.")
    sections = [Section("recent", (Entry("old", "Melanie: hi there.", 0.5, 0, ("old",)),
                                   Entry("new", long_turn, 1.0, 1, ("new",))), contiguous=True),
                Section("memories", tuple(Entry(f"m{i}", f"Memory number {i} says something about pottery.", 0.01, i)
                                          for i in range(20)))]
    card = pack(sections, 40, TOKENIZER)

    assert card.total <= 40
    cut = {c.section: c for c in card.cut}
    # The newest turn is shortened at a sentence boundary rather than lost; the older one goes with it.
    [kept] = card.kept["recent"]
    assert kept.key == "new" and kept.text.startswith("Caroline: I went to the support group yesterday.")
    assert kept.text.endswith("…") and cut["recent"].truncated == 1 and cut["recent"].dropped == 1
    assert cut["memories"].dropped == 20 - len(card.kept.get("memories", ()))
    assert "old" not in card.evidence


def test_recent_turns_stay_contiguous_when_the_budget_runs_out() -> None:
    turns = [Entry(f"t{i}", f"Speaker: turn {i} " + "word " * (3 if i != 3 else 30), 1.0 - i / 10, position=-i)
             for i in range(6)]
    card = pack([Section("recent", tuple(turns), contiguous=True)], 60, TOKENIZER)
    keys = [e.key for e in card.kept["recent"]]
    # newest first by value: t0, t1, t2 fit, t3 is too long (one sentence); t4 and t5 must not jump the gap
    assert keys == ["t2", "t1", "t0"]
    assert card.cut[0].section == "recent" and card.cut[0].dropped == 3


def test_an_empty_budget_gives_an_empty_card() -> None:
    card = pack(_state(), 0, TOKENIZER)
    assert card.text == "" and card.total == 0 and card.kept == {}
    assert {c.section for c in card.cut} == set(SECTIONS)


class RecordingTokenizer:
    name = "recording"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: list[str]) -> list[int]:
        self.texts += texts
        return TOKENIZER.count_many(texts)


def test_no_shortening_is_counted_when_the_room_left_is_below_its_first_sentences_words() -> None:
    """Once the budget was nearly spent, every entry left was tried for shortening with a tokenizer call
    (77 a card on LoCoMo): a prefix whose words alone outnumber the tokens left cannot fit."""
    filler = Entry("fill", "Priya lives in Lisbon.", 1.0, 0)
    long_ = tuple(Entry(f"m{i}", "Priya told a long story about her garden and her neighbours there. " * 3, 0.5, i)
                  for i in range(5))
    tok = RecordingTokenizer()
    fits = TOKENIZER.count("## Relevant memories\n- Priya lives in Lisbon.")

    card = pack([Section("memories", (filler, *long_))], fits + 3, tok)

    assert [e.key for e in card.kept["memories"]] == ["fill"]
    assert not [t for t in tok.texts if t.endswith("…")]


def _shortened_by_scanning(entry: Entry, room: int) -> tuple[str, int] | None:
    """The shortening as it was, every prefix counted in turn: the reference for `_shorten`."""
    from memlane.policies.context_card import _SENTENCE_END, ELLIPSIS, _line

    sentences = _SENTENCE_END.split(entry.text.strip())
    if room <= 0 or len(sentences) < 2 or len(sentences[0].split()) + 1 > room:
        return None
    best = None
    for i in range(1, len(sentences)):
        text = " ".join(sentences[:i]) + ELLIPSIS
        cost = TOKENIZER.count(_line(text))
        if cost > room:
            break
        best = (text, cost)
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(texts(), min_size=1, max_size=4), st.integers(-1, 120))
def test_a_shortened_entry_is_the_longest_prefix_that_fits_as_a_scan_finds_it(parts: list[str], room: int) -> None:
    from memlane.policies.context_card import _shorten

    entry = Entry("e", " ".join(parts), 0.5, 0)
    assert _shorten(entry, room, TOKENIZER) == _shortened_by_scanning(entry, room)


def test_shortening_a_very_long_entry_counts_a_few_prefixes_not_every_one() -> None:
    """A working-memory trial: a card of six 31,000-character turns took 13 s, every prefix of each turn counted
    (quadratic in its sentences) on each of the packer's tries."""
    from memlane.policies.context_card import _shorten

    entry = Entry("long", "Priya told a long story about her garden and her neighbours there. " * 500, 0.5, 0)
    tok = RecordingTokenizer()
    shortened = _shorten(entry, 200, tok)
    assert shortened is not None and shortened[1] <= 200
    assert len(tok.texts) <= 12 and sum(len(t) for t in tok.texts) < 20_000


def test_distinct_keeps_the_first_of_near_identical_texts_and_what_is_new() -> None:
    from memlane.policies.context_card import distinct

    texts = ["User: Long Monday today, pouring with rain from start to finish.",
             "User: Long Monday today, windy with rain from start to finish.",  # one word changed
             "User: Long Monday today.",  # shorter: every word of it was said
             "Noor booked the Bristol 10K for the 14th of September."]
    shown = ["[2026-06-01] user: Long Monday today, pouring with rain from start to finish."]

    assert distinct(texts, []) == [True, False, False, True]
    assert distinct(texts, shown) == [False, False, False, True]  # the first restates a shown turn
    assert distinct(texts, [], alike=2) == [True, True, False, True]  # two alike may go in, not a third
    assert distinct(texts, [], alike=0) == [True, True, True, True]


# -- entries grouped under a label (memories under their date) -------------------------------------


def test_entries_of_a_group_render_under_its_label_once_groups_in_label_order() -> None:
    memories = Section("memories", (
        Entry("a", "Caroline went to the support group.", 0.9, 0, group="2023-05-08"),
        Entry("b", "Melanie paints sunsets.", 0.8, 1, group="2023-05-07"),
        Entry("c", "Caroline researched adoption agencies.", 0.7, 2, group="2023-05-08"),
        Entry("d", "Melanie likes pottery.", 0.6, 3)))
    card = pack([memories], 1000, TOKENIZER)
    assert card.text == "\n".join([
        "## Relevant memories", "- Melanie likes pottery.",
        "2023-05-07:", "- Melanie paints sunsets.",
        "2023-05-08:", "- Caroline went to the support group.", "- Caroline researched adoption agencies."])
    assert card.total == TOKENIZER.count(card.text) == card.tokens["memories"]


def test_a_group_label_is_paid_for_once_and_only_when_an_entry_of_it_fits() -> None:
    line = "Melanie paints sunsets."
    one = pack([Section("memories", (Entry("a", line, 0.9, 0, group="2023-05-07"),))], 1000, TOKENIZER).total
    two = pack([Section("memories", (Entry("a", line, 0.9, 0, group="2023-05-07"),
                                     Entry("b", "Caroline went to the support group.", 0.8, 1,
                                           group="2023-05-07")))], 1000, TOKENIZER).total
    assert two - one == TOKENIZER.count("- Caroline went to the support group.")
    # A budget that holds the section's header and the line but not the label: nothing half-shown.
    card = pack([Section("memories", (Entry("a", line, 0.9, 0, group="2023-05-07"),))], one - 1, TOKENIZER)
    assert card.text == "" and card.cut[0].dropped == 1


def test_a_memory_line_drops_a_speaker_prefix_its_text_names_again_and_a_reply_quote_on_request() -> None:
    from memlane.policies.context_card import compact

    said = "Melanie: Melanie ran a charity race for mental health last Saturday."
    assert compact(said) == "Melanie ran a charity race for mental health last Saturday."
    other = "Melanie: The event was really thought-provoking."  # the speaker named only by the prefix: kept
    assert compact(other) == other
    reply = "Melanie: These are for running, Melanie said. (replying to Caroline: For walking or running?)"
    assert compact(reply) == "These are for running, Melanie said. (replying to Caroline: For walking or running?)"
    assert compact(reply, replies=False) == "These are for running, Melanie said."
    assert compact("Caroline: Melanie's kids love it.") == "Caroline: Melanie's kids love it."  # another name
