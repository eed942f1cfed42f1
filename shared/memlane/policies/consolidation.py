"""How memlane decides that a fact changed: compare a new statement with the nearest memories of
its subject and decide ADD, UPDATE (supersede), DELETE (retract) or NOOP. Pure; no I/O.

No table of attributes: the two statements are aligned word by word (their subject, the words
they share — the relation — and the words that differ — the value), and read for cues:

- **NOOP**: one says nothing the other does not (same value, nothing new). Embeddings blur
  numbers and names, so "code word zz3q1tok" / "code word zz3q6tok" is never a duplicate.
- **UPDATE**: the same subject and relation with another value ("User's apartment is in
  Brooklyn" → "... in Queens": one differing span in an otherwise identical statement — or clause
  of it; a value ends where a phrase of time, place or reason starts; entering a state, "got a job
  as", "started at", aligns with being in it, "works as", "works at"); or a change cue ("moved",
  "switched", "now", "instead") in a statement about what the old one is about; or an end of what
  the old one names with a new state ("quit teaching and became ..."); or a fuller restatement of
  the same value (the older, shorter one is folded into it).
- **DELETE**: the new statement denies what the old one says ("not allergic ... after all",
  "no longer vegan", "quit smoking"): the old one is closed; the retraction itself is kept.
- **ADD**: anything else, and always when both can hold: an additive cue ("also", "too"), or a
  relation that holds several values at once (have, like, speak, allergic to) without a change cue.

When the new statement was said *before* the memory it contradicts (an imported history), the
memory stays current and the new statement is written already superseded (`older`).

Both places that decide use this module: write time (services/consolidate.py, each new statement
against its nearest memories) and the dream (dream/rules.py, each memory against the older ones of
its agent — what write time could not see: memories written with MEMLANE_CONSOLIDATE_ON_WRITE off or
imported before consolidation existed). Each decision carries the kind of evidence it rests on
(`Evidence`) and that kind's confidence (`CONFIDENCE`), calibrated on the knowledge-update test set
with `memlane bench calibrate` (bench/calibrate.py): a dream in `safe_auto` applies what reaches the
store's `dream_threshold` (0.8 by default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from ..domain.models import ExtractAction, Memory, MemoryType
from ..domain import language as lang
from . import called_off, still_holds, timeexpr, values
from .statement import PEOPLE_STEMS, TOKEN, Statement, base, statement
from .statement import closest_clause as _closest_clause


# Statements longer than this are passages (documents, long turns), not facts to supersede.
MAX_OLD_WORDS = 40
MAX_NEW_WORDS = 30
MAX_VALUE_WORDS = 5  # a differing span longer than this is another statement, not another value
CUE_SIMILARITY = 0.5  # a change cue counts for a memory at least this close sharing a content word
WEAK_CUE_SIMILARITY = 0.6  # ... this close for a weak cue ("now", "currently")
CUE_ONLY_SIMILARITY = 0.65  # ... or this close without one
RETRACT_COVERAGE = 0.67  # share of one statement's content the other's denial must repeat
FRAME_SHARE = 0.5  # words two statements share, of the new one's, for "same relation, another value"
TOPIC_SHARE = 0.25  # content words shared, of the old statement's, for a change cue to be about it


@dataclass(frozen=True)
class Neighbour:
    memory: Memory
    similarity: float  # cosine of the candidate to this memory


@dataclass(frozen=True)
class Decision:
    action: ExtractAction
    targets: tuple[Memory, ...] = ()
    confidence: float = 1.0
    reason: str = ""
    older: bool = False  # the candidate predates its target: the target stays current
    evidence: str = ""  # the `Evidence` kind of a rules decision

    @property
    def target(self) -> Memory | None:
        return self.targets[0] if self.targets else None


class Evidence:
    """What a decision rests on. Each kind has one confidence (`CONFIDENCE`)."""

    DUPLICATE = "duplicate"  # near-identical in meaning, same numbers and names
    SAME = "same"  # says nothing the other does not
    RESTATEMENT = "restatement"  # the same value, said with more detail
    VALUE_CUE = "value_cue"  # same relation, another value, with a change cue ("now", "switched")
    VALUE = "value"  # same relation, another value, no cue
    STATE_CHANGE = "state_change"  # a change verb whose state the old statement is in ("moved to X")
    CHANGE_CUE = "change_cue"  # a change cue in a statement about what the old one is about
    CUE_CLOSE = "cue_close"  # a change cue in a statement that is only close in meaning (no shared word)
    DENIAL = "denial"  # says the same with the other polarity
    ENDED = "ended"  # says it stopped ("quit", "cancelled", "gone")
    ENDED_REPLACED = "ended_replaced"  # stopped, and something else took its place


# The idea each kind of evidence rests on, and whether it is the weaker form of it: the calibration
# estimates precision per idea (more cases than per kind) and gives the weaker form 0.05 less.
FAMILY = {
    Evidence.VALUE_CUE: ("another value", False), Evidence.VALUE: ("another value", True),
    Evidence.STATE_CHANGE: ("reported change", False), Evidence.CHANGE_CUE: ("reported change", True),
    Evidence.ENDED_REPLACED: ("reported change", True), Evidence.CUE_CLOSE: ("cue, close in meaning", False),
    Evidence.DENIAL: ("retraction", False),
    Evidence.ENDED: ("retraction", True), Evidence.RESTATEMENT: ("restatement", False),
    Evidence.SAME: ("same fact", False), Evidence.DUPLICATE: ("same fact", False),
}
# Set from `memlane bench calibrate` (the knowledge-update set, plus real conversations where a fact
# rarely changes; the tables are in docs/benchmarks.md §6): per idea, the precision it would have with
# one more mistake than was seen, rounded down to 0.05, at most 0.95; the weaker form 0.05 less. (A
# restatement found in real talk was right on review, so it counts as right.) A store's default
# dream_threshold (0.8) lets every kind through but `cue_close`: its changes on real conversations
# were all remarks ("Now Audrey is gonna order some sushi"), so they wait for review.
CONFIDENCE = {
    Evidence.VALUE_CUE: 0.9, Evidence.VALUE: 0.85, Evidence.STATE_CHANGE: 0.9, Evidence.CHANGE_CUE: 0.85,
    Evidence.ENDED_REPLACED: 0.85, Evidence.CUE_CLOSE: 0.15, Evidence.DENIAL: 0.85, Evidence.ENDED: 0.8,
    Evidence.RESTATEMENT: 0.85, Evidence.SAME: 0.95, Evidence.DUPLICATE: 0.95,
}


@dataclass(frozen=True)
class Relation:
    action: ExtractAction  # UPDATE, DELETE or NOOP
    evidence: str  # an `Evidence` kind
    reason: str

    @property
    def confidence(self) -> float:
        return CONFIDENCE[self.evidence]


_SET_VALUED = values.with_stems(lang.SET_VALUED)


def _set_valued(words: list[str]) -> bool:
    return any(w in _SET_VALUED or lang.stem(w) in _SET_VALUED for w in words)


def relate(new: Statement, old: Statement, similarity: float) -> Relation | None:
    """How the newer statement `new` bears on the older `old`; None when both simply hold."""
    if (said := _without_others_words(new)) is not None:
        return relate(statement(new._prefix + said), old, similarity) if said.strip(" ,.!?") else None
    if (as_written := _as_old_writes(new, old)) is not None:
        return relate(as_written, old, similarity)
    if new.parts and old.sentences <= 1:
        changed = _sentence_that_changes(new, old, similarity)
        if changed is not None:
            return changed
    if not _comparable(new, old) or _ages_apart(new, old):
        return None
    if not _facts(new, old):
        if (thing := called_off.called_off(new, old)) is not None:
            return _calls_off(thing)
        # Only "says nothing new" is read off a passage or a remark; a change needs two statements of fact.
        al = values.align(old.tokens, new.tokens)
        if (not al.replaced and not values.content(al.only_new, new.subject) and values.content(al.shared, new.subject)
                and _closest_clause(new, old).negated == old.negated and _one_holder(new, old)):
            return Relation(ExtractAction.NOOP, Evidence.SAME, "says nothing the memory does not")
        return None
    if not (new.reported_change or new.moves or _share_words(new, old) or new.states.keys() & old.states.keys()):
        return None  # no reading below can find a change (or "nothing new") without either: skip aligning
    relation = _read_change(new, old, similarity)
    if relation is None and (thing := called_off.called_off(new, old)) is not None:
        return _calls_off(thing)  # "dropped out of the chicago half": no other reading of the pair says so
    if relation is not None and relation.action in _CHANGES and lang.ironic(new.text) and not new.moves:
        # "oh sure, User is the CEO now", "drives a lamborghini, obviously 🙄": a state claimed in irony (a move
        # reported beside an eye roll is one: "moved to Denver 🙄 the altitude")
        return None
    if relation is not None and relation.action in _CHANGES and relation.evidence != Evidence.RESTATEMENT:
        if _hedged(new, relation) or still_holds.ought(new, old) or lang.past_frame(new.text) or _ahead(new) \
                or still_holds.goes_on(new, old) or still_holds.reaffirmed(new, old) \
                or not (new.change or new.moves) and (lang.for_now(new.text) or lang.stays(new.text)) \
                or _stopped_at_some_times(new) or lang.recurring(old.text) and lang.one_occasion(new.text):
            # "might move to Munich", "if User gets the job": a possibility changes nothing that holds; nor does
            # narration of the past ("back in college User worked as a lifeguard"), nor a plan ("will be moving to
            # Austin": where User lives holds until then), nor a stand-in ("is driving a rental this week"), nor a
            # habit stopped at some times only ("stopped driving to work when it snows"), nor one occasion of a habit
            # ("piano every Tuesday" / "the lesson tomorrow is cancelled").
            return None
        if lang.used_to(new.text) and not new.reported_change:
            # A value that held once ("used to work at Juniper" of "works at Cisco") changes nothing: what the
            # statement says besides it may ("User's favorite color is green; it used to be blue"), and a change
            # it reports does ("used to live in Houston, now lives in San Antonio").
            rest = [c.text for c in new.clauses() if not lang.used_to(c.text)]
            return relate(statement(new._prefix + ", ".join(rest)), old, similarity) \
                if rest and len(rest) < len(new.clauses()) else None
    return relation


def _without_others_words(new: Statement) -> str | None:
    """`new` without the sentences it quotes someone else as saying ("she texted User 'User moved to denver!!'", a
    trial: the quote's "i" written as the speaker's), or None when it quotes none. The subject's own words stand:
    "User told User's mom 'User is moving to Denver'"."""
    if not any(mark in new.text for mark in QUOTE_MARKS):
        return None
    out, at = [], 0
    for m in lang.QUOTED.finditer(new.text):
        if not _says_it(TOKEN.findall(new.text[:m.start()]), new.subject):
            out.append(new.text[at:m.start()])
            at = m.end()
    return "".join(out) + new.text[at:] if out else None


QUOTE_MARKS = "'\"‘“"  # what opens a quotation: `_without_others_words` reads a text without one as it is
_OTHERS_SAYING = frozenset("he she they we you it".split())


def _as_old_writes(new: Statement, old: Statement) -> Statement | None:
    """`new` written as `old` writes the same: the names `old` holds with their capital where chat wrote them in lower
    case ("User and ben broke up" of "User is dating Ben"), and `old`'s subject first in a subject it shares ("Mark
    and User broke up" reads "User and Mark broke up": the change is the holder's as much as Mark's). None when
    nothing is written otherwise."""
    # Most pairs have neither: read on the two's word lists before any pattern (a search relates its hits' pairs).
    lower = {w for w in new._raw if w.islower()}
    names = {b: w for w, b in zip(old._raw[1:], old.words[1:]) if b in lower and w[:1].isupper() and b != old.subject
             and b not in lang.STOP_WORDS}
    text = _LOWER_WORD.sub(lambda m: names.get(m[0], m[0]), new.text) if names else new.text
    joint = joint_subject(new, text)
    if joint is not None and base(joint["second"]) == old.subject and base(joint["first"]) != old.subject:
        text = f"{joint['second']} and {joint['first']}{text[joint.end():]}"
    return statement(new._prefix + text) if text != new.text else None


_LOWER_WORD = re.compile(r"\b[a-z][\w'’\-]*")
_JOINT = re.compile(r"(?P<first>[A-Z][\w'’\-]*) and (?P<second>[A-Z][\w'’\-]*)\b")


def joint_subject(new: Statement, text: str) -> re.Match[str] | None:
    """A subject of two opening `text` (`new` as written, or with the older's names), "Mark and User": `_as_old_writes`
    may write the older's subject first."""
    return _JOINT.match(text) if len(new._raw) > 2 and new._raw[1] == "and" else None


def _says_it(before: list[str], subject: str) -> bool:
    """The first of its words before a quotation that can say it is the subject ("last night User texted the group
    chat '...'", "so User finally told User's sister: '...'") — not another ("she texted User '...'", "User's manager
    said '...'", "the ad said '...'")."""
    for word in before:
        if word.lower() == subject:
            return True
        if word.lower() in _OTHERS_SAYING or word.lower() in (f"{subject}'s", f"{subject}’s"):
            return False
    return False


def _calls_off(thing: str) -> Relation:
    return Relation(ExtractAction.DELETE, Evidence.ENDED, f"calls off what the memory plans ('{thing}')")


def _stopped_at_some_times(new: Statement) -> bool:
    """Each clause that reports a change stops a habit at some times only (`lang.narrowed`)."""
    changing = [c for c in new.clauses() if c.change or c.stops or c.moves]
    return bool(changing) and all(c.stops and lang.narrowed(c.text) for c in changing)


def _hedged(new: Statement, relation: Relation) -> bool:
    """Said as a possibility, a wish, a condition or an intention (`lang.irrealis`). A hedge in a clause after a change
    already made to a new value ("joined HSBC in March, User hopes it's a good fit", "relocated to Sydney, maybe the
    best decision we ever made") speaks of the change, it does not make it a possibility: the change holds. "If User
    gets the job, User will move", "will move to Munich if ..." and "wanted to move, maybe next year" stay
    possibilities; and a hedge keeps hiding what only a cue reads as a change ("joined Google in 2020, maybe User
    will stay there" of "works at Google": a regression trial)."""
    if not lang.irrealis(new.text):
        return False
    first, *rest = new.clauses()
    return not rest or lang.irrealis(first.text) or not _made(first) or relation.evidence not in _NEW_VALUE


# A change to a value the old statement does not name: a move or a new employer named, another value said.
_NEW_VALUE = frozenset({Evidence.STATE_CHANGE, Evidence.VALUE, Evidence.VALUE_CUE})
# A plan said in the main clause ("will be moving to Austin", "is going to quit"): what holds holds until then.
_FUTURE = re.compile(r"\b(?:will|shall|['’]ll|going to|gonna)\b", re.I)


def _ahead(new: Statement) -> bool:
    return _FUTURE.search(new.clauses()[0].text) is not None


def _made(clause: Statement) -> bool:
    """The clause reports a change of state already made: a change verb in its past form ("moved", "joined")."""
    return any(w.endswith("ed") and lang.stem(w) in lang.CHANGE_VERBS for w in clause.words)


_CHANGES = (ExtractAction.UPDATE, ExtractAction.DELETE)
# Evidence that a state changed or ended ("joined", "moved", "quit", a value said with a change cue): it closes
# what holds, not a memory of what happened before it was said (memory_type event, its time past: "went to a
# support group yesterday", closed by "joined an activist group" on LoCoMo), which only a denial ("never went"),
# a corrected value without a cue ("it was on the 5th") or a restatement closes.
_STATE_EVIDENCE = frozenset({Evidence.STATE_CHANGE, Evidence.CHANGE_CUE, Evidence.CUE_CLOSE, Evidence.ENDED,
                             Evidence.ENDED_REPLACED, Evidence.VALUE_CUE})


def _only_happened(memory: Memory, said: "Statement") -> bool:
    """A memory of an event already past when it was said, that enters no state: "moved to Denver last month" is one
    too, and holds the home; "the appointment is on Tuesday" (ahead) is a plan that can move."""
    when = memory.observed_at or memory.created_at
    return (memory.memory_type == MemoryType.EVENT and memory.event_time is not None and memory.event_time <= when
            and not (said.moves or said.entered or said.states))


def another_occasion(memory: Memory, said: "Statement", new: "Statement", event_time: datetime | None,
                     said_at: datetime | None) -> bool:
    """Two events already past when said, on other days: "a job interview at Meta on Monday", then "on Wednesday a
    job interview at Apple" — another occasion, which neither corrects nor repeats the one remembered (unless the
    one remembered entered a state: "moved to Denver last month" holds the home a later move ends). So is a plan
    whose day has come when another day is said: "an interview tomorrow", and three weeks on, "an interview
    tomorrow" (a trial: the second was a repeat, its day dropped); before its day, the plan moved (`plan_moved`) — and
    so did one said to move ("got pushed back to March 19") or named as the one known ("The product launch is scheduled
    for March 17", after March 3 passed)."""
    if event_time is None or memory.event_time is None or memory.event_time.date() == event_time.date():
        return False
    if _only_happened(memory, said):
        return said_at is None or event_time <= said_at
    return (_plan(memory, said) and said_at is not None and memory.event_time.date() <= said_at.date()
            and not _said_to_move(new) and not _the_known_one(new, said))


def _said_to_move(new: "Statement") -> bool:
    """"got pushed back to March 19", "postponed", "revised the due date to June 9": a change of its day is said."""
    return new.strong_change or timeexpr.to_a_day(new.text)


_THE = re.compile(r"^the (\w+)(?: (\w+))?", re.I)


def _the_known_one(new: "Statement", old: "Statement") -> bool:
    """`new` opens with "the" and a word `old` says ("The product launch ..." of "The product launch is scheduled for
    March 3"): the thing remembered, not another of its kind ("an interview tomorrow", said again weeks on) — nor one
    that comes round ("The quarterly board meeting is on June 5", "The next ...": a regression trial)."""
    m = _THE.match(new.text)
    return (m is not None and m.group(1).lower() not in _ANOTHER_ONE
            and any(w and lang.stem(w.lower()) in old.content for w in m.groups())
            and not lang.recurring(new.text) and not lang.recurring(old.text) and not _one_more(new))


_ANOTHER_ONE = frozenset("next other following second third".split())  # "The next board meeting ..."
# "also", "too", "again", "another", "the second": one more of its kind, said beside the one remembered.
_ONE_MORE = lang.ADDITIVE_CUES | {"again", "second", "third"}


def _one_more(new: "Statement") -> bool:
    return not _ONE_MORE.isdisjoint(new.words)


_WHEN_STEMS = frozenset(lang.stem(w) for w in lang.WHEN_WORDS) | lang.WHEN_WORDS


def _only_the_day_differs(new: "Statement", old: "Statement") -> bool:
    """The two say the same but when ("... scheduled for March 3" / "... for March 17"): one plan moved — not "running
    5 miles tomorrow" / "10 miles next Sunday"."""
    def what(s: "Statement") -> set[str]:
        return {w for w in statement(s._prefix + timeexpr.without_dates(s.text)).content if w not in _WHEN_STEMS}
    return what(new) == what(old)


def _dated_apart(memory: Memory, said: "Statement", new: "Statement", event_time: datetime | None) -> bool:
    """Two statements each of its own day, neither entering a state: another value between them, with no change
    said (no cue), is another occasion — two trips, two appointments — not a correction (a trial: "driving to Denver
    tomorrow" closed by "driving to Chicago next week")."""
    return (event_time is not None and memory.event_time is not None and memory.event_time.date() != event_time.date()
            and not any(s.moves or s.entered or s.states for s in (said, new)) and not _says_not(new, said)
            and not _only_the_day_differs(new, said) and not timeexpr.to_a_day(new.text)
            and not lang.corrects(new.text))


def _says_not(new: "Statement", old: "Statement") -> bool:
    """`new` denies a word of `old` ("... is next Monday, not Friday"): a correction of it, not another occasion."""
    held = {lang.stem(w) for w in old.words}
    return any(lang.stem(w.lower()) in held for w in re.findall(r"\bnot (\w+)", new.text, re.I))


def plan_moved(memory: Memory, said: "Statement", new: "Statement", event_time: datetime | None,
               said_at: datetime | None) -> bool:
    """A plan said again before the day it was for, for another day ahead: it moved ("an interview on Friday", then
    on Wednesday "an interview tomorrow"). Said on its day, it may be a second one ("a doctor's appointment
    tomorrow", then that day "... on Friday": a follow-up): not a move; nor one more of its kind ("I also have physical
    therapy on March 19": a regression trial)."""
    return (event_time is not None and memory.event_time is not None and said_at is not None and _plan(memory, said)
            and memory.event_time.date() > said_at.date() and event_time > said_at
            and memory.event_time.date() != event_time.date() and not _one_more(new))


def _plan(memory: Memory, said: "Statement") -> bool:
    """A memory of an event ahead when it was said, that enters no state ("is moving to Dallas" is a change)."""
    when = memory.observed_at or memory.created_at
    return (memory.memory_type in (MemoryType.EVENT, MemoryType.PLAN) and memory.event_time is not None
            and memory.event_time > when and not (said.moves or said.entered or said.states))


def _sentence_that_changes(new: Statement, old: Statement, similarity: float) -> Relation | None:
    """A turn of several sentences changes a fact when one of its sentences, read alone, does ("Big news: we
    moved to Raleigh! Still unpacking boxes."): the others are talk around it, or facts of their own."""
    for part in new.parts:
        relation = relate(part, old, similarity)
        if relation is not None and relation.action in _CHANGES:
            return relation
    return None


def _one_holder(new: Statement, old: Statement) -> bool:
    # "Ann lives in Paris" says something "Ann's sister lives in Paris" does not: another holder; and "Ann's cat
    # Mochi" is not "Ann's cat Tofu".
    return new.owner == old.owner and not _named_apart(new, old)


def _named_apart(new: Statement, old: Statement) -> bool:
    """Two holders of one kind, each named, by other names ("my cat Mochi is 5" / "my cat Tofu turned 2")."""
    return bool(new.holder_name and old.holder_name and new.holder_name != old.holder_name)


def _another_state(new: Statement, old: Statement) -> Relation | None:
    """Another value of an attribute held one at a time (lang.EXCLUSIVE_STATES), said of the same holder."""
    if new.owner != old.owner or new.negated or old.negated or new.additive:
        return None
    said = _states_of_the_holder(new, old)
    for attribute in said.keys() & old.states.keys():
        if said[attribute] != old.states[attribute]:
            return Relation(ExtractAction.UPDATE, Evidence.VALUE_CUE if new.change else Evidence.VALUE,
                            f"another {attribute}: '{old.states[attribute]}' → '{said[attribute]}'")
    return None


_THIRD_PERSONS = frozenset("he she they".split())


def _states_of_the_holder(new: Statement, old: Statement) -> dict[str, str]:
    """The states `new` says, but those of a clause about someone else: "mia's parents are getting divorced, she's
    upset" says no relationship status of User's (a held-out trial)."""
    said = dict(new.states)
    for clause in new.clauses():
        first = clause._raw[0].lower() if clause._raw else ""
        if first in _THIRD_PERSONS or first.endswith(("'s", "’s")) and base(first) != old.subject:
            for attribute in clause.states:
                said.pop(attribute, None)
    return said


# An age said after another of the same holder is theirs a little later — or one less, a slip put right. Not much
# older or younger: someone else's ("Grandma ... Turned 90", "Our dog ... Turned 12"), or a thing's.
AGES_APART = (-1, 10)


def _ages_apart(new: Statement, old: Statement) -> bool:
    said, then = new.states.get(lang.AGE), old.states.get(lang.AGE)
    return said is not None and then is not None and not AGES_APART[0] <= int(said) - int(then) <= AGES_APART[1]


def _other_persons(new: Statement, old: Statement) -> bool:
    """One of the two is about another person of the subject's ("User's sister Ana lives in Porto" and "User
    lives in Lisbon"): what one person does or stops doing changes nothing the other does. Naming the person
    ("User's girlfriend is called Emma") is the subject's own fact: who that person is."""
    return new.owner != old.owner and any(s.owner in PEOPLE_STEMS and not _NAMING.search(s.text)
                                          for s in (new, old))


# "<subject>'s sister is called Ana", "... is named Ana", "... is Ana": the sentence names the person.
_NAMING = re.compile(r"^\W*\w+['’]s \w+ (?:is|was) (?:(?:called|named) )?[A-Z]")


def _share_words(new: Statement, old: Statement) -> bool:
    """Whether `new`, or a clause of it, shares a content word with `old`: what a denial (its content
    stems), a restatement and another value (their aligned tokens) each need first. Set operations
    only: a search compares each pair of its first ten hits, and most pairs share nothing."""
    content, tokens = new.reach
    return bool(content & old.content or (tokens & old.keys) - {new.subject})


def _read_change(new: Statement, old: Statement, similarity: float) -> Relation | None:
    """`relate` for two statements of fact, word by word."""
    if _other_persons(new, old) or _named_apart(new, old):
        return None
    one_holder = _one_holder(new, old)
    retraction = _retraction(new, old, similarity)
    if retraction is not None:
        return retraction
    state = _another_state(new, old)
    if state is not None:
        return state
    if _one_holds_the_other(new, old):
        al = values.align(old.tokens, new.tokens)
        same_polarity = _closest_clause(new, old).negated == old.negated
        relation_words = values.content(al.shared, new.subject)
        new_content = values.content(al.only_new + [w for _, b in al.replaced for w in b], new.subject)
        old_content = values.content(al.only_old + [w for a, _ in al.replaced for w in a], new.subject)
        if not al.replaced and not new_content and relation_words and same_polarity and one_holder:
            return Relation(ExtractAction.NOOP, Evidence.SAME, "says nothing the memory does not")
        if not al.replaced and not old_content and new_content and relation_words and same_polarity and one_holder \
                and not values.another_quantity(new, old):  # not "is 30 minutes away" of "is 30"
            return Relation(ExtractAction.UPDATE, Evidence.RESTATEMENT, "restates the memory with more detail")
    if new.additive:
        return None  # "also", "too": one more value, the old one still holds
    # The whole statement, or the clause of it about what the old one says ("got a job as a developer"
    # of "..., no more coffee shifts"): the other clauses are not part of its value.
    closest = _closest_clause(new, old)
    for frame in (new, closest) if closest is not new else (new,):
        value = _another_value(new, frame, old)
        if value is not None:
            return value
    return _reported_change(new, old, similarity)


def _one_holds_the_other(new: Statement, old: Statement) -> bool:
    """Whether every content word of one is among the other's words: what "says nothing new" and "restates it"
    need of an alignment, checked on sets first (a search reads most of its hits' pairs this far)."""
    subject = {new.subject}
    return new.keys - subject <= old.token_set or old.keys - subject <= new.token_set


def _may_align(frame: Statement, old: Statement) -> bool:
    """Whether the two can share a relation word and most of their words (`_another_value`'s first tests), read
    from their word counts: an alignment shares no more than both hold."""
    if not (frame.keys & old.keys) - {frame.subject}:
        return False
    shared = sum((frame.counts & old.counts).values())
    return shared >= FRAME_SHARE * min(len(frame.tokens), len(old.tokens))


def _comparable(new: Statement, old: Statement) -> bool:
    """Statements `relate` reads at all: of one subject, short enough to be facts, not said to someone."""
    return (bool(new.subject) and new.subject == old.subject and len(old.words) <= MAX_OLD_WORDS
            and len(new.words) <= MAX_NEW_WORDS and not new.addressed and not old.addressed)


def _facts(new: Statement, old: Statement) -> bool:
    """Two single statements of fact: only such a pair can change (UPDATE, DELETE); of a passage or a
    remark only "says nothing new" is read."""
    return old.sentences <= 1 and new.sentences <= 1 and new.factual and old.factual


def _another_value(new: Statement, frame: Statement, old: Statement) -> Relation | None:
    """`frame` (`new`, or a clause of it) says what `old` says with one value changed: the shared
    words are most of it, one span differs, and each side's span (up to where a phrase of time, place
    or reason starts: "barista | on weekends while ...") is a short value."""
    if frame.subject != old.subject or not _may_align(frame, old):
        return None
    al = values.align(old.tokens, frame.tokens)
    if frame.owner != old.owner and (frame.owner in al.only_new or old.owner in al.only_old or any(
            frame.owner in b and len(b) > 1 or old.owner in a and len(a) > 1 for a, b in al.replaced)):
        # another holder's value: "User's car is 10 years old" says nothing of "User is 29 years old", nor
        # "User's car is 9 years old" of "User's cat is 3 years old" (a span of holder and value; the span
        # "second" → "third" of "User's second year" is the value alone)
        return None
    relation_words = values.content(al.shared, new.subject)
    aligned = len(al.shared) >= FRAME_SHARE * min(len(frame.tokens), len(old.tokens))
    if len(al.replaced) != 1 or not relation_words or not aligned \
            or _closest_clause(frame, old).negated != old.negated:
        return None
    if not new.change and still_holds.told_in_past(frame, old, relation_words):
        return None  # "User lived in Boulder for a semester in 2012" of "User lives in Denver": then, not now
    a, b = (values.value(span) for span in al.replaced[0])
    if values.CLAUSE_MARKS.intersection(a + b):
        return None  # "it was tough 'cause they ..." / "will stick up for": a clause or a reference, not a value
    if still_holds.only_whose(relation_words, old) and not still_holds.says_a_change(frame, old, a, b):
        return None  # "User's daughter Mia is allergic to cats" of "... Mia plays the violin": two of her facts
    if still_holds.only_when(relation_words):
        return None  # "a meeting ... on December 30, 2026" of "a dentist appointment on January 20, 2026"
    if values.another_relation(frame, old, al.replaced[0], relation_words) or values.another_kind(*al.replaced[0]) \
            or values.a_passing_state(frame, old, (a, b)) \
            or all(w[:1].isdigit() or w in values.QUANTITIES for w in relation_words) \
            or values.qualified(frame, al, new.subject):
        return None  # another relation; values of another kind or a state; a quantity shared; a narrower relation
    if (values.content(a, new.subject) and values.content(b, new.subject) and len(a) <= MAX_VALUE_WORDS
            and len(b) <= MAX_VALUE_WORDS and (new.strong_change or new.entered or not _set_valued(relation_words))):
        return Relation(ExtractAction.UPDATE, Evidence.VALUE_CUE if new.change else Evidence.VALUE,
                        f"same relation ('{_show(new, relation_words)}'), another value: "
                        f"'{_show(old, a)}' → '{_show(new, b)}'")
    return None


def _reported_change(new: Statement, old: Statement, similarity: float) -> Relation | None:
    """A change verb or cue in the newer statement, about what the older one says."""
    moved_to = _changes_state_of(new, old)
    if moved_to:
        return Relation(ExtractAction.UPDATE, Evidence.STATE_CHANGE, _moved(moved_to, old))
    if _cue_about(new, old) and (not _set_valued(new.tokens[:4]) or old.content & new.content):
        shared = old.content & new.content
        if _in_the_same_names(new, old, shared) or _of_other_names(new, old, shared):
            return None
        about_it = bool(shared) and len(shared) >= TOPIC_SHARE * len(old.content)
        # A weak cue ("now") needs a closer statement than a strong one ("moved", "switched"), and says no change of
        # a value the newer one only tells a passing state beside ("User's parrot is on antibiotics now").
        needed = CUE_SIMILARITY if new.strong_change else WEAK_CUE_SIMILARITY
        if about_it and similarity >= needed and (new.strong_change or not _a_passing_state(new, old)):
            return Relation(ExtractAction.UPDATE, Evidence.CHANGE_CUE,
                            f"reports a change of what the memory says (both about {_show(old, sorted(shared))})")
        if similarity >= CUE_ONLY_SIMILARITY:
            return Relation(ExtractAction.UPDATE, Evidence.CUE_CLOSE,
                            f"reports a change, and is close in meaning to the memory ({similarity:.2f})")
    return None


def _a_passing_state(new: Statement, old: Statement) -> bool:
    al = values.align(old.tokens, new.tokens)
    return len(al.replaced) == 1 and values.a_passing_state(new, old, al.replaced[0])


def _cue_about(new: Statement, old: Statement) -> bool:
    """`new` reports a change, and not only as the end of something else: a clause that ends what the old
    statement does not name ("..., so User no longer cycles to an office" of "User works at Globex") reports
    no change of it."""
    if not new.reported_change:
        return False
    cued = [c for c in new.clauses() if c.reported_change]
    if cued and all(still_holds.cue_denied(c) or still_holds.setting_of(c, old) or lang.stopped_once(c.text)
                    for c in cued):
        return False  # "never moved to Dresden"; "switched User's Gmail to the dark theme": Gmail stays; "quit a game"
    return not cued or not all(c.stops and not c.content & old.content for c in cued)


def _retraction(new: Statement, old: Statement, similarity: float) -> Relation | None:
    """The newer statement denies the older one: a clause of it says the same with the other polarity."""
    best = _closest_clause(new, old)
    shared = best.content & old.content
    if not shared:
        return None
    flipped = best.negated != _closest_clause(old, best).negated
    # Most of what the old statement says, or most of a clause that says something of its own.
    coverage = max(len(shared) / max(len(old.content), 1),
                   len(shared) / len(best.content) if len(best.content) >= 2 else 0.0)
    if flipped and coverage >= RETRACT_COVERAGE and not _other_value(best, old) and not lang.bounded(best.text) \
            and not _of_another_head(best, old) and not still_holds.end_denied(best):
        return Relation(ExtractAction.DELETE, Evidence.DENIAL,
                        f"denies what the memory says ({_show(old, sorted(shared))})")
    # An end is read from the clause that says it: "Globex is fully remote, so User no longer needs to cycle to
    # an office" ends the cycling, not the job at Globex that its other clause names.
    ending = max((c for c in new.clauses() if c.stops), key=lambda c: len(c.content & old.content), default=None)
    if ending is not None and ending.content & old.content and not old.stops and not _other_value(ending, old) \
            and not lang.stopped_once(ending.text) and (similarity >= CUE_SIMILARITY or _ends_what_it_names(new, old)):
        shared = ending.content & old.content
        if new.replaced:
            # "quit teaching and became a data analyst": ended, and replaced by something
            return Relation(ExtractAction.UPDATE, Evidence.ENDED_REPLACED,
                            f"says it changed ({_show(old, sorted(shared))})")
        return Relation(ExtractAction.DELETE, Evidence.ENDED, f"says it ended ({_show(old, sorted(shared))})")
    return None


def _of_another_head(clause: Statement, old: Statement) -> bool:
    """The last phrase of `clause` that holds a word of `old`'s (a run of content words) holds another too: it names
    something narrower or else, and its "not" denies that — "not a nurse practitioner" nothing of "is a nurse", nor
    "not a math teacher" of "is a teacher", "don't use verizon fios" of "uses verizon", "isn't a soccer coach" of
    "plays soccer"."""
    runs, run = [], []
    for token, word in zip(clause.tokens, clause.unstemmed):
        if token in clause.content and word not in lang.PREPOSITIONS:
            run.append(token)
        elif run:
            runs.append(run)
            run = []
    touched = [r for r in (*runs, run) if old.content.intersection(r)]
    # The last such phrase is what is denied ("doesn't work at google HQ": not "work", but "google HQ").
    return bool(touched) and not old.content.issuperset(touched[-1])


# Where a clause goes on to say why, or after what of the speaker's ("stopped climbing after User's shoulder
# injury") — not when ("stopped drinking coffee after 2pm", "when User travels": a habit narrowed, not ended).
_WHEN_OR_WHY = re.compile(r"\s+(?:because|due to|following|after (?:my|his|her|our|their|\w+['’]s))\s.*$",
                          re.I | re.S)


def _ends_what_it_names(new: Statement, old: Statement) -> bool:
    """A clause of `new` says something stopped, and all it names, up to when or why, the old statement names
    ("quit teaching" / "is a math teacher"; "stopped climbing after User's shoulder injury" / "climbs at the
    bouldering gym"): the end of that, however far the two are in meaning."""
    for c in new.clauses():
        if c.stops:
            ended = statement(c._prefix + _WHEN_OR_WHY.sub("", c.text)).content
            if ended and ended <= old.content:
                return True
    return False


# A day or a month is when a plan is, not where a name sits: "on Saturday User is helping User's mom move instead".
_WHEN_NAMES = frozenset(lang.stem(w) for w in (*lang.WEEKDAYS, *lang.MONTHS))


def _in_the_same_names(new: Statement, old: Statement, shared: set[str]) -> bool:
    """All the two share is names the older holds, each in the newer only where it sits ("Now User is stuck in Oakland
    traffic" of "lives in Oakland", "changed the oil in the Prius" of "drives a Prius"), and the newer names no other
    and leaves nothing: a change of what the name is only in. Not "switched User's Spotify to the family plan", "Luca
    and User separated", "left User's job at Google", "switched from Verizon"."""
    if new.stops or not shared or not shared <= old.names - _WHEN_NAMES - {old.owner} or not new.names <= old.names \
            or not lang.LEAVING.isdisjoint(new.words):
        return False
    raw = [w.lower() for w in new._raw]
    at = [i for i, w in enumerate(new.words) if lang.stem(w) in shared]

    def sits(i: int) -> bool:  # "in Oakland", "in the Prius", "to User's Volvo"
        before = raw[i - 1] if i >= 1 else ""
        led = before in lang.ARTICLES or before.endswith(("'s", "’s"))
        return before in lang.WITHIN or led and i >= 2 and raw[i - 2] in lang.WITHIN
    return bool(at) and all(sits(i) for i in at)


def _of_other_names(new: Statement, old: Statement, shared: set[str]) -> bool:
    """An end of another named thing: `new` says something stopped, each names something the other does not, and what
    the two share is no name ("no longer a fan of the Yankees" of "is a fan of the Red Sox", "no longer volunteers at
    Mercy" of "volunteers at St. Jude's": a regression trial's wrong closures)."""
    if not new.stops:  # a new value named ("moved the savings to Ally" of "... at Marcus") replaces the old one
        return False
    theirs = new.names - old.names - _WHEN_NAMES - {new.owner, new.subject}
    ours = old.names - new.names - _WHEN_NAMES - {old.owner, old.subject}
    return bool(theirs) and bool(ours) and not shared & old.names


def _moved(to: str, old: Statement) -> str:
    return f"reports a move to '{to}' away from what the memory says ('{old.text.rstrip('.')}')"


# A home move has no object ("moved to Bergen", "moved back to Oslo"), as "moved the meeting" has.
_HOME_MOVES = frozenset({"mov", "relocat"})
# "got hired", "was just hired": the subject's job changed; "User hired Tom" is someone else's.
_PASSIVE = frozenset("got get gets getting was were been be is am are".split())
# "joined Tom for lunch": company for a while, not a place of work or study ("joined CNN for the morning show" is).
_OUTINGS = frozenset("lunch dinner breakfast brunch coffee drinks drink tea walk hike ride movie".split())
_OUTING_LEADS = frozenset("a an the some quick short late early long little".split())


def _changes_state_of(new: Statement, old: Statement) -> str:
    """"moved to Bergen" / "lives in Oslo": a change verb whose state the old statement is in, with
    a new name for where it now is (returned; "" when there is none)."""
    old_stems = {lang.stem(w) for w in old.words}
    for i, w in enumerate(new.words):
        states = lang.CHANGE_VERBS.get(lang.stem(w))
        # Held by the same one, or the old statement's holder is the state itself ("User's apartment").
        if states and any(st in old_stems for st in states) and (new.owner == old.owner or old.owner in states):
            before = new.words[max(0, i - 3):i]
            if lang.stem(w) == "hir" and not _passive(new.words[:i]) or still_holds.denied(before):
                continue
            tokens = TOKEN.findall(new.text)
            after = tokens[i + 1:i + 5]
            if after and after[0].lower() in lang.OBJECT_OPENERS and lang.stem(w) in _HOME_MOVES:
                return ""  # "moved the meeting to Friday", "relocated our office": something moved, not the home
            if _an_outing(tokens[i + 1:i + 9]):
                return ""
            # A place is named ("to Bergen"): not a time ("moved in together in May"), nor someone's ("moved out of
            # User's parents' place").
            return next((t for t in after if t[:1].isupper() and t.lower() not in old.words
                         and t.lower() not in lang.MONTHS and t.lower().removesuffix("s") not in lang.WEEKDAYS
                         and base(t) == t.lower() and base(t) != new.subject), "")  # no possessive
    return ""


def _passive(before: list[str]) -> bool:
    """The verb after `before` is passive: an auxiliary before it, an adverb or two between ("was just hired")."""
    words = [w for w in before[-3:] if not (w.endswith("ly") or w in lang.TIME_ADVERBS)]
    return bool(words) and words[-1] in _PASSIVE


def _an_outing(rest: list[str]) -> bool:
    """"joined Tom for lunch", "... Tom and Ana for a quick coffee": company for a while — the outing is what the
    "for" names, not a word of a longer name ("for the game design team", "for a lunch service role")."""
    words = [t.lower() for t in rest]
    if "for" not in words:
        return False
    named = words[words.index("for") + 1:]
    while named and named[0] in _OUTING_LEADS:
        named = named[1:]
    return bool(named) and named[0] in _OUTINGS and (len(named) == 1 or named[1] in lang.STOP_WORDS)


def _show(statement: Statement, stems: list[str]) -> str:
    return " ".join(statement.shown.get(w, w) for w in stems)


def _other_value(new: Statement, old: Statement) -> bool:
    """The denial is about another object: "not allergic to shellfish" does not retract "allergic to peanuts"."""
    al = values.align([w for w in old.tokens if w not in lang.NEGATIONS], [w for w in new.tokens
                                                                    if w not in lang.NEGATIONS])
    return any(values.content(a, old.subject) and values.content(b, old.subject) and len(a) <= 2
               for a, b in al.replaced)


def decide(text: str, neighbours: list[Neighbour], *, duplicate_similarity: float,
           observed_at: datetime | None = None, event_time: datetime | None = None) -> Decision:
    """The decision for a new statement `text` said at `observed_at` (of what happened at `event_time`, if said),
    given its nearest memories."""
    new = statement(text)
    # The day it is of, compared with the memories' days: "on Monday" too (undated as a time: not "planned").
    day = event_time if event_time is not None or observed_at is None else \
        timeexpr.bare_weekday(text, observed_at, past=lang.past_tense(text))
    found: list[tuple[Relation, Neighbour]] = []
    for n in sorted(neighbours, key=lambda n: -n.similarity):
        other = statement(n.memory.text)
        occasion = another_occasion(n.memory, other, new, day, observed_at)
        moved = plan_moved(n.memory, other, new, event_time, observed_at)
        if n.similarity >= duplicate_similarity and _same_values(new, other) and not new.change and not occasion \
                and not moved and new.owner == other.owner \
                and new.negated == other.negated:
            found.append((Relation(ExtractAction.NOOP, Evidence.DUPLICATE,
                                   f"near-duplicate (similarity {n.similarity:.2f})"), n))
            continue
        # Read in the order they were said: an imported older statement is the old one.
        if _is_newer(n.memory, observed_at):
            relation = relate(other, new, n.similarity)
            if relation is not None and relation.action == ExtractAction.NOOP:
                relation = Relation(ExtractAction.NOOP, relation.evidence, "the memory says all this says")
        else:
            relation = relate(new, other, n.similarity)
            if relation is not None and relation.evidence in _STATE_EVIDENCE and _only_happened(n.memory, other):
                relation = None  # it happened: a later change of state ends nothing of it
            if relation is not None and occasion and relation.evidence != Evidence.DENIAL:
                relation = None  # another occasion: neither a correction nor a repeat of the one remembered
            if relation is not None and (relation.evidence == Evidence.VALUE or _one_more(new)) \
                    and _dated_apart(n.memory, other, new, day):
                relation = None  # "driving to Denver tomorrow" / "to Chicago next week": two plans, no move said
            if relation is not None and relation.action in _CHANGES \
                    and still_holds.planned(event_time, observed_at, n.memory) and not still_holds.made_any(new):
                relation = None  # "is moving to Dallas next month": where User lives holds until then
            # Said again near word for word: only the day differs (a plan's other words are other plans).
            if moved and n.similarity >= duplicate_similarity and _one_holder(new, other) \
                    and (relation is None or relation.action == ExtractAction.NOOP):
                relation = Relation(ExtractAction.UPDATE, Evidence.VALUE, f"the plan moved from "
                                    f"{n.memory.event_time:%Y-%m-%d} to {event_time:%Y-%m-%d}")
        if relation is not None:
            found.append((relation, n))
    if not found:
        return Decision(ExtractAction.ADD)
    relation, first = found[0]
    older = _is_newer(first.memory, observed_at)
    if relation.action == ExtractAction.NOOP:
        return Decision(ExtractAction.NOOP, (first.memory,), relation.confidence, relation.reason,
                        evidence=relation.evidence)
    if older:
        return Decision(relation.action, (first.memory,), relation.confidence,
                        relation.reason + "; said before the memory, which stays current", older=True,
                        evidence=relation.evidence)
    # Every memory the statement replaces or denies is closed, not only the nearest — unless it also says
    # something this statement does not touch, which closing it would hide (the newer ranks first anyway).
    closed = [(r, n) for r, n in found if r.action in (ExtractAction.UPDATE, ExtractAction.DELETE)
              and not _is_newer(n.memory, observed_at) and not _holds_more(statement(n.memory.text), new)]
    if not closed:
        return Decision(ExtractAction.ADD)
    relation = closed[0][0]
    return Decision(relation.action, tuple(n.memory for _, n in closed), relation.confidence, relation.reason,
                    evidence=relation.evidence)


def _holds_more(old: Statement, new: Statement) -> bool:
    """`old` also says something `new` does not touch: a clause of its own, sharing no word with `new`, that
    states a value ("User lives in Lisbon and User's PIN is 4471") or a fact of its own ("User is vegan and
    allergic to soy", "User lives in Austin, works as a lawyer") — or one of another holder than `new`'s ("User's
    brother works at Tesla, and User works at Ford"). Closing `old` would hide that too."""
    changed = _closest_clause(old, new)
    return any(c is not changed and (c.values or _own_fact(c)) and (not c.content & new.content or _another_persons(new, c))
               for c in old.clauses())


def _another_persons(new: Statement, clause: Statement) -> bool:
    # "User's brother got a job at Rivian" changes nothing "User works at Ford" says, however many words they share.
    return new.owner in PEOPLE_STEMS and clause.owner != new.owner


def _own_fact(clause: Statement) -> bool:
    """A clause stating something of its own: three words or more, one of them a content word, not opened by a
    word that makes it a detail of the clause before it, and not pointing back at what that clause names."""
    words = [w for w in clause.words if w not in ("and", "but", "also")]
    return (len(words) >= 3 and bool(clause.content) and words[0] not in lang.DEPENDENT_OPENERS
            and lang.REFERS_BACK.isdisjoint(words))


def _is_newer(memory: Memory, than: datetime | None) -> bool:
    when = observed(memory)
    return than is not None and when is not None and when > than


def duplicates(a: str, b: str) -> bool:
    """Whether two statements can be one fact said twice, as far as their words show — what embeddings
    blur: the same numbers, codes and names, the same polarity, the same holder ("Ann" is not "Ann's
    sister"), and not one relation with two values ("likes jazz" / "likes hiking")."""
    sa, sb = statement(a), statement(b)
    if sa.owner != sb.owner or sa.negated != sb.negated or not _same_values(sa, sb):
        return False
    al = values.align(sa.tokens, sb.tokens)
    return not any(values.content(x, sa.subject) and values.content(y, sa.subject) for x, y in al.replaced)


def _same_values(a: Statement, b: Statement) -> bool:
    """Numbers, codes and addresses agree, and neither names a capitalised word the other lacks."""
    if a.values != b.values:
        return False
    names_a = {base(w) for w in TOKEN.findall(a.text)[1:] if w[:1].isupper()}
    names_b = {base(w) for w in TOKEN.findall(b.text)[1:] if w[:1].isupper()}
    return names_a <= set(b.words) and names_b <= set(a.words)


def observed(memory: Memory) -> datetime | None:
    """When a memory was said: its message's time, else when it was written."""
    return memory.observed_at or memory.valid_from or memory.created_at


def succeeds(successor: Memory, superseded: Memory) -> bool:
    """Whether `successor` is the memory that superseded `superseded`, not one written under its id after that
    one was deleted: it was there when the supersede was written (an edit of the superseded memory since moves
    its `updated_at`, not its `valid_to`, which is when its successor was said)."""
    said = observed(successor) or successor.created_at
    return successor.created_at <= superseded.updated_at and (superseded.valid_to is None or said <= superseded.valid_to)
