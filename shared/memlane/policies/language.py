"""English word lists the deciding code shares: change cues, negation, additive cues, the
relations that hold several values at once, and words that carry no content. One place, so
"how does memlane decide that a fact changed" reads in one module (policies/consolidation.py)
with its vocabulary here.
"""

from __future__ import annotations

import re

# Words that say a statement reports a change of what held before.
CHANGE_CUES = frozenset(
    "moved relocated switched changed now currently anymore instead new newly became become becomes turned "
    "joined left quit transferred sold cancelled canceled stopped started again gone replaced upgraded "
    "updated renamed moving switching switch changing lately nowadays".split())
CHANGE_PHRASES = ("no longer", "any more", "these days", "from now on", "after all", "gave up", "give up",
                  "went up", "went down", "is now", "not anymore", "no more", "got married", "got engaged",
                  "got divorced", "got a job", "got a new job")
# Cues too common in narration to carry a change on their own ("now", "new", "started"): they
# count only for two statements that align word for word.
WEAK_CUES = frozenset("now currently new newly started again lately nowadays moving gone".split())
# Second person: a remark addressed to someone ("glad your son is okay") is conversation, not a
# statement of fact about the speaker.
SECOND_PERSON = frozenset("you your yours yourself yourselves y'all ya".split())
# Verbs that report a change of state, and the stems of the state they change: "moved to Denver"
# changes where someone lives, "joined Stripe" where they work. Stems (see `stem`).
CHANGE_VERBS = {
    "mov": ("liv", "resid", "bas", "stay"), "relocat": ("liv", "resid", "bas", "stay"),
    "join": ("work", "employ"), "transferr": ("enroll", "study", "attend", "work"),
    "transfer": ("enroll", "study", "attend", "work"), "hir": ("work", "employ"),
}
# Words that deny a statement ("not", "don't", "no longer").
NEGATIONS = frozenset("not no never none nothing nobody neither nor cannot without".split())
_NEGATED_VERB = re.compile(r"\b\w+n['’]t\b", re.I)  # don't, isn't, can't, doesn't
# Words that end what held ("quit smoking", "cancelled the trip"): a retraction without a "not".
STOP_CUES = frozenset("quit stopped cancelled canceled gone healed cured ended misdiagnosis sold".split())
STOP_PHRASES = ("no longer", "gave up", "give up", "broke up", "passed away", "after all", "not anymore", "no more")
# Words that say a statement adds to what holds ("I also have a cat").
ADDITIVE_CUES = frozenset("also too another additionally both".split())
ADDITIVE_PHRASES = ("as well", "in addition", "on top of")
# Relations a person can hold with several things at once: a new object joins the old ones unless
# a change cue says it replaces them. Stems (see `stem`).
SET_VALUED = frozenset(
    "have has own adopt like love enjoy speak play avoid allergic allergy collect volunteer visit read watch "
    "listen follow know support fan dislike hate friend sibling child kid pet hobby".split())
# Words with no content of their own: what is left of a statement without them is what it is about.
FILLER = frozenset(
    "a an the is are was were be been being am has have had do does did to of in on at for from with by and or "
    "but so as that this these those it its it's he she they them their his her him i me my we our you your "
    "very really just still also s who which will would can could should there here about some any just "
    "now currently lately then into than too".split())

_MONTHS = ("january february march april may june july august september october november december".split())
MONTHS = {m: i for i, m in enumerate(_MONTHS, start=1)}


def stem(word: str) -> str:
    """A crude English stem, enough to see "smokes", "smoking" and "smoke" as one word."""
    w = word.lower().strip("'’")
    if w.endswith(("'s", "’s")):
        w = w[:-2]
    for suffix, repl, keep in (("ies", "y", 3), ("ing", "", 3), ("ed", "", 3), ("ers", "", 4), ("er", "", 4),
                               ("es", "", 3), ("s", "", 3)):
        if w.endswith(suffix) and len(w) - len(suffix) >= keep and not (suffix == "s" and w.endswith("ss")):
            w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


def has_phrase(text: str, phrases: tuple[str, ...]) -> bool:
    low = f" {text.lower()} "
    return any(f" {p} " in low or f" {p}," in low or f" {p}." in low for p in phrases)


def negated(words: list[str], text: str) -> bool:
    return any(w in NEGATIONS for w in words) or bool(_NEGATED_VERB.search(text)) or has_phrase(text, ("no longer",))


def change_cue(words: list[str], text: str, *, strong: bool = False) -> bool:
    cues = CHANGE_CUES - WEAK_CUES if strong else CHANGE_CUES
    return any(w in cues for w in words) or has_phrase(text, CHANGE_PHRASES)


def stop_cue(words: list[str], text: str) -> bool:
    return any(w in STOP_CUES for w in words) or has_phrase(text, STOP_PHRASES)


def additive_cue(words: list[str], text: str) -> bool:
    return any(w in ADDITIVE_CUES for w in words) or has_phrase(text, ADDITIVE_PHRASES)
