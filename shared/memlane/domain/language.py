"""The English vocabulary memlane reads text with, in one place: stop words (three lists, each
for a reason given beside it), calendar names, and the cues the deciding code
(policies/consolidation.py) uses to see that a fact changed — change cues, negation, additive cues,
the relations that hold several values at once, and words that carry no content.

Pure data and a few pure readers of it. It sits in the domain so that every layer may use it:
the adapters (the embedded index, the heuristic reranker) as well as the policies and extractors.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Words that say a statement reports a change of what held before.
CHANGE_CUES = frozenset(
    "moved relocated switched changed now currently anymore instead new newly became become becomes turned "
    "joined left quit transferred sold cancelled canceled stopped started again gone replaced upgraded "
    "updated renamed moving switching switch changing lately nowadays promoted postponed rescheduled retired".split())
CHANGE_PHRASES = ("no longer", "any more", "these days", "from now on", "after all", "gave up", "give up",
                  "went up", "went down", "is now", "not anymore", "no more", "got married", "got engaged",
                  "got divorced", "got a job", "got a new job", "pushed back", "pushed to", "rebooked")
# Cues too common in narration to carry a change on their own ("now", "new", "started"): they
# count only for two statements that align word for word.
WEAK_CUES = frozenset("now currently new newly started again lately nowadays moving gone".split())
# Second person: a remark addressed to someone ("glad your son is okay") is conversation, not a
# statement of fact about the speaker.
SECOND_PERSON = frozenset("you your yours yourself yourselves y'all ya".split())
# Other people of the subject's: "User's sister lives in Porto" is the sister's fact, not the user's.
PEOPLE = frozenset("sister brother mother mom mum father dad parent parents wife husband partner spouse son "
                   "daughter child children kid kids baby friend boyfriend girlfriend fiance fiancee boss manager "
                   "colleague coworker roommate neighbor neighbour cousin aunt uncle niece nephew grandmother "
                   "grandma grandfather grandpa grandparents family twin bf gf bff hubby wifey bro sis in-laws inlaws "
                   "buddy buddies pal".split())
# Verbs that report a change of state, and the stems of the state they change: "moved to Denver"
# changes where someone lives (a home too: "bought a house in Austin"), "joined Stripe" where they
# work. Stems (see `stem`).
CHANGE_VERBS = {
    "mov": ("liv", "resid", "bas", "stay", "hous", "hom", "apartment", "rent"),
    "relocat": ("liv", "resid", "bas", "stay", "hous", "hom", "apartment", "rent"),
    "join": ("work", "employ"), "transferr": ("enroll", "study", "attend", "work"),
    "transfer": ("enroll", "study", "attend", "work"), "hir": ("work", "employ"),
}
# Phrases that enter a state, said as the state itself: "got a job as a developer", "was hired as",
# "started at the hospital" say the subject now works as / at it, so they align word for word with
# "works as a barista" / "works at the library" — one relation, another value. Only when what follows
# is "as", "at", "for" or "with": "started a pottery class" enters no such relation.
_ENTRY = re.compile(r"\b(?:(?:got|took|landed|accepted|found|started|began)\s+(?:a\s+|an\s+|the\s+)?(?:new\s+)?"
                    r"(?:job|position|role|post)|(?:was|were|got|been|is|am|are)\s+(?:just\s+)?hired"
                    r"|(?:started|began|starts|begins)(?:\s+working)?)(?=\s+(?:as|at|for|with)\b)", re.I)
# Words that open a verb's object ("moved the meeting", "retired her old laptop").
OBJECT_OPENERS = frozenset("the a an my his her our their its it them this that these those some all".split())
# Words that deny a statement ("not", "don't", "no longer").
NEGATIONS = frozenset("not no never none nothing nobody neither nor cannot without".split())
_NEGATED_VERB = re.compile(r"\b\w+n['’]t\b", re.I)  # don't, isn't, can't, doesn't
# Words that end what held ("quit smoking", "cancelled the trip"): a retraction without a "not".
STOP_CUES = frozenset("quit stopped cancelled canceled gone healed cured ended misdiagnosis sold".split())
# Leaving what a name stands for ("left User's job at Google"), beside the stop cues.
LEAVING = frozenset("left leave leaves leaving resigned fired laid retired dropped".split())
# Where a name only sits ("stuck in Oakland traffic", "the oil in the Prius"): not "from", "out of", "after" (a change
# away from it, or after it).
WITHIN = frozenset("in at on to near with for around inside into by of about".split())
STOP_PHRASES = ("no longer", "gave up", "give up", "broke up", "passed away", "after all", "not anymore", "no more")
# Words that say a statement adds to what holds ("I also have a cat").
ADDITIVE_CUES = frozenset("also too another additionally both".split())
ADDITIVE_PHRASES = ("as well", "in addition", "on top of")
# Relations a person can hold with several things at once: a new object joins the old ones unless
# a change cue says it replaces them. Stems (see `stem`).
SET_VALUED = frozenset(
    "have has own adopt like love enjoy speak play avoid allergic allergy collect volunteer visit read watch "
    "listen follow know support fan dislike hate friend sibling child kid pet hobby member".split())
# Words with no content of their own: what is left of a statement without them is what it is about.
# Not STOP_WORDS: aligning two statements keeps words of order and question words ("same", "only",
# "after", "where") that can carry the fact, and drops time adverbs ("now", "currently") that are
# change cues, weighed apart; negations are weighed apart too (NEGATIONS).
FILLER = frozenset(
    "a an the is are was were be been being am has have had do does did to of in on at for from with by and or "
    "but so as that this these those it its it's he she they them their his her him i me my we our you your "
    "very really just still also s who which will would can could should there here about some any just "
    "now currently lately then into than too".split())

# -- stop words ----------------------------------------------------------------------------------
# English function words, question words included: what a query's content is left without. The
# heuristic reranker scores a text by the query terms it covers, and the benchmark's plain-BM25
# baseline matches query words; with these kept, both only add noise.
STOP_WORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being am do does did "
    "have has had i me my we our you your he him his she her it its they them their this that these those "
    "what which who whom when where why how not no so than too very can will would should could may might "
    "about into over after before up down out off again then there here all any some such only own same just".split())
# Lucene's English stop words (EnglishAnalyzer), exactly what OpenSearch's `english` analyzer drops:
# the embedded index drops the same and no more, so both keyword backends rank alike.
LUCENE_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split())
# Hidden keywords of a memory (words of the turns around it, extractors/rules.py): the stop words
# and the interjections of chat, which every turn has; words of order and time ("after", "before",
# "again", "then") stay, since a question looks a turn up by them ("what did she do after ...").
CHAT_INTERJECTIONS = frozenset("oh hey hi yeah yes wow really also".split())
ORDER_WORDS = frozenset("after before again then over down off only own same such".split())
CONTEXT_STOP_WORDS = (STOP_WORDS - ORDER_WORDS) | CHAT_INTERJECTIONS

# -- calendar --------------------------------------------------------------------------------------
# How a statement reads as a relation and a value (policies/dream_profile.py).
# Words that lead into the value of a relation ("lives in", "works as", "is allergic to").
RELATION_LEADS = frozenset("in at as to for of on from with by into about a an the".split())
ARTICLES = frozenset("a an the".split())
# Auxiliaries: the word after one belongs to the relation ("is allergic to", "can't stand").
AUXILIARIES = frozenset("is are was were am can cannot could does do did will would has have had".split())
COPULAS = frozenset("is are was were".split())
TIME_ADVERBS = frozenset("now currently still also really just recently finally already".split())
# One day's stretch: a value said of it is how things are that day ("is sick today", "is tacos tonight").
OF_ONE_DAY = frozenset("today tonight".split())
# Said between a subject and its verb ("User usually eats ...", "User kind of loves ...").
FREQUENCY_ADVERBS = frozenset("usually normally often always sometimes rarely seldom barely hardly mostly generally "
                              "typically kind sort".split())
IRREGULAR_PAST = frozenset("got bought sold left broke became began took went came made met quit won lost found gave "
                           "put split ran grew fell".split())
# Past tenses that change whose a thing is or what holds ("bought the flat in Lisbon" of "rents a flat in Lisbon",
# "finished my master's at LSE", "pulled out of the Berlin half"), not something done with it ("took the Tacoma
# camping", "washed the Prius").
CHANGING_PAST = frozenset("got bought sold left broke became began quit won lost gave split finished completed "
                          "withdrew graduated traded totaled totalled junked scrapped pawned donated wrecked closed "
                          "returned rehomed unsubscribed".split())
# A verb and the word after it that end what held the same way ("stepped down at the Red Cross", "pulled out of").
ENDING_PHRASES = frozenset({"stepped down", "handed in", "handed over", "gave away", "pulled out", "dropped out",
                            "moved out", "backed out", "opted out"})
PREPOSITIONS = frozenset("in at on for with from to near around about after before during until till since by into "
                         "onto of over under without within inside outside across behind beside between through "
                         "toward towards via per".split())
# Words that point back at what was named ("worked there", "loves it"): no value of their own.
PRO_FORMS = frozenset("there here it that this them those these".split())
# Where a changed value is said to go or to stand, before the value itself ("changed it to Brennan", "is down to 58",
# "is around 72", "a PB of 3:29"): no slot of their own.
TOWARD = frozenset("to around about down up of".split())
AGE_UNITS = frozenset({"year", "years", "old", "yo", "y"})  # "29 years old" says "29" more fully
# What counts how many or how long: a statement sharing only these with another shares no relation ("has two kids" /
# "has two weeks of vacation", "for 6 years"). Stems too.
QUANTITIES = frozenset("one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty "
                       "hundred thousand dozen couple few several half second minute hour day week month year decade "
                       "seconds minutes hours days weeks months years decades".split())
# Where a value ends: a clause break, or a word that starts a phrase of time, place or reason.
VALUE_ENDS = frozenset("in at on for with since from to by during last next this every because and but "
                       "when while after before who which that".split())

# What opens a clause that only adds to the one before it ("in the Zurich office", "which User loves", "so
# User walks"): a detail of that clause, not a fact of its own.
DEPENDENT_OPENERS = frozenset("in at on for with from to by of as about into near since during after before while "
                              "when where which who whom whose that so because then though although than or like "
                              "until unless if".split())
# Words that make a span a clause or a reference rather than a value: a pronoun standing for what was
# named elsewhere ("it was tough 'cause they ..."), a modal saying what someone will or can do ("will
# stick up for"). "one" and "may" stay out: a number, a month.
CLAUSE_MARKS = frozenset("i we he she they it them us him will can could would should must might".split())
# A definite reference ("the neighborhood", "their school", "there") points back at what the sentence is about:
# such a clause goes with it ("bought a house in Austin and loves the neighborhood": a move ends both).
REFERS_BACK = frozenset("the their its this that these those there it".split())
# Where one sentence ends and the next begins: after . ! or ?, before what opens a sentence — not after a title or
# an abbreviation that a name follows ("St. Luke's", "Dr. Patel").
SENTENCE_BREAK = re.compile(r"(?<=[.!?])" + "".join(rf"(?<!\b{a}\.)" for a in (
    "St", "Dr", "Mr", "Ms", "Mrs", "Jr", "Sr", "Mt", "Ft", "Prof", "vs", "Inc", "Ave", "Rd")) + r"\s+(?=[\"'(A-Z0-9])")
# Asides that speak to the listener without making the statement one about them ("Just so you know, User no longer
# lives in Houston", "As User told you, ..."): the "you" in them does not address the fact to someone.
ASIDE_TO_LISTENER = re.compile(
    r"\b(?:just so you know|so you know|as you know|you know|as \w+ told you|like \w+ told you|\w+ told you|"
    r"did \w+ tell you|to be honest with you|let me tell you|you see|mind you|trust me|if you can believe it|"
    r"if you can believe that|can you believe it|would you believe it|you won't believe it|you wouldn't believe it)\b",
    re.I)
# Words one of which each ASIDE_TO_LISTENER phrase holds: an ASCII text without any holds no aside, and is not
# searched for one (a search reads each of its first ten hits; the pattern costs ~30 µs a text).
ASIDE_MARKS = ("you know", "told you", "tell you", "with you", "you see", "mind you", "trust me", "believe")
MONTH_NAMES = tuple("january february march april may june july august september october november december".split())
MONTHS = {m: i for i, m in enumerate(MONTH_NAMES, start=1)}
WEEKDAYS = tuple("monday tuesday wednesday thursday friday saturday sunday".split())
# Words that say when, not what: two plans alike but for these are one plan on another day.
WHEN_WORDS = frozenset({*MONTH_NAMES, *WEEKDAYS} | set("today tonight tomorrow yesterday next last this week weeks "
                                                       "month months year years weekend morning afternoon evening "
                                                       "night ago day days".split()))


@lru_cache(maxsize=65536)  # words repeat: a search's newer_first stems each of its hits' words several times
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


# More ways of entering a state, each said as the state it enters, so that it aligns with a statement of
# that state: an age reached ("turned 30" → "is 30 years old"), a time an event was moved to ("was
# postponed to Friday" → "is on Friday": passive only, "moved to Denver" is a move of home), a promotion
# ("was promoted to team lead" → "works as team lead"), a retirement ("retired last year" → "stopped
# working": not "retired the old laptop"), and a couple's end said of both ("User and Mark split up").
_NUMBER = (r"(?:\d{1,3}|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
           r"(?:[- ](?:one|two|three|four|five|six|seven|eight|nine))?"
           r"|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
           r"|sixteen|seventeen|eighteen|nineteen)")
_NOT_AN_AGE = r"(?!\s*(?:%|percent|degrees|points|minutes|times|pages|miles|km))"
_ENTERED = (
    (re.compile(rf"\b(?:just\s+)?turn(?:ed|s)\s+({_NUMBER})\b{_NOT_AN_AGE}", re.I), r"is \1 years old"),
    (re.compile(r"\b(?:was|were|has\s+been|have\s+been|had\s+been|got|is|are|been)\s+(?:just\s+|now\s+|finally\s+)?"
                r"(?:postponed|rescheduled|delayed|pushed\s+back|pushed|moved|moved\s+up|brought\s+forward|bumped)"
                r"\s+(?:to|until|till)\b", re.I), "is on"),
    (re.compile(r"\b(?:postponed|rescheduled|delayed|pushed\s+back)\s+(?:it\s+|them\s+)?(?:to|until|till)\b", re.I),
     "is on"),
    (re.compile(r"\b(?:was|were|got|has\s+been|have\s+been|been|is|am|are)\s+(?:just\s+|recently\s+|finally\s+)?"
                r"promoted\s+to\b", re.I), "works as"),
    (re.compile(r"(?<!was )(?<!were )(?<!been )(?<!be )(?<!is )(?<!are )(?<!got )\bretired\b"
                r"(?!\s+(?:the|his|her|their|my|our|its|that|this|those|these|some|all|an?|old)\b)", re.I),
     "stopped working"),
    (re.compile(r"\band\s+([A-Z]\w+)\s+(?:have\s+|had\s+)?(?:split\s+up|broke\s+up|separated|divorced|"
                r"called\s+it\s+quits)\b"
                # not "split up the chores"
                r"(?!\s+(?:the|a|an|our|their|his|her|my|its|it|them|this|that|these|those)\b)"),
     r"broke up with \1"),
    (re.compile(r"\bsplit\s+up\s+with\b", re.I), "broke up with"),
    # Someone moved to a place: they live there ("the meeting was moved to Friday" is read above, first) — not to a
    # seat, a shift, a team or a time ("moved to a standing desk", "relocated to the corner office", "moved to the
    # night shift", "moved to Saturdays": trials' traps, each read as a new home).
    (re.compile(r"\b(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+(?:back\s+)?to\b"
                r"(?!\s+(?:(?:a|an|the|my|our|his|her|their|another|new|different)\s+){0,3}(?:[\w-]+\s+)?"
                r"(?:shift|team|department|dept|desk|office|cubicle|seat|room|floor|role|position|job|group|division|"
                r"squad|project|account|plan|app|platform|channel|server|level|grade|class|section|couch|sofa|bed|"
                r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|weekend|morning|afternoon|evening|night|"
                r"january|february|march|april|may|june|july|august|september|october|november|december)s?\b)",
                re.I), "lives in"),
)


# Attributes a person holds one value of at a time: a statement of another value replaces the one before
# ("I'm single." → "I got married last summer", "I'm vegetarian." → "I went vegan in January"). Only as what the
# subject is or became ("is vegan", "went vegan", "has been vegan"), not as a word about something else ("a vegan
# dinner") nor as what it was ("was engaged once").
# The same value said as a noun: "is a widower" is widowed.
_STATE_ALIASES = {"widower": "widowed", "widow": "widowed"}
EXCLUSIVE_STATES = {
    "relationship status": ("single", "married", "engaged", "divorced", "separated", "widowed", *_STATE_ALIASES),
    "diet": ("vegetarian", "vegan", "pescatarian", "flexitarian", "omnivore", "carnivore", "keto", "paleo"),
}
_BECAME = (r"\b(?:is|am|are|(?:has|have|['’]ve|['’]s)\s+been|['’]m|['’]s|got|get|gets|getting|became|become|"
           r"becomes|went|goes|going|go|turned|stayed|stays)\s+"
           r"(?:(?:now|fully|strictly|officially|happily|recently|finally|just|still|a|an)\s+)*")
_NOT_OF_IT = r"(?![- ](?:room|dish|dinner|meal|recipe|option|menu|restaurant|friend|life|parent|mom|dad))"
_EXCLUSIVE = {attribute: re.compile(rf"{_BECAME}({'|'.join(values)})\b{_NOT_OF_IT}", re.I)
              for attribute, values in EXCLUSIVE_STATES.items()}
# What the subject works as, one job at a time ("is a paramedic" → "became a dispatcher"): only as the trade itself
# right after the verb — not "a retired teacher", "a nursing student", "a volunteer firefighter" (a word between), nor
# a wish ("wants to become a pilot"), the past ("was a nurse") or a job beside it ("a second job as a bartender").
OCCUPATIONS = tuple(
    "nurse paramedic dispatcher teacher doctor physician surgeon dentist pharmacist lawyer attorney paralegal "
    "accountant engineer developer programmer designer architect electrician plumber carpenter mechanic chef baker "
    "barista bartender waiter waitress cashier librarian firefighter detective pilot trucker farmer scientist "
    "researcher professor lecturer tutor therapist counselor psychologist psychiatrist veterinarian journalist "
    "reporter editor photographer realtor consultant analyst recruiter banker economist translator interpreter janitor "
    "receptionist hairdresser barber tailor welder machinist technician dietitian nutritionist midwife optometrist "
    "chiropractor physiotherapist radiologist paramedic emt cop".split())
# What a trade is said with and stays that trade ("a senior UX designer", "a sous chef") — unlike "retired",
# "volunteer", "student", which say something else of the subject.
TRADE_LEVELS = tuple("senior junior lead head chief principal staff assistant associate registered licensed "
                     "certified ux ui graphic web software data civil mechanical electrical structural sous pastry "
                     "dental".split())
OCCUPATION = "occupation"
_EXCLUSIVE[OCCUPATION] = re.compile(
    rf"(?<!to )(?:{_BECAME}"
    rf"|(?<!second )(?<!another )(?<!side )\b(?:works?|working|hired|employed|job)\s+as\s+(?:an?\s+)?)"
    rf"(?:(?:{'|'.join(TRADE_LEVELS)})\s+){{0,2}}"
    rf"({'|'.join(dict.fromkeys(OCCUPATIONS))})\b(?![- ]\w*(?:student|school|friend|program|degree|course|class))",
    re.I)
_OCCUPATION_SET = frozenset(OCCUPATIONS)
_LETTERS = re.compile(r"[a-z]+")


# Being one of a couple, said without a status word ("has a boyfriend", "is dating Sam"): a relationship status all the
# same, which "is single again" (or "got married") replaces.
_IN_A_COUPLE = "in a relationship"
# Not "a partner" (at the firm, for the tournament), "seeing someone" (about a back pain), "still dating" (after
# twenty years of marriage), "dating apps", "in a relationship with my old car" (a regression trial). Case matters:
# "dating Sam" names someone.
_COUPLED = re.compile(
    r"\b(?:has|have|['’]ve got|has got|['’]s got) an? (?:boyfriend|girlfriend|bf|gf)\b"
    r"|\b(?:is|am|are|['’]m|['’]re|['’]s) (?:now )?"
    r"(?:dating(?= +(?:[A-Z]|someone|somebody|again|now)| *[.!,;]| *$)"
    r"|in a relationship(?= *[.!,;]| *$| +(?:now|again)\b| +with +(?:someone|somebody|[A-Z](?![\w'’]*['’]s\b))))")
# Marrying someone named: "married Rose last spring" (not "married life", "married couple").
_WED = re.compile(r"\b(?:married|marries|marrying|wed)\s+[A-Z]|\bremarried\b")  # "married Sam", "remarried"
_STATE_WORDS = (*(v for values in EXCLUSIVE_STATES.values() for v in values),
                "boyfriend", "girlfriend", "bf", "gf", "dating", "relationship")


def may_hold_state(text: str) -> bool:
    """Whether `exclusive_states` can find anything in `text`: one of its values is in it, anywhere ("vegan-ish"
    too). Most statements have none; a search reads each of its first ten hits, and each attribute is a scan."""
    lowered = text.lower()
    return any(v in lowered for v in _STATE_WORDS) or _AGED.search(text) is not None \
        or not _OCCUPATION_SET.isdisjoint(_LETTERS.findall(lowered))


def exclusive_states(text: str) -> dict[str, str]:
    """attribute → the one value `text` says its subject holds, of `EXCLUSIVE_STATES` (none when it names two)."""
    out: dict[str, str] = {}
    for attribute, pattern in _EXCLUSIVE.items():
        found = {_STATE_ALIASES.get(v, v) for v in (m.group(1).lower() for m in pattern.finditer(text))}
        if attribute == "relationship status":
            if _COUPLED.search(text):
                found.add(_IN_A_COUPLE)
            if _WED.search(text):
                found.add("married")
        if len(found) == 1:
            out[attribute] = found.pop()
    return out


def ages(text: str) -> set[tuple[str, str]]:
    """(the word before the verb, lower case, possessive dropped; the number) of each age `text` says."""
    return {(re.sub(r"['’]s$", "", m.group("who").lower()), m.group("age")) for m in _AGE.finditer(text)}


# An age said as a bare number: "is 24", "turned 25 on Saturday", "is 40 years old now": one at a time, as a state.
# Not a number with another unit ("is 30 minutes away", "is 20 weeks pregnant", "is 6'2") nor one a phrase goes on
# from ("is 2 for 2").
AGE = "age"
_AGE = re.compile(r"(?P<who>[\w'’]+)\s+(?:is|turned|turns|turning)\s+(?:(?:now|officially|just|finally)\s+)*"
                  r"(?P<age>\d{1,3})"
                  r"(?:\s*(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?"
                  r"(?=\s*(?:now|today|yesterday|this|last|on|as of|and|but|so|[.!,;)]|$))", re.I)
_AGED = re.compile(r"\b(?:is|turned|turns|turning)\s+(?:\w+\s+)?\d", re.I)


# A word each phrase above has (as a part of it, whatever the case: "semi-retired", "re-scheduled").
_ENTERING_WORDS = tuple("got took landed accepted found started began starts begins hired turn postponed scheduled "
                        "delayed pushed moved relocated bumped brought promoted retired split broke separated "
                        "divorced quits".split())


_ENTERING = re.compile("|".join(_ENTERING_WORDS))


def may_enter(text: str) -> bool:
    """Whether `as_state` can change `text`: one of the words its phrases turn on is in it. Most statements have
    none; a search reads each of its first ten hits, and each substitution is a scan of the text."""
    return _ENTERING.search(text.lower()) is not None


def as_state(text: str) -> str:
    """`text` with each phrase that enters a state said as being in it ("got a job as" → "works as")."""
    text = _ENTRY.sub("works", text)
    for pattern, state in _ENTERED:
        text = pattern.sub(state, text)
    return text


# A possessive "'s" is its word, as OpenSearch's english_possessive_stemmer reads it: split at the
# apostrophe, it would leave a bare "s" that matches every "that's" and "it's".
# An apostrophe-s after a word; the apostrophe first, so that the pattern scans for it (3× faster than a
# leading look-behind, which is tried at every position).
_POSSESSIVE = re.compile(r"['’](?<=\w['’])s\b", re.I)


def drop_possessive(text: str) -> str:
    return _POSSESSIVE.sub("", text)


def may_hold_aside(text: str) -> bool:
    """Whether `text` may hold an ASIDE_TO_LISTENER phrase (False: it holds none)."""
    lowered = text.lower()
    return not text.isascii() or any(mark in lowered for mark in ASIDE_MARKS)


_WORD = re.compile(r"\w+")


def search_words(text: str, limit: int) -> list[str]:
    """The words a keyword search looks for, the same on every index: lower-cased word runs, possessives
    and Lucene's English stop words left out, each once, the first `limit` (bounds one query's cost)."""
    words = (w.lower() for w in _WORD.findall(drop_possessive(text)))
    return list(dict.fromkeys(w for w in words if w not in LUCENE_STOP_WORDS))[:limit]


def has_phrase(text: str, phrases: tuple[str, ...]) -> bool:
    """Whether one of `phrases` is in `text` as whole words (followed by a space, comma, period or the end)."""
    return _phrases(phrases).search(f" {text.lower()} ") is not None


@lru_cache(maxsize=64)
def _phrases(phrases: tuple[str, ...]) -> re.Pattern[str]:
    # One pass over the text for all of them: the statement readers ask several lists per statement.
    return re.compile(" (?:" + "|".join(re.escape(p) for p in phrases) + ")[ ,.]")


def negated(words: list[str], text: str) -> bool:
    return not NEGATIONS.isdisjoint(words) or bool(_NEGATED_VERB.search(text)) or has_phrase(text, ("no longer",))


_STRONG_CUES = CHANGE_CUES - WEAK_CUES


def change_cue(words: list[str], text: str, *, strong: bool = False) -> bool:
    return not (_STRONG_CUES if strong else CHANGE_CUES).isdisjoint(words) or has_phrase(text, CHANGE_PHRASES)


def stop_cue(words: list[str], text: str) -> bool:
    return not STOP_CUES.isdisjoint(words) or has_phrase(text, STOP_PHRASES)


# A stop said of one occasion ("rage quit a chess game halfway", "cancelled a lesson"), not of the habit or the plan
# ("quit a job at Acme", "cancelled a trip to Japan" end what they name).
_STOPPED_ONCE = re.compile(r"\b(?:quit|stopped|cancell?ed|ended|gave up|walked out of|left)\s+(?:a|an|one|another)"
                           r"(?:\s+\w+)?\s+(?:game|match|round|set|hand|level|episode|lesson|class|session|meeting|call"
                           r"|shift|set|practice|rehearsal|workout)s?\b", re.I)


def stopped_once(text: str) -> bool:
    return _STOPPED_ONCE.search(text) is not None


# Said to keep what holds: an offer turned down, a move not made ("got an offer from nike but adidas treats User
# better, staying put").
_STAYING = re.compile(r"\b(?:staying put|not going anywhere|turn(?:ed|ing) (?:it|them|that|the offer|the job) down"
                      r"|decided to stay|not taking (?:it|the offer|the job))\b", re.I)


def stays(text: str) -> bool:
    return _STAYING.search(text) is not None


# Said in irony: a sarcastic opener ("oh sure, User is the CEO of the water department now") or an eye roll.
_IRONIC = re.compile(r"(?:^|: )(?:oh sure|yeah right|yeah,? yeah|sure,? sure|as if)\b|🙄", re.I)


def ironic(text: str) -> bool:
    return _IRONIC.search(text) is not None


# What can follow a day said without its month's name: an end, or a word that cannot go on a noun phrase ("the 14th
# at 3", not "the 3rd floor"; "may 8 works", not "everyone may 12 times ask").
_AFTER_A_DAY = (r"(?=\s*(?:$|[,.;:!?)]|\d|(?:at|and|or|but|for|by|instead|then|is|was|works?|now|lol|tonight"
                r"|in the (?:morning|afternoon|evening))\b))")
# "may" as the month, typed in lower case ("rebooked for may 8", "may 8th at 2"): what follows it.
DAY_AFTER_MAY = rf" [0-3]?\d(?:st|nd|rd|th)?\b(?![:.]\d){_AFTER_A_DAY}"
# A day of the month said as an ordinal alone, after a word that leads to a day or first ("moved the dentist to
# the 14th", "the 18th works") — not "was the 1st and only", "finished the 3rd at the spelling bee".
ORDINAL_DAY = (r"(?=the \d)"  # first: most places hold no "the" before a digit
               r"(?:^|(?<=\bon )|(?<=\bto )|(?<=\bfor )|(?<=\buntil )|(?<=\btill )|(?<=\bby )|(?<=\bbefore )"
               r"|(?<=\bafter )|(?<=\bfrom )|(?<=\bsince )|(?<=\bis )|(?<=\bnow ))"
               rf"the (?P<day>[1-9]|[12]\d|3[01])(?:st|nd|rd|th)\b{_AFTER_A_DAY}")
# Said as a possibility, a wish, a condition or an intention ("might move to Munich", "if User gets the job",
# "is thinking of moving", "would love to live in Lisbon"): it changes nothing that holds now. "would rather" and
# "would prefer" say a preference, in the present. "may" only in lower case and not before a day: "May" and "may 8"
# are the month.
_IRREALIS = re.compile(
    rf"\b(?:[Mm]ight|may(?!{DAY_AFTER_MAY})"
    r"|[Cc]ould|[Ww]ould(?! rather\b| prefer\b)|\w+['’]d(?! rather\b| prefer\b)|[Mm]aybe|[Pp]erhaps"
    r"|[Pp]ossibly|[Ss]omeday|[Ii]f|[Uu]nless|(?:thinking|thought|dreaming|dreams?) (?:of|about)|considering"
    r"|(?:wants?|wanting|wanted|plans?|planning|planned) to|[Hh]op(?:es?|ing|ed)|[Ww]ish(?:es|ing)?|not sure"
    r"|(?:[Aa]lmost|[Nn]early) (?=\w+ed\b))\b")  # "almost moved to Charlotte": not made; not "nearly 10 years"


def irrealis(text: str) -> bool:
    return _IRREALIS.search(text) is not None


# Said of a time gone by ("Back in college User worked as a lifeguard", "When User was a kid User lived in
# Tokyo", "years ago"): narration of the past changes nothing that holds now. Not "used to" (see `used_to`)
# nor a date.
_PAST_FRAME = re.compile(
    r"\b(?:[Ww]hen (?:\w+ )?(?:was|were) (?:a |an |in |at |still |younger|little|small|young)|[Bb]ack (?:in|when|then)"
    r"|as an? (?:kid|child|teen|teenager|student|undergrad)|[Gg]rowing up|(?:years|decades|ages) ago|once before"
    r"|in (?:\w+['’]s |my |our |their )(?:teens|twenties|thirties|forties|childhood|youth)|long ago|at the time)\b")


def past_frame(text: str) -> bool:
    return _PAST_FRAME.search(text) is not None


# Said of a bounded stretch of the present ("driving a rental this week", "for now", "while the Accord is in the
# shop", "vegan for lent", "keto for the wedding"): a stand-in, after which what held holds again. Not "from this
# week" (a change that starts then).
_FOR_NOW = re.compile(
    r"\b(?:(?<!from )(?<!starting )(?<!since )(?<!as of )this (?:week|weekend)|for now|for the time being|temporarily"
    r"|for (?:the|a|a few|a couple of|two|three) (?:days?|weeks?|weekend|nights?)"
    r"|for (?:lent|ramadan|the (?:holidays|wedding|trip|summer|semester|season))"
    r"|while .{0,40}\b(?:in the shop|being (?:fixed|repaired))|until .{0,30}\b(?:fixed|repaired|back)\b)", re.I)


# A sentence in quotation marks (three words or more, so not a name: "named 'Biscuit'"): what someone said or wrote.
QUOTED = re.compile(r"""(?:(?<=[\s:,(])|^)['"“‘](?=\S)(?P<said>(?:\S+\s+){2,}?.+?)(?<=\S)['"”’](?=[\s.,!?;:)]|$)""")


def for_now(text: str) -> bool:
    return _FOR_NOW.search(text) is not None


# A negation bounded in time ("wasn't vegan until May", "didn't work at Google until 2019", "hadn't been vegan before
# May", "hasn't worked there for long", "won't be vegan forever"): when it began, or that it may end — not that it
# does not hold.
_BOUNDED = re.compile(r"\b(?:until|till|before|for long|forever)\b", re.I)


def bounded(text: str) -> bool:
    return _BOUNDED.search(text) is not None


# A stop said of some times only ("stopped drinking coffee after 2pm", "quit working out when User travels", "while the
# kids are awake", "on weekends", "during Lent"): a habit narrowed, which holds at the other times. Not the time it
# happened ("when User's daughter was born", "when User moved": a clause in the past; "after User's injury").
_NARROWED = re.compile(
    r"\b(?:(?:after|before) (?:\d{1,2}(?::\d\d)?\s*(?:am|pm|o['’]clock)\b|\d{1,2}:\d\d\b"
    r"|noon|midnight|dark|sunset|sundown|bed(?:time)?\b"
    r"|work\b|dinner|lunch|breakfast)|on (?:weekends|weekdays|weeknights|(?:mon|tues|wednes|thurs|fri|satur|sun)days)"
    r"|at night|in the (?:evenings?|mornings?)|during (?:lent|ramadan|advent|the week\b|the workweek|work hours|exams?)"
    r"|(?:when|whenever|while) (?P<clause>[^,.;!?]+))", re.I)
_PAST_TENSE = IRREGULAR_PAST | frozenset("was were had did told said saw heard felt kept cut hit let shut set".split())


def narrowed(text: str) -> bool:
    for m in _NARROWED.finditer(text):
        clause = m.group("clause")
        if clause is None or not any(w in _PAST_TENSE or len(w) > 4 and w.endswith("ed")
                                     for w in re.findall(r"[a-z]+", clause.lower())):
            return True
    return False


# A habit's recurrence ("every Tuesday", "each morning", "daily", "on Tuesdays"), and a change said of one occasion of
# it ("the piano lesson tomorrow is cancelled", "therapy this Wednesday moved to 5"): the habit holds at the others —
# unless the change is said to last ("from now on", "for good", "anymore").
_DAYS_PLURAL = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days"
_RECURRING = re.compile(rf"\b(?:every|each|daily|weekly|nightly|monthly|quarterly|yearly|annual|biweekly)\b"
                        rf"|\b{_DAYS_PLURAL}\b|\bon weekends\b", re.I)
_A_DAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_ONE_OCCASION = re.compile(rf"\b(?:today|tonight|tomorrow|this (?:morning|afternoon|evening|week(?:end)?|{_A_DAY})"
                           rf"|next (?:week(?:end)?|{_A_DAY}))\b", re.I)
_LASTING = re.compile(r"\b(?:from now on|for good|anymore|any more|no longer|permanently|going forward|from then on)\b",
                      re.I)


# A statement that corrects what was said before it ("Actually my flight home is March 29", "wait no, ... I misread
# the ticket"): not another occasion beside it.
_CORRECTION = re.compile(r"^\W*actually\b|\b(?:misread|misspoke|mistyped|typo|wait no|oops|my bad|i meant|correction)\b",
                         re.I)


def corrects(text: str) -> bool:
    return _CORRECTION.search(text) is not None


def recurring(text: str) -> bool:
    return _RECURRING.search(text) is not None


def one_occasion(text: str) -> bool:
    """Said of one occasion only: a day named, no recurrence of its own, no lasting change."""
    return (_ONE_OCCASION.search(text) is not None and _RECURRING.search(text) is None
            and _LASTING.search(text) is None)


_STATE_BEFORE = frozenset("am is are be been being feel feels get gets so very really".split())  # "is excited"


def past_tense(text: str) -> bool:
    """A verb of what happened ("had", "ran", "interviewed") and none of what is to come ("will", "going to")."""
    words = re.findall(r"[a-z]+", text.lower())
    return (any(w in _PAST_TENSE or len(w) > 4 and w.endswith("ed") and (i == 0 or words[i - 1] not in _STATE_BEFORE)
                for i, w in enumerate(words))
            and not any(w in ("will", "going", "gonna", "tomorrow", "next") for w in words))


_USED_TO = re.compile(r"(\S+)\s+used to\s+(\w+)", re.I)
# "is used to the snow", "getting used to the commute", "not used to it": accustomed, not a habit that ended.
_ACCUSTOMED_BEFORE = frozenset("am is are was were be been being get gets got getting not so very still".split())
_ACCUSTOMED_AFTER = frozenset("the a an it this that these those my your his her our their its him them me us".split())


def used_to(text: str) -> bool:
    """"used to live in Milwaukee": a value that held once (not "is used to the snow": accustomed). Said of the
    value a memory holds it ends it (a restatement of it, in the past); said of another, it is narration of the
    past, and the memory's still holds."""
    for m in _USED_TO.finditer(text):
        before, after = m.group(1).lower().replace("’", "'"), m.group(2).lower()
        if not (before in _ACCUSTOMED_BEFORE or before.endswith(("'m", "'s", "'re")) or after in _ACCUSTOMED_AFTER
                or after.endswith("ing")):
            return True
    return False


# "either" closing a clause adds a negated value ("doesn't eat beef either"); "either way", "either X or Y" do not.
_EITHER = re.compile(r"\beither\b(?=\s*(?:[.,!?;)]|$))", re.I)


def additive_cue(words: list[str], text: str) -> bool:
    return not ADDITIVE_CUES.isdisjoint(words) or has_phrase(text, ADDITIVE_PHRASES) or _EITHER.search(text) is not None


_PLEASANTRY_OPENER = re.compile(
    r"^\W*(hi|hey|hello|thanks|thank you|bye|goodbye|good night|ok|okay|sure|cool|great|wow|lol|haha|yes|no|yeah|"
    r"yep|nice|awesome|sounds good|see you|take care|you too|me too|congrats|congratulations)\b", re.I)
# What may follow such an opener in social talk: "Thank you so much for your help!", "Thanks, that's all for now."
_SOCIAL = frozenset(
    "so very much a lot lots for the your you all that's that it's it is was now there again then help everyone "
    "guys folks bye later soon see talk have had nice good great day night evening morning weekend sounds cool "
    "ok okay thanks thank really appreciate appreciated awesome perfect will do too same to and oh ah wow yes no "
    "yeah yep sure hi hey hello".split())


def pleasantry(sentence: str) -> bool:
    """Social talk only: an opener ("Thanks", "Hi", "OK") followed by nothing but social words. "Hi, my name is
    Bob" and "No, I moved to Berlin" state something (an opener alone decided it before, whatever followed)."""
    opener = _PLEASANTRY_OPENER.match(sentence)
    if opener is None:
        return False
    return all(w in _SOCIAL for w in re.findall(r"[a-z']+", sentence[opener.end():].lower().replace("’", "'")))

