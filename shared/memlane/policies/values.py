"""Two statements of one subject aligned word by word, and what the span where they differ is: another value of
one slot ("lives in Boston" / "lives in Denver"), or not — another relation ("works in Boston"), a value of another
kind (a number and none, another preposition), another quantity, or a relation narrowed by a phrase. Pure; no I/O.
`consolidation._another_value` reads a pair through these."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache

from ..domain import language as lang
from .statement import Statement


def with_stems(words: frozenset[str]) -> frozenset[str]:
    """The words and their stems: what a word list is matched against, a statement's words or its tokens."""
    return frozenset(words) | {lang.stem(w) for w in words}


def content(words: list[str], subject: str) -> list[str]:
    """The words that say what a statement is about: not filler, the subject, or its polarity — a negation, or an
    auxiliary that carries one ("doesn't", "can't": "User doesn't drink alcohol" and "User doesn't eat meat" share no
    relation, as `Statement.content` reads them too)."""
    return [w for w in words if w not in lang.FILLER and w != subject and w not in lang.NEGATIONS
            and "n't" not in w and "n’t" not in w]


@dataclass
class Alignment:
    replaced: list[tuple[list[str], list[str]]] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)  # words of the older statement the newer lacks
    only_new: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)


def align(old: list[str], new: list[str]) -> Alignment:
    """How `new` reads against `old` word by word. Read-only: one pair is often aligned twice (a
    change and its value), so the answer is kept."""
    return _aligned(tuple(old), tuple(new))


@lru_cache(maxsize=4096)
def _aligned(old: tuple[str, ...], new: tuple[str, ...]) -> Alignment:
    out = Alignment()
    previous: tuple[str, int] = ("", 0)  # the last opcode's tag and length
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            out.shared += old[i1:i2]
        elif tag == "replace":
            a, b = list(old[i1:i2]), list(new[j1:j2])
            last = out.replaced[-1] if out.replaced else None
            # "150 over 95" → "128 over 82": numbers split by one word are one value.
            if last is not None and previous == ("equal", 1) and numeric(last[0] + a) and numeric(last[1] + b):
                out.replaced[-1] = (last[0] + a, last[1] + b)
            else:
                out.replaced.append((a, b))
        elif tag == "delete":
            out.only_old += old[i1:i2]
        else:
            out.only_new += new[j1:j2]
        previous = (tag, max(i2 - i1, j2 - j1))
    return out


def numeric(words: list[str]) -> bool:
    return any(any(map(str.isdigit, w)) for w in words)


def another_quantity(new: Statement, old: Statement) -> bool:
    """A number of the memory that the newer statement follows with a unit the memory does not: another quantity
    ("User's sister is 30 minutes away" of "User's sister is 30"), not the same one said more fully (an age's
    "years old", or a detail after a comma: "214, next to the showers")."""
    for number in old.values & new.values:
        unit = _unit_after(new, number)
        if unit and unit != _unit_after(old, number) and unit not in lang.AGE_UNITS and content([unit], new.subject):
            return True
    return False


def _unit_after(said: Statement, number: str) -> str | None:
    """The word right after `number` in the statement (no mark between), stemmed."""
    m = re.search(rf"(?<![\w.,]){re.escape(number)}\s+([A-Za-z][\w'’-]*)", said.text)
    return lang.stem(m.group(1).lower()) if m else None


def another_relation(frame: Statement, old: Statement, spans: tuple[list[str], list[str]],
                      relation_words: list[str]) -> bool:
    """The spans that differ hold what the subject does (`_at_verb`): two relations, both of which can hold, not two
    values of one — "Ann lives in Boston" of "Ann works in Boston", "benched 180 pounds" of "weighs 180 pounds",
    "usually eats dinner around 7" of "usually goes to bed around 11". Unless it is told as what happened to the one
    relation with someone or something named ("rehomed Milo" of "owns a cat named Milo", "got into Stanford" of "is
    applying to Stanford", "broke up with Mark") — not what was done with it, said as the one known or where it stood
    ("took the Tacoma camping" of "drives a Tacoma", "picked up a double at Kaiser" of "works at Kaiser")."""
    was, now = spans
    if not (_at_verb(old, was) and _at_verb(frame, now)):
        return False
    verb = frame.shown.get(now[0], now[0]).lower() if now else ""
    happened = frame.entered or (verb.endswith("ed") or verb in lang.IRREGULAR_PAST) and verb != "used"
    named = [w for w in relation_words if old.shown.get(w, w)[:1].isupper()]
    after = frame.tokens[frame.tokens.index(now[0]) + 1:][:1] if now and now[0] in frame.tokens else []
    ends = frame.entered or verb in lang.CHANGING_PAST or verb in lang.STOP_CUES or verb in lang.LEAVING \
        or verb in lang.CHANGE_CUES or " ".join([verb, *after]) in lang.ENDING_PHRASES
    return not (happened and named and (ends or not all(_used_as_before(frame, old, w) for w in named)))


def _used_as_before(frame: Statement, old: Statement, word: str) -> bool:
    """The newer statement names the thing as the one known ("the Prius") or after the word it followed before."""
    def before(said: Statement) -> str | None:
        at = said.tokens.index(word) if word in said.tokens else 0
        return said.tokens[at - 1] if at else None
    now = before(frame)
    return now == "the" or (now is not None and now == before(old))


_ADVERBS = lang.FREQUENCY_ADVERBS | lang.TIME_ADVERBS


def qualified(frame: Statement, al: Alignment, subject: str) -> bool:
    """The newer statement narrows the relation with a phrase between its words and its value: "User's favorite
    restaurant in Chicago is ..." of "User's favorite restaurant is Nobu", "favorite movie this year is ..." — another
    relation; the broader one holds."""
    tokens, now = frame.tokens, al.replaced[0][1]
    if len(frame.clauses()) > 1:
        return False  # "User still has friends at Google, but User works at Meta now": another clause, not a narrowing
    start = tokens.index(now[0]) if now and now[0] in tokens else 0
    relation = min((tokens.index(w) for w in al.shared if w != subject and w in tokens[:start]), default=start)
    return any(relation < tokens.index(w) < start and tokens[tokens.index(w) - 1] in _NARROWING
               for w in content(al.only_new, subject) if w in tokens)


def _at_verb(said: Statement, span: list[str]) -> bool:
    """Whether `span` (of the statement's tokens, in order, not always in one piece) opens with its verb — the first
    token after its subject, its holder and adverbs ("User's son usually plays ..." → "plays") — or with an adverb
    before it ("barely uses the ...")."""
    tokens, at = said.tokens, 0
    if tokens[:1] == [said.subject]:
        at = 1
    if said.owner and tokens[at:at + 1] == [said.owner]:
        at += 1
    first = at
    while at < len(tokens) and (tokens[at] in _ADVERBS or tokens[at].endswith("ly")):
        at += 1
    if at >= len(tokens) or not span:
        return False
    return span[0] == tokens[at] or span[0] in tokens[first:at] and tokens[at] in span


# What a value opens with: another preposition is another slot ("in Houston" / "10 minutes from the office",
# "at Verizon" / "during lunch breaks"), but where one serves for the other ("works at / for", "lives in / at").
_PREPOSITIONS = frozenset(map(lang.stem, lang.PREPOSITIONS))
QUANTITIES = with_stems(lang.QUANTITIES)
_NARROWING = _PREPOSITIONS | {lang.stem(w) for w in ("this", "that", "these", "those")}  # "in Chicago", "this year"
_ALIKE = (frozenset(map(lang.stem, ("in", "at", "on", "inside", "within"))), frozenset({"at", "for"}))


def another_kind(was: list[str], now: list[str]) -> bool:
    """Two spans that cannot be two values of one slot: a number and no number ("is 8" / "is obsessed with
    dinosaurs", "Lexapro 10 mg" / "a pottery class"), another preposition or one and none, or a word pointing back
    ("worked there")."""
    def number(span: list[str]) -> bool:  # "10 mg", "$95", not the "x1" of a model's name
        return any(w[:1].isdigit() or w[:1] in "$€£" for w in span)

    def opener(span: list[str]) -> str | None:
        words = [w for w in span if w not in lang.TOWARD]
        return words[0] if words and words[0] in _PREPOSITIONS else None

    p, q = opener(was), opener(now)
    return (number(was) != number(now) or set(now) <= lang.PRO_FORMS or set(was) <= lang.PRO_FORMS
            or p != q and not (p and q and any(p in c and q in c for c in _ALIKE)))


def a_passing_state(frame: Statement, old: Statement, spans: tuple[list[str], list[str]]) -> bool:
    """The newer value is not another value of the slot but how its holder is now (a trial: "User's dog is sick
    today" of "... is a labrador", "User's cat is on a diet now" of "... is a maine coon"): a state of one day, or a
    phrase a preposition opens where the memory's value was a kind ("a maine coon"; not "is dating Chloe" / "is with
    Maria now", nor "is Monday at 6" / "is on Tuesday at 6")."""
    was, now = spans
    return _of_one_day(now) \
        or _opener(frame, now) in _PREPOSITIONS and _opener(old, was) not in _PREPOSITIONS and _a_kind(old, was)


_FROM_THEN = frozenset(map(lang.stem, ("starting", "from", "since", "of", "effective")))  # "as of today"


def _of_one_day(span: list[str]) -> bool:
    """"sick today", "tacos tonight" — not "... starting today", "as of today", "from tonight" (a regression trial:
    a change said to begin that day)."""
    return any(w in lang.OF_ONE_DAY and not (k and span[k - 1] in _FROM_THEN) for k, w in enumerate(span))


def _a_kind(said: Statement, span: list[str]) -> bool:
    """The span is a noun an article leads: "a labrador", "is an engineer"."""
    if span and span[0] in lang.ARTICLES:
        return True
    at = said.tokens.index(span[0]) if span and span[0] in said.tokens else 0
    return at > 0 and said.tokens[at - 1] in lang.ARTICLES


def _opener(said: Statement, span: list[str]) -> str | None:
    """The span's first word past articles, or else the token before it ("is on a diet" → "on")."""
    words = [w for w in span if w not in lang.ARTICLES and w not in lang.TOWARD]  # "revised ... to March 29"
    if not words or words[0] in _PREPOSITIONS or span[0] not in said.tokens:
        return words[0] if words else None
    before = [w for w in said.tokens[:said.tokens.index(span[0])] if w not in lang.ARTICLES]
    return before[-1] if before else None


_VALUE_ENDS = with_stems(lang.VALUE_ENDS)
CLAUSE_MARKS = with_stems(lang.CLAUSE_MARKS)


def value(span: list[str]) -> list[str]:
    """A differing span up to where a phrase of time, place or reason starts (its first word is the value's)."""
    end = next((i for i, w in enumerate(span) if i and w in _VALUE_ENDS), len(span))
    return span[:end]
