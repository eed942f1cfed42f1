"""What only looks like a change (write-time consolidation, policies/consolidation.py): readings under which a
statement that would otherwise replace or end a memory leaves it holding — a change denied, one the speaker ought to
make, one made to a setting of the thing remembered, a value said to go on, what held once, a plan for later, two
facts of one holder or one date. Each was a trial's wrong closure; each is narrowed where a regression trial found it
swallowing a real change (docs/benchmarks.md §5, session 27)."""

from __future__ import annotations

import re
from datetime import datetime

from ..domain import language as lang
from ..domain.models import Memory
from .statement import PEOPLE_STEMS, TOKEN, Statement, base, closest_clause


# "decided against moving", "instead of joining": the change named is the one not made.
_DENYING = lang.NEGATIONS | {"against", "instead", "almost", "nearly"}  # "almost moved to Charlotte": not made
_SUBJECTS = frozenset("user i we they he she".split())


def denied(before: list[str]) -> bool:
    """The change verb after `before` is denied: "is not moving", "never moved", "haven't moved ... yet",
    "decided against moving" — what holds still holds; not "can't believe User moved" (a subject between)."""
    last = max((i for i, w in enumerate(before) if w in _SUBJECTS), default=-1)
    return any(w in _DENYING or w.endswith(("n't", "n’t")) for w in before[last + 1:])


# A negation of an end: "not leaving nursing", "won't quit the band", "never gave up running".
_END_DENIED = re.compile(r"\b(?:not|never|no way|\w+n['’]t|cannot)\s+(?:\w+\s+)?"
                         r"(?:leav(?:e|es|ing)|left|quit(?:ting|s)?"
                         r"|stop(?:ping|ped|s)?|retir(?:e|ing|ed)|giv(?:e|es|en|ing) up|gave up|drop(?:ping|ped)? out"
                         r"|end(?:ing|ed)?)\b", re.I)


def end_denied(clause: Statement) -> bool:
    """`clause` denies an end: what it names goes on, however its "not" reads against the memory."""
    return _END_DENIED.search(clause.text) is not None


_SETTING_VERBS = frozenset("switch switched switching change changed changing update updated upgraded "
                           "move moved moving".split())
_DETERMINERS = frozenset("my our the their his her its".split())


def setting_of(clause: Statement, old: Statement) -> bool:
    """"switched User's Gmail to the dark theme", "changed User's Chase card to autopay", "moved the tesla to the
    other garage": the change is made to a thing `old` names (however it is written), to a setting or a place (no
    name after "to" but a day's), so the thing stays; "switched User's Gmail to Outlook" and "switched from Gmail to
    Outlook" replace it."""
    raw = TOKEN.findall(clause.text)
    at = next((i for i, w in enumerate(raw) if w.lower() in _SETTING_VERBS), None)
    if at is None or "to" not in (w.lower() for w in raw[at + 1:]):
        return False
    to = next(i for i in range(at + 1, len(raw)) if raw[i].lower() == "to")
    thing = [w for w in raw[at + 1:to] if w.lower() not in _DETERMINERS and base(w) != clause.subject]
    if "from" in (w.lower() for w in thing):
        return False
    named = {lang.stem(base(w)) for w in thing if base(w) in old.words and base(w) != old.subject}
    # not when the memory is about that thing's own setting ("User's Netflix plan is the basic one", "User's therapy
    # sessions are on Fridays" of "moved our sessions to Monday": its holder, the words before its "is")
    verb = next((i for i, w in enumerate(old.tokens) if w in _BE), 0)
    after = raw[to + 1:]
    # put off to another day: a plan the memory dates ("is flying to Tokyo on April 3" / "moved the Tokyo flight to
    # the 10th"), not a setting
    rescheduled = any(_a_when(w) for w in after) and any(_a_when(w) for w in TOKEN.findall(old.text))
    return bool(named) and old.owner not in named and not named & set(old.tokens[:verb]) and not rescheduled \
        and not any(w[:1].isupper() and w.lower() not in lang.WHEN_WORDS for w in after)


def _a_when(word: str) -> bool:
    return word.lower() in lang.WHEN_WORDS or word[:1].isdigit()


# Change cues that are verbs: a negation before one denies the change ("not in Denver anymore" says one).
_CUE_VERBS = lang.CHANGE_CUES - lang.WEAK_CUES - frozenset("anymore instead".split()) | {"moving"}


def cue_denied(clause: Statement) -> bool:
    """Each change cue of `clause` is a verb with a negation just before it, and no phrase says a change ("New" of
    "New York" is a name, no cue)."""
    words, raw = clause.words, clause._raw
    cues = [i for i, w in enumerate(words) if w in lang.CHANGE_CUES and not (i and raw[i][:1].isupper())]
    return bool(cues) and not lang.has_phrase(clause.text, lang.CHANGE_PHRASES) and all(
        words[i] in _CUE_VERBS and denied(words[max(0, i - 3):i]) for i in cues)


# "still at Mount Sinai", "staying at Comcast", "remains with Chase": what the name after them holds goes on.
_GOES_ON = frozenset("still stay stays staying stayed remain remains remaining remained".split())
_AT = frozenset("at with in on for".split())
_BE = frozenset("am is are was were be been being 's 'm 're ’s ’m ’re".split())


def goes_on(new: Statement, old: Statement) -> bool:
    """A clause of `new` says that what `old` holds goes on — "still" (or "staying", "remains") at every name and
    number the memory holds ("didn't take the Verizon offer, User is staying at Comcast"; "quit the night shifts
    but User is still at Mount Sinai") — with the same polarity, and no other clause says anything of the memory's:
    the memory holds. Not "still loves Austin, but moved to Dallas" (still what?), "still with Stripe, relocated to
    the London office" of "works at Stripe in Dublin" (not all it holds), "still at Atlassian, got promoted to senior
    developer" of "junior developer at Atlassian" (another clause of the same holder changes it: "User's sister moved
    to Dallas" is hers), nor "still doesn't eat meat"."""
    held = {base(w) for w in TOKEN.findall(old.text)[1:] if w[:1].isupper() and base(w) != old.subject} | old.values
    if not held:
        return False
    clauses = new.clauses()
    for c in clauses:
        if c.negated != old.negated or not held <= {base(w) for w in TOKEN.findall(c.text)}:
            continue
        others_say = any(o is not c and o.owner == old.owner and o.content & old.content for o in clauses)
        if not others_say and _still_at_a_name(TOKEN.findall(c.text), {lang.stem(w) for w in old.words}):
            return True
    return False


_STILL_ON = re.compile(r"\bstill (?:on|happening|going ahead)\b", re.I)
_SAYS_MOST = 2 / 3  # of the memory's content words (as a denial must cover: RETRACT_COVERAGE)


def reaffirmed(new: Statement, old: Statement) -> bool:
    """Another clause of `new` says with "still" what `old` says — most of its words ("the conference dinner got
    cancelled, but User is still flying to Denver next Friday"), or that what it names is still on ("the kickoff
    dinner is cancelled, the kickoff itself is still on") — and no clause says a change but an end (a cue: "still at
    Google, but now as a manager" changes the role): what ended is something beside the memory (a plans trial). Not
    "still loves Austin, but moved to Dallas" of "lives in Austin" (a word of it, not what it says)."""
    clauses = new.clauses()
    if len(clauses) < 2 or any(c.moves or c.change and not c.stops for c in clauses):
        return False
    for c in clauses:
        if "still" not in c.words or c.stops or c.negated != old.negated:
            continue
        shared = c.content & old.content
        named = c.content - {"itself", "themselv"}  # "the kickoff itself"
        if len(shared) >= _SAYS_MOST * len(old.content) or _STILL_ON.search(c.text) and named and named <= shared:
            return True
    return False


def _still_at_a_name(raw: list[str], old_stems: set[str]) -> bool:
    """"still at Mount Sinai", "is staying with Chase", "still works at Google" (the memory's own verb between)."""
    for i, w in enumerate(raw):
        if w.lower() not in _GOES_ON:
            continue
        j = i + 1
        between = raw[j].lower() if j < len(raw) else ""
        if between not in _AT and (between in _BE or lang.stem(between) in old_stems):
            j += 1
        if j + 1 < len(raw) and raw[j].lower() in _AT and raw[j + 1][:1].isupper():
            return True
    return False


# "should", "ought to": what the speaker thinks right, not what is — in the clause that would say the change ("I
# really should quit Walmart"), not beside one made ("sold the Civic, User should get winter tires for the RAV4").
_OUGHT = re.compile(r"\b(?:should|ought to)\b", re.I)


def ought(new: Statement, old: Statement) -> bool:
    """"should" or "ought to" in a clause of the change: the closest to the memory, or one with a change cue."""
    closest = closest_clause(new, old)
    return any(_OUGHT.search(c.text) for c in new.clauses()
               if c is closest or c.reported_change or c.moves or c.stops)


_WHEN = frozenset({*lang.MONTHS, *lang.WEEKDAYS} | {lang.stem(w) for w in (*lang.MONTHS, *lang.WEEKDAYS)})


def only_when(relation_words: list[str]) -> bool:
    """The words two statements share are a date ("... dentist appointment on January 20, 2026" / "a meeting ... on
    December 30, 2026"): the same year is no relation (a dream closed the appointment by the meeting)."""
    return all(any(map(str.isdigit, w)) or w in _WHEN for w in relation_words)


def only_whose(relation_words: list[str], old: Statement) -> bool:
    """The words two statements share say only whose fact it is — a person or an animal of the subject's, or one
    named ("User's son Eli", "User's dog Rufus") — no relation: another value is then only a number said of the holder
    alone ("is 11" / "is 12"). "User's apartment is in Queens" of "... in Brooklyn" names an attribute, not a holder."""
    if not (old.holder_name or old.owner in PEOPLE_STEMS):
        return False
    holder = {old.subject, old.owner, lang.stem(old.holder_name)}
    return all(w in holder for w in relation_words)


def says_a_change(frame: Statement, old: Statement, a: list[str], b: list[str]) -> bool:
    """Of two statements of one holder (`only_whose`), the newer says a change of the older's value, not a fact of
    its own: a number for a number ("Leo is 9" / "is 10": not "Max weighs 30 pounds" / "is 6 years old"), a change
    cue ("is a paralegal now", "eats meat again"), or a verb in the past the memory does not say ("married Luis",
    "enrolled at Riverside Academy", "graduated": what happened to the holder since) — a regression trial's."""
    if a and b and all(any(map(str.isdigit, w)) for w in a + b):
        return True
    return frame.change or any(w.endswith("ed") and w not in old.words for w in frame.words)


def told_in_past(frame: Statement, old: Statement, relation_words: list[str]) -> bool:
    """The relation's verb is in the past where the memory's is in the present ("worked" / "works"): what held
    once, which says nothing of what holds now — unless in the present perfect ("has worked at Nvidia since
    March": what holds)."""
    raw = frame._raw
    for w in relation_words:
        said = frame.shown.get(w, "")
        if not said.endswith("ed") or old.shown.get(w, "ed")[-2:] == "ed":
            continue
        at = raw.index(said) if said in raw else 0
        before = raw[at - 1].lower() if at else ""
        if before not in ("has", "have") and not before.endswith(("'ve", "’ve")):
            return True
    return False


# A change or an end already made, in its past form ("moved", "joined", "sold", "left", "got promoted").
_PAST_CUES = frozenset(w for w in lang.CHANGE_CUES | lang.STOP_CUES if w.endswith("ed")) | {"sold", "left", "became"}


def made_any(said: Statement) -> bool:
    """A change already made, in any clause: its time said ("next week") is another clause's ("joined Stripe in
    January and flies to Dublin next week for onboarding"), not the change's."""
    return not _PAST_CUES.isdisjoint(said.words)


def planned(event_time: datetime | None, said_at: datetime | None, memory: Memory) -> bool:
    """A statement of what will happen (its time after it was said) changes no standing memory — one said of no
    time ("lives in Houston") — until then; a memory of a time (an appointment) it may move."""
    return event_time is not None and said_at is not None and event_time > said_at and memory.event_time is None
