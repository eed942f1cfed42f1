"""A memory text read for comparison (`Statement`): its subject, its words, its content stems, its clauses and
sentences, and the cues it carries (a change, a stop, a denial, an additive "also"). What `consolidation` relates
two of; pure, read lazily and once per text (`statement`).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from ..domain import language as lang

_SPACES = re.compile(r"\s{2,}")
_REPLY = re.compile(r"\s*\(replying to [^)]*\)\s*$", re.S)
_SPEAKER = re.compile(r"^(?P<speaker>[A-Z][\w'’\-]*(?: [A-Z][\w'’\-]*)?): ")
TOKEN = re.compile(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+|[$€£]?\d[\d,.:/\-]*\d|[$€£]?\d|@[\w\-]+|[A-Za-z][\w'’\-+]*")
_OPENERS = frozenset("turns so well actually anyway also and but then now today yesterday lately recently "
                     "honestly apparently sadly luckily finally oh hey".split())
# A thing defined, or its schedule ("The book club meets on Tuesdays", "Our rent is $2,100").
_DEFINITION = re.compile(r"^(?:the|our|their|his|her|its|my)\b[^.!?]{0,60}?\b(?:is|are|was|were|costs?|meets?|starts?"
                         r"|opens?|closes?|runs?|ends?|happens?|takes place)\b", re.I)
# The same said without its article, as people type a line of their own ("Rent is $1,850", "HOA meeting is on the
# 10th at 7"): a name or a noun phrase of up to three words before the verb.
_BARE_DEFINITION = re.compile(r"^(?P<first>[A-Za-z][\w'’\-]*)(?: [A-Za-z][\w'’\-]*){0,2} "
                              r"(?:is|are|costs?|meets?|starts?|opens?|closes?|runs?|ends?|happens?|takes place)\b")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\s+[—–-]\s+")
# Weak cues that are narration on their own ("it's new to me", "excited to get started", "again"):
# they count only for two statements that align word for word. "now", "currently" still count alone.
_NARRATION = frozenset("new newly started again moving gone".split())
# A stop cue under a negation says it goes on: "never give up", "didn't quit", "won't stop".
_GOES_ON = re.compile(r"\b(?:never|not|\w+n['’]t|cannot)\s+(?:\w+\s+)?(?:give up|gave up|given up|giving up|quit|stop|stopped|end)\b",
                      re.I)
_REPLACING_PHRASES = tuple(p for p in lang.CHANGE_PHRASES if p not in lang.STOP_PHRASES)
# A stop verb before a preposition is a visit or a trip, not an end: "stopped by the store", "gone to the park".
_MOTION = re.compile(r"\b(?:stopped|gone)\s+(?:by|to|at|in|into|over|off|from|for)\b", re.I)
# An aside opening the statement, inside it between commas, or closing it ("..., if you can believe it.").
_ASIDE = re.compile(r"^\W*(?:{0})\W*|,?\s*(?:{0})\s*,?(?=\s)|,\s*(?:{0})(?=[.!?]*$)".format(
    lang.ASIDE_TO_LISTENER.pattern), re.I)
# A subject of two ("User and Mark broke up", "Mark and I"), which the clause split would part: one clause.
_JOINT_SUBJECT = re.compile(r"(?:^|(?<=, ))([A-Z][\w'’\-]*) and ([A-Z][\w'’\-]*)\b")
_CLAUSE = re.compile(r",(?!\d{3}\b)|;|\s(?:and|but|so|because)\s")  # not the comma of "$95,000"
# Words naming one of the subject's people ("sister", "bf"), stemmed: a statement about one is theirs.
PEOPLE_STEMS = {lang.stem(w) for w in lang.PEOPLE}
_OTHERS_OF = frozenset({"our", "their"})
_PRONOUNS = frozenset("i we they he she you it".split())
_PHRASE_WORDS = 9  # how far a phrase opening a statement may run before its subject
_WHEN_WORDS = frozenset((*lang.MONTHS, *lang.WEEKDAYS))
_WITH_SPEAKER = frozenset({"family", "household"})


class read_once:
    """`functools.cached_property` without the lock Python 3.11 takes on every first read: a statement's
    properties are pure, so two threads reading one at once only compute it twice."""

    def __init__(self, read):
        self.read, self.name, self.__doc__ = read, read.__name__, read.__doc__

    def __get__(self, statement, owner=None):
        if statement is None:
            return self
        value = statement.__dict__[self.name] = self.read(statement)
        return value


def _bare_definition(text: str) -> bool:
    m = _BARE_DEFINITION.match(text)
    return m is not None and m.group("first").lower() not in lang.STOP_WORDS | lang.CHAT_INTERJECTIONS \
        and m.group("first").lower() not in lang.PRO_FORMS


class Statement:
    """A memory text reduced for comparison: its subject, its words (lower case, possessives
    dropped, cue words out) and its content stems. What only a close reading needs (the stems, the
    state it is framed as) is read on first use: most pairs a search compares part at `_comparable`,
    which needs the subject and words alone (a search parses each of its first ten hits)."""

    def __init__(self, text: str):
        # Runs of white space read as one: several patterns below would take time quadratic in a run's length.
        body = _REPLY.sub("", _SPACES.sub(" ", text.strip()))
        m = _SPEAKER.match(body)
        self.subject = m.group("speaker").lower() if m else ""
        self.speaker = bool(m)  # the subject came from a "Speaker: " prefix, not from the statement
        self._prefix = body[:m.end()] if m else ""
        if m:
            body = body[m.end():]
        # An aside to the listener ("Just so you know, ...") is not what the statement says.
        if "you" in body.lower() and lang.may_hold_aside(body):
            body = _ASIDE.sub("", body).strip(" ,")
        self.text = body
        self._raw = raw = TOKEN.findall(body)
        if not self.subject and raw:
            # The subject opens the statement, after an opener such as "Turns out" or "Anyway".
            # A pronoun opening it is its subject: "we sold the Hamilton tickets" is not Hamilton's; after a phrase of
            # time or place, the first name ("After twelve years on the ambulance User became a dispatcher").
            if raw[0].lower() in _PRONOUNS:
                opening = raw[0]
            elif raw[0].lower() in lang.PREPOSITIONS:  # past the phrase's own word ("At Google User leads ...")
                opening = next((w for w in raw[2:_PHRASE_WORDS] if w.lower() in _PRONOUNS or w[:1].isupper()
                                and w.lower() not in _WHEN_WORDS), raw[0])
            else:
                opening = next((w for w in raw[:4] if w[:1].isupper() and w.lower() not in _OPENERS), raw[0])
            self.subject = base(opening)
        self.words = _bases(raw)

    @read_once
    def _framed(self) -> tuple[bool, list[str]]:
        """What it is about, read with entering a state said as being in it ("got a job as" → "works as"),
        so the two align; the words as written keep the cues ("started", "got a job")."""
        state = lang.as_state(self.text) if lang.may_enter(self.text) else self.text
        entered = state != self.text  # "got a job as", "was hired as": a change cue in itself
        return entered, _bases(TOKEN.findall(state)) if entered else self.words

    @read_once
    def entered(self) -> bool:
        return self._framed[0]

    @read_once
    def owner(self) -> str:
        """"Ann's sister lives in Paris" is about Ann's sister: the word after a possessive subject (a person
        among the next few: "Ann's old coworker" is the coworker's)."""
        return self._holder[0]

    @read_once
    def holder_name(self) -> str:
        """The name the holder is given, if any: "Ann's cat Mochi" → "mochi"."""
        return self._holder[1]

    @read_once
    def _holder(self) -> tuple[str, str]:
        raw = self._raw
        at = next((i for i, w in enumerate(raw[:4]) if w.lower() in (f"{self.subject}'s", f"{self.subject}’s")), None)
        if at is None:
            # "Our friends moved to Florence", "Their son is 6": people of the speaker's (or of others), not the
            # speaker — but "our family" and "our house" are the speaker's own.
            at = next((i for i, w in enumerate(raw[:3]) if w.lower() in _OTHERS_OF), None)
            people = [] if at is None else [w for w in raw[at + 1:at + 3] if lang.stem(w.lower()) in PEOPLE_STEMS
                                            and w.lower() not in _WITH_SPEAKER]
            near = raw[at + 1:at + 5] if at is not None else []  # "our kids and User moved": the speaker too
            with_speaker = any(w.lower() == "and" and n.lower() == self.subject for w, n in zip(near, near[1:]))
            return (lang.stem(people[0].lower()), "") if people and not with_speaker else ("", "")
        if at >= 2 and raw[at - 1].lower() == "of" and lang.stem(raw[at - 2].lower()) in PEOPLE_STEMS:
            return lang.stem(raw[at - 2].lower()), ""  # "a friend of Ann's moved": the friend did (a trial)
        held = [i for i in range(at + 1, min(at + 4, len(raw))) if raw[i].lower() not in lang.CHANGE_CUES]
        if not held:
            return "", ""
        i = next((i for i in held if lang.stem(raw[i].lower()) in PEOPLE_STEMS), held[0])
        # "User's son's best friend quit soccer": the friend did — the last person of a chain of possessives.
        while raw[i].lower().endswith(("'s", "’s")) and (j := next(
                (j for j in range(i + 1, min(i + 4, len(raw))) if lang.stem(raw[j].lower()) in PEOPLE_STEMS), None)):
            i = j
        name = raw[i + 1] if i + 1 < len(raw) and raw[i + 1][:1].isupper() else ""
        return lang.stem(raw[i]), name.lower()

    @read_once
    def shown(self) -> dict[str, str]:
        """stem → a word it stands for (as written), to explain a decision."""
        shown: dict[str, str] = {}
        for w, base in zip(self._raw, self.words):
            shown.setdefault(lang.stem(base), w[:-2] if w.endswith(("'s", "’s")) else w)
        return shown

    @read_once
    def tokens(self) -> list[str]:
        # Stems, so "works" and "work" align.
        return [lang.stem(w) if w != self.subject else w for w in self.unstemmed]

    @read_once
    def unstemmed(self) -> list[str]:
        """The words `tokens` are the stems of: cue words say how the statement relates to others; they are not what
        it is about."""
        return [w for w in self._framed[1] if w not in _NOT_TOKENS]

    @read_once
    def content(self) -> set[str]:
        return {lang.stem(w) for w in self._framed[1] if w not in _NOT_CONTENT and w != self.subject
                and "n't" not in w and "n’t" not in w}

    @read_once
    def keys(self) -> frozenset[str]:
        """Its tokens that can show two statements are about one thing (not filler or a negation)."""
        return frozenset(w for w in self.tokens if w not in lang.FILLER and w not in lang.NEGATIONS)

    @read_once
    def token_set(self) -> frozenset[str]:
        return frozenset(self.tokens)

    @read_once
    def counts(self) -> Counter[str]:
        return Counter(self.tokens)

    @read_once
    def reach(self) -> tuple[frozenset[str], frozenset[str]]:
        """The content stems and the tokens of it and of each of its clauses (what `_share_words` compares)."""
        parts = (self, *self.clauses())
        return (frozenset().union(*(c.content for c in parts)), frozenset().union(*(c.tokens for c in parts)))

    @read_once
    def names(self) -> frozenset[str]:
        """The stems of its words written with a capital but its first and its subject ("Oakland", "Prius")."""
        return frozenset(lang.stem(b) for w, b in zip(self._raw[1:], self.words[1:]) if w[:1].isupper()
                         and b != self.subject)

    @read_once
    def values(self) -> set[str]:
        return {w for w in self._raw[1:] if any(map(str.isdigit, w)) or "@" in w}

    @read_once
    def negated(self) -> bool:
        return lang.negated(self.words, self.text)

    @read_once
    def _plain(self) -> tuple[list[str], str]:
        """The words and text without a stop cue under a negation ("won't give up" is no cue) or of
        motion ("stopped by")."""
        text = _MOTION.sub(" ", _GOES_ON.sub(" ", self.text))
        return [base(w) for w in TOKEN.findall(text)], text

    @read_once
    def change(self) -> bool:
        return self.entered or lang.change_cue(*self._plain)

    @read_once
    def factual(self) -> bool:
        """States something of its subject ("Ann lives ...", "Ann's dog is ...") or defines a thing
        ("The code word is ..."); "Can't wait to see it!" does neither."""
        return (self.subject in self.words and (self.speaker or self.words[:1] != [self.subject])
                or self.subject in self.words and not self.speaker
                or any(w in ("we", "our", "us", "ours") for w in self.words)  # the speaker among others
                or bool(_DEFINITION.match(self.text))
                or self.speaker and _bare_definition(self.text)
                or self.entered and bool(_DEFINITION.match(lang.as_state(self.text))))  # "... got moved to the 27th"

    @read_once
    def sentences(self) -> int:
        return len([p for p in _SENTENCE.split(self.text) if p.strip()])

    @read_once
    def reported_change(self) -> bool:
        """A change cue that counts without word-for-word alignment (not narration such as "new")."""
        words, text = self._plain
        return lang.change_cue([w for w in words if w not in _NARRATION], text)

    @read_once
    def strong_change(self) -> bool:
        return lang.change_cue(*self._plain, strong=True)

    @read_once
    def replaced(self) -> bool:
        """A change cue besides a stop cue: what ended was replaced ("became", "got a job as")."""
        words, text = self._plain
        return (self.entered or any(w in lang.CHANGE_CUES and w not in lang.STOP_CUES for w in words)
                or lang.has_phrase(text, _REPLACING_PHRASES))

    @read_once
    def addressed(self) -> bool:
        """Said to someone ("you", "your"): conversation, not a fact about the subject."""
        return any(w in lang.SECOND_PERSON for w in self.words)

    @read_once
    def stops(self) -> bool:
        return lang.stop_cue(*self._plain)

    @read_once
    def moves(self) -> bool:
        """A change verb ("moved", "joined"): it reports a change of another statement's state without
        sharing a word with it ("joined Notion" / "works at Shopify": `_changes_state_of`)."""
        return any(lang.stem(w) in lang.CHANGE_VERBS for w in self.words)

    @read_once
    def states(self) -> dict[str, str]:
        """Attributes of which it states the one value its subject holds ("is vegan": diet); an age only of a person or
        a named one ("User's dog Rex is 3"), not of a thing ("User's score is 3")."""
        if not lang.may_hold_state(self.text):
            return {}
        states = lang.exclusive_states(self.text)
        # An age said of the subject, of a person of its ("User's son is 8"), or of one named ("Rex is 3"); not of a
        # thing ("User's score is 3", "our house turned 100").
        person = not self.owner or self.owner in PEOPLE_STEMS
        whose = {w for w in (self.subject if person else "", self.holder_name) if w}
        said = {age for who, age in lang.ages(self.text)
                if who in whose or person and self.owner and lang.stem(who) == self.owner}
        if len(said) == 1:
            states[lang.AGE] = said.pop()
        return states

    @read_once
    def additive(self) -> bool:
        return lang.additive_cue(self.words, self.text)

    def clauses(self) -> list["Statement"]:
        return self._clauses

    @read_once
    def parts(self) -> list["Statement"]:
        """Its sentences, each read alone (with its speaker), when it has several."""
        said = [p.strip() for p in _SENTENCE.split(self.text) if p.strip()]
        return [statement(self._prefix + p) for p in said] if len(said) > 1 else []

    @read_once
    def _clauses(self) -> list["Statement"]:
        # Read once: every pair a search or a write compares asks for the newer statement's clauses.
        kept = _JOINT_SUBJECT.sub("\\1 and\0\\2", self.text)  # no space after its "and": no split there
        parts = [p.strip() for p in _CLAUSE.split(kept) if p and p.strip()]
        return [statement(p.replace("\0", " ")) for p in parts] if len(parts) > 1 else [self]


def closest_clause(new: Statement, old: Statement) -> Statement:
    """The clause of `new` that shares most with `old` (its polarity is the one that counts)."""
    return max(new.clauses(), key=lambda c: len(c.content & old.content))


@lru_cache(maxsize=4096)
def statement(text: str) -> Statement:
    """`Statement(text)`, read once: a dream compares each memory with several others."""
    return Statement(text)


def base(word: str) -> str:
    w = word.lower()
    return w[:-2] if w.endswith(_POSSESSIVES) else w


def _bases(words: list[str]) -> list[str]:
    """`_base` of each word (inline: a search reads every word of its first ten hits)."""
    lowered = [w.lower() for w in words]
    return [w[:-2] if w.endswith(_POSSESSIVES) else w for w in lowered]


_POSSESSIVES = ("'s", "’s")
# Words that are not what a statement is about: cues (how it relates to others), and for its content, filler
# and negations too.
_NOT_TOKENS = lang.CHANGE_CUES | lang.ADDITIVE_CUES | {"just", "really", "still", "recently", "finally", "actually"}
_NOT_CONTENT = lang.FILLER | lang.NEGATIONS | lang.CHANGE_CUES | lang.ADDITIVE_CUES
