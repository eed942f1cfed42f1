"""Attribute statements in memory text: who has which value of which attribute.

The deterministic dream engine needs to know when two memories talk about the same attribute
of the same subject ("Ann lives in Boston" / "Ann moved from Boston to Denver") to decide that
the newer one supersedes the older, or that two phrasings state the same value. A small table
of patterns, each naming an attribute and whether it holds one value at a time (residence,
employer, spouse, favourite X) or several (pets, allergies, languages), does that for the
third-person statements the extractors write ("<Subject> lives in X", "<Subject>'s favourite
colour is blue"). Preferences are one attribute per object ("preference:coffee" = like / dislike),
so "likes coffee" then "can't stand coffee" is an update while "likes tea" is not.

Pure functions over text; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A subject: "User" / "The user", or a capitalised name (one or two words), optionally with a
# relation ("Ann's sister"), so facts about the people around the subject stay separate.
_RELATIONS = ("husband|wife|sister|brother|mother|father|mom|mum|dad|son|daughter|friend|best friend|partner|"
              "boss|manager|colleague|coworker|cousin|aunt|uncle|grandmother|grandfather|grandma|grandpa|child|"
              "kid|roommate|neighbou?r|girlfriend|boyfriend|fianc[ée]e?|dog|cat|team|company")
_S = (r"(?P<subject>(?:[Tt]he user|User|[A-Z][\w\-]*(?: [A-Z][\w\-]*)?)"
      r"(?:(?:'s|’s) (?:" + _RELATIONS + r"))?)")
# A value runs to the end of its clause: punctuation, or a word that starts a new one.
_STOP = (r"now|since|because|and|but|with|for|last|next|this|that|when|where|while|after|before|as|who|which|"
         r"until|during|these days|currently|recently|anymore|any more|today|yesterday|tomorrow|ago|again|too|"
         r"also|though|although|so|if|on|at|from|in|to|by|every|each|already|instead|full[- ]time|part[- ]time")
_V = r"(?P<value>[^.,;:!?()\"]+?)(?=\s+(?:" + _STOP + r")\b|\s*[.,;:!?()\"]|\s*$)"
_PETS = (r"dog|cat|puppy|kitten|parrot|bird|hamster|rabbit|bunny|fish|goldfish|turtle|tortoise|horse|pony|snake|"
         r"lizard|guinea pig|ferret|chicken|beagle|labrador|retriever|poodle|terrier|bulldog|husky|corgi|"
         r"dachshund|spaniel|shepherd|pug|chihuahua|cockatiel|budgie|gecko|iguana")

# Words that can open a sentence and look like a name to the subject pattern.
_NOT_NAMES = frozenset(
    "since on in last next this today yesterday now then also when after before recently currently and but so the "
    "every a an my his her their our it he she they we i you however lately finally eventually meanwhile monday "
    "tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december".split())
_DETERMINERS = frozenset("a an the my his her their its our your some".split())
_SPELLING = {"colour": "color", "favourite": "favorite", "neighbour": "neighbor", "flavour": "flavor",
             "mum": "mom", "grey": "gray", "centre": "center", "theatre": "theater"}


@dataclass(frozen=True)
class AttributePattern:
    attribute: str  # "favorite_{key}" when the pattern captures a key
    pattern: re.Pattern[str]
    single: bool = True  # one current value per subject: a newer value supersedes an older one
    change: bool = False  # the statement reports a change ("moved to", "became"): strong evidence of an update


@dataclass(frozen=True)
class AttributeFact:
    subject: str  # normalised: "ann", "user", "ann's sister"
    subject_text: str  # as written: "Ann"
    attribute: str
    value: str  # normalised, for comparison
    value_text: str  # as written, for profiles
    single: bool
    change: bool
    old_value: str | None = None  # "moved from <old> to ...": the value this statement replaces

    @property
    def key(self) -> tuple[str, str]:
        return self.subject, self.attribute


def _p(body: str) -> re.Pattern[str]:
    return re.compile(r"\b" + body.replace("{S}", _S).replace("{V}", _V))


_A_AN = r"(?:a |an )?"
PATTERNS: tuple[AttributePattern, ...] = (
    # where the subject lives
    AttributePattern("residence", _p(r"{S} (?:now |currently |still |also )?(?:lives|is living|resides|is based|"
                                     r"is staying|is settled) in {V}")),
    AttributePattern("residence", _p(r"{S}(?: has| had)?(?: just| recently| finally| now)? (?:moved|relocated)"
                                     r"(?: back)?(?: from (?P<old>[^.,;:!?()]+?))? to {V}"), change=True),
    AttributePattern("residence", _p(r"{S}(?:'s|’s) (?:home|house|apartment|flat) is in {V}")),
    AttributePattern("hometown", _p(r"{S} (?:is originally|originally comes|comes|is) from {V}")),
    AttributePattern("hometown", _p(r"{S} grew up in {V}")),
    # work
    AttributePattern("occupation", _p(r"{S} (?:now |currently |still )?works as " + _A_AN + "{V}")),
    AttributePattern("occupation", _p(r"{S} is employed as " + _A_AN + "{V}")),
    AttributePattern("occupation", _p(r"{S}(?:'s|’s) (?:job|occupation|profession) is " + _A_AN + "{V}")),
    AttributePattern("occupation", _p(r"{S} (?:became|has become|got a (?:new )?job as|started working as) "
                                      + _A_AN + "{V}"), change=True),
    AttributePattern("employer", _p(r"{S} (?:now |currently |still )?works (?:at|for) {V}")),
    AttributePattern("employer", _p(r"{S} (?:now |currently |still )?works as " + _A_AN
                                    + r"[\w\- ]+? (?:at|for) {V}")),
    AttributePattern("employer", _p(r"{S} (?:joined|started (?:working )?at|got a (?:new )?job at|"
                                    r"switched jobs to|moved to a new job at) {V}"), change=True),
    # relationships
    AttributePattern("spouse", _p(r"{S} is married to {V}")),
    AttributePattern("spouse", _p(r"{S}(?:'s|’s) (?:husband|wife|spouse) is (?:called |named )?{V}")),
    AttributePattern("spouse", _p(r"{S} (?:married|got married to) {V}"), change=True),
    AttributePattern("partner", _p(r"{S}(?:'s|’s) (?:partner|boyfriend|girlfriend|fianc[ée]e?) is "
                                   r"(?:called |named )?{V}")),
    AttributePattern("partner", _p(r"{S} is (?:dating|engaged to|in a relationship with) {V}")),
    AttributePattern("marital_status", _p(r"{S} is (?P<value>single|married|divorced|widowed|engaged)\b")),
    AttributePattern("marital_status", _p(r"{S} (?:got|is getting|has been) (?P<value>married|divorced|engaged)\b"),
                     change=True),
    # favourites: one attribute per kind of thing ("favorite_color")
    AttributePattern("favorite_{key}", _p(r"{S}(?:'s|’s) (?:new |current |all-time )?(?:favou?rite|fave) "
                                          r"(?P<key>[a-z]+(?: [a-z]+)?) (?:is|are|has become) (?:now )?{V}")),
    AttributePattern("favorite_{key}", _p(r"(?P<value>[\w'’\- ]+?) is (?:now )?{S}(?:'s|’s) (?:new )?"
                                          r"(?:favou?rite|fave) (?P<key>[a-z]+(?: [a-z]+)?)\b")),
    # age, diet, study, car, birthday
    AttributePattern("age", _p(r"{S} is (?P<value>\d{1,3}) (?:years old|years of age|year-old)")),
    AttributePattern("age", _p(r"{S} (?:just |recently )?turned (?P<value>\d{1,3})\b"), change=True),
    AttributePattern("diet", _p(r"{S} is (?:a |an )?(?:strict )?(?P<value>vegetarian|vegan|pescatarian|"
                                r"carnivore)\b")),
    AttributePattern("diet", _p(r"{S} (?:follows|eats|is on|keeps) (?:a |an )?(?P<value>vegan|vegetarian|keto|"
                                r"paleo|gluten-free|low-carb|halal|kosher|pescatarian) diet")),
    AttributePattern("diet", _p(r"{S} (?:became|went|has gone|turned|is now) (?:a |an )?(?P<value>vegetarian|"
                                r"vegan|pescatarian)\b"), change=True),
    AttributePattern("field_of_study", _p(r"{S} (?:studies|is studying|majors in|is majoring in) (?!at\b){V}")),
    AttributePattern("school", _p(r"{S} (?:studies|is studying|is a student|is enrolled) at {V}")),
    AttributePattern("car", _p(r"{S} (?:now )?drives " + _A_AN + "{V}")),
    AttributePattern("birthday", _p(r"{S}(?:'s|’s) birthday is (?:on )?{V}")),
    # several values at once
    AttributePattern("pets", _p(r"{S} (?:has|owns|adopted|got|has adopted|rescued) (?:a|an|one|two|three|\d+|"
                                r"another) (?:new |little |young |old )?(?P<value>" + _PETS + r")s?"
                                r"(?: (?:named|called) (?P<name>[A-Z][\w\-]*))?"), single=False),
    AttributePattern("allergies", _p(r"{S} is (?:very |severely )?allergic to {V}"), single=False),
    AttributePattern("allergies", _p(r"{S} has (?:a |an )?(?:severe )?(?P<value>[a-z]+) allergy"), single=False),
    AttributePattern("languages", _p(r"{S} speaks (?:fluent )?{V}"), single=False),
)

_LIKE = "like"
_DISLIKE = "dislike"
_POLARITY = {
    "loves": _LIKE, "likes": _LIKE, "enjoys": _LIKE, "adores": _LIKE, "prefers": _LIKE, "is into": _LIKE,
    "is a fan of": _LIKE, "is a big fan of": _LIKE, "really likes": _LIKE,
    "hates": _DISLIKE, "dislikes": _DISLIKE, "detests": _DISLIKE, "can't stand": _DISLIKE,
    "cannot stand": _DISLIKE, "doesn't like": _DISLIKE, "does not like": _DISLIKE, "no longer likes": _DISLIKE,
    "avoids": _DISLIKE, "doesn't enjoy": _DISLIKE, "does not enjoy": _DISLIKE,
}
_PREFERENCE = _p(r"{S} (?:really |also |still |absolutely |truly |especially )?(?P<polarity>"
                 + "|".join(sorted((re.escape(k) for k in _POLARITY), key=len, reverse=True))
                 + r") (?:to |eating |drinking |playing |watching )?{V}")


def normalise(value: str) -> str:
    """Lower case, no determiners, British spellings and simple plurals folded: for comparing values."""
    words = re.findall(r"[\w'’\-]+", value)
    while words and words[0].lower() in _DETERMINERS:
        words.pop(0)
    out = []
    for word in words:
        w = _SPELLING.get(word.lower(), word.lower())
        if word[0].islower() and len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]  # "peanuts" → "peanut"; names ("Paris") keep their s
        out.append(w)
    return " ".join(out)


def same_value(a: str, b: str) -> bool:
    """Normalised values that are equal, or one a word-prefix of the other ("denver" / "denver colorado")."""
    ta, tb = a.split(), b.split()
    n = min(len(ta), len(tb))
    return n > 0 and ta[:n] == tb[:n]


def _subject(raw: str) -> tuple[str, str] | None:
    words = raw.split(" ")
    while words and words[0].lower() in _NOT_NAMES:
        words.pop(0)
    if not words:
        return None
    text = " ".join(words)
    key = text.lower().replace("’", "'")
    key = "user" if key in ("the user", "user") else key
    return key, text


def _value_text(value: str) -> str:
    words = value.strip().split()
    while words and words[0].lower() in _DETERMINERS:
        words.pop(0)
    return " ".join(words)


_ABBREVIATION = re.compile(r"\b(St|Dr|Mr|Mrs|Ms|Mt|Jr|Sr|Inc|Ltd|Co|Ave|Prof)\.(?= )")


def parse(text: str) -> list[AttributeFact]:
    """Every attribute statement found in `text`, at most one per (subject, attribute, value)."""
    text = _ABBREVIATION.sub(lambda m: m.group(1), text)  # "St. Mary's" is not the end of a clause
    found: dict[tuple[str, str, str], AttributeFact] = {}
    for ap in PATTERNS:
        for m in ap.pattern.finditer(text):
            subject = _subject(m.group("subject"))
            groups = m.groupdict()
            raw = groups.get("value") or ""
            if groups.get("name"):
                raw = f"{raw} {groups['name']}"
            value_text = _value_text(raw)
            value = normalise(value_text)
            if subject is None or not value or len(value.split()) > 8:
                continue
            attribute = ap.attribute
            if "{key}" in attribute:
                attribute = attribute.format(key=normalise(groups["key"]).replace(" ", "_"))
            old = normalise(groups["old"]) if groups.get("old") else None
            fact = AttributeFact(subject[0], subject[1], attribute, value, value_text, ap.single, ap.change, old)
            found.setdefault((fact.subject, fact.attribute, fact.value), fact)
    for m in _PREFERENCE.finditer(text):
        subject = _subject(m.group("subject"))
        value_text = _value_text(m.group("value"))
        obj = normalise(value_text)
        if subject is None or not obj or len(obj.split()) > 6:
            continue
        polarity = _POLARITY[m.group("polarity")]
        fact = AttributeFact(subject[0], subject[1], f"preference:{obj}", polarity, value_text, True,
                             m.group("polarity") == "no longer likes")
        found.setdefault((fact.subject, fact.attribute, fact.value), fact)
    return list(found.values())
