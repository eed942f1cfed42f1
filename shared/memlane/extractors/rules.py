"""The deterministic extractor: used when no LLM is configured. Honest and predictable —
one memory per informative turn, speaker-attributed, with relative dates resolved.

"I went to the support group yesterday" said by Caroline on 8 May 2023 becomes
"Caroline went to the support group yesterday" with event_time 2023-05-07 and the keywords
"Caroline 8 May 2023 7 May 2023", so both "what did Caroline do" and "when" find it.
"""

from __future__ import annotations

import re
from typing import Collection, Sequence

from ..domain.language import CONTEXT_STOP_WORDS, IRREGULAR_PAST, PEOPLE, PRO_FORMS, SENTENCE_BREAK, pleasantry
from ..domain.models import DEFAULT_EXTRACT_ROLES, Candidate, ExtractRole, MemoryType, Message
from ..policies import timeexpr

_SENTENCE = SENTENCE_BREAK
_FIRST_PERSON = [
    (re.compile(r"\bI'm\b|\bI am\b", re.I), "{s} is"),
    (re.compile(r"\bI've\b|\bI have\b"), "{s} has"),
    (re.compile(r"\bI'll\b|\bI will\b"), "{s} will"),
    (re.compile(r"\bI'd\b"), "{s} would"),
    (re.compile(r"\bI was\b"), "{s} was"),
    (re.compile(r"\bmyself\b", re.I), "{s}"),
    (re.compile(r"\bmine\b", re.I), "{s}'s"),
    (re.compile(r"\bmy\b", re.I), "{s}'s"),
    (re.compile(r"\bme\b|\bMe(?= and\b)"), "{s}"),  # "Me and my sister went": chat's subject
    (re.compile(r"\bI\b"), "{s}"),
]
# "I" as chat often writes it: "i moved to portland" — in a sentence that has no "I" (where "type i diabetes" is no
# pronoun).
_LOWER_I = re.compile(r"(?<!type )(?<!part )(?<!phase )(?<!stage )(?<!class )(?<!grade )(?<!level )(?<!chapter )"
                      r"\bi\b(?![/.]\w)", re.I)  # not a numeral ("type i diabetes", "part i") nor "i/o"
_UPPER_I = re.compile(r"\bI\b")
# "im moving", "ive got": chat's "I'm" and "I've" without the apostrophe (neither is a word of its own).
_CHAT_I = re.compile(r"(?<!\ban )(?<!\bthe )\b(?:(?P<am>[Ii]m)|[Ii]ve)\b")  # not "an IM", "the im"
# "I work" → "Ann works": present-tense verbs that follow a first-person subject, with one optional adverb.
_PRESENT = re.compile(
    r"\b(?P<subject>{s})(?P<adverb> (?:really|also|usually|often|always|still|just|now|actually|mostly|sometimes|"
    r"never|rarely|seldom|barely|hardly|generally|normally|typically|currently|only))?"
    r" (?P<verb>work|live|love|like|prefer|enjoy|hate|want|need|think|feel|play|teach|study|own|know|plan|hope|"
    r"run|write|read|cook|eat|drink|use|take|make|get|go|do|try|believe|miss|wish|remember|volunteer|paint|"
    r"collect|support|dislike|practice|practise|attend|visit|speak|care|agree|see|mean|keep|find|look|spend|"
    r"cycle|walk|drive|ride|swim|travel|commute|sing|dance|draw|listen|watch|meet|wear|sleep|train|bake|hike|weigh|bank|"
    r"shop|jog|wake|rent|lift|bike|buy|sell|pay|call|text|grow|build|fix|stream|host|coach|manage|lead|"
    r"smoke|vape|ski|surf|climb|skate|knit|sew|garden|golf|fish|box|pray|vote)\b")


# "I don't eat meat" → "Ann doesn't eat meat", "I haven't" → "Ann hasn't": the auxiliaries of a negation.
_AUXILIARY = re.compile(r"\b(?P<subject>{s})(?P<adverb> (?:really|also|usually|often|always|still|just|actually|"
                        r"generally|normally|typically|currently))? (?P<aux>do|have)(?P<neg>n['’]t| not)\b")


def _agree(sentence: str, speaker: str) -> str:
    def inflect(m: re.Match[str]) -> str:
        verb = m.group("verb")
        verb = {"go": "goes", "do": "does", "try": "tries", "miss": "misses", "wish": "wishes",
                "teach": "teaches", "watch": "watches", "fish": "fishes", "box": "boxes"}.get(verb, verb + "s")
        return f"{m.group('subject')}{m.group('adverb') or ''} {verb}"

    def auxiliary(m: re.Match[str]) -> str:
        aux = "does" if m.group("aux") == "do" else "has"
        return f"{m.group('subject')}{m.group('adverb') or ''} {aux}{m.group('neg')}"

    who = re.escape(speaker)
    sentence = re.compile(_AUXILIARY.pattern.format(s=who)).sub(auxiliary, sentence)
    return re.compile(_PRESENT.pattern.format(s=who)).sub(inflect, sentence)


_SECOND_PERSON = [
    (re.compile(r"\byou're\b|\byou are\b", re.I), "{s} is"),
    (re.compile(r"\byou've\b|\byou have\b", re.I), "{s} has"),
    (re.compile(r"\byou'll\b|\byou will\b", re.I), "{s} will"),
    (re.compile(r"\byou'd\b", re.I), "{s} would"),
    (re.compile(r"\byou were\b", re.I), "{s} was"),
    (re.compile(r"\byourself\b", re.I), "{s}"),
    (re.compile(r"\byours\b|\byour\b", re.I), "{s}'s"),
    (re.compile(r"\byou\b", re.I), "{s}"),
]
# A yes/no answer: nothing alone, a statement next to the question it answers.
_ANSWER = re.compile(r"^(yes|yeah|yep|yup|no|nope|sure|right|exactly|correct|definitely|absolutely|of course|"
                     r"not really|that's right|that is right)\b", re.I)
# Words that open a restatement without being part of it: "So the movers are booked ..."
_DISCOURSE = re.compile(r"^(so|ok|okay|alright|all right|great|perfect|got it|noted|just to confirm|to confirm)"
                        r"\b[,:]?\s+", re.I)
# A confirmation of what was just said to the speaker.
_CONFIRM = re.compile(r"^(yes|yeah|yep|yup|right|exactly|correct|that's right|that is right|that's correct|"
                      r"absolutely|definitely|indeed)\b(?!,? but\b)", re.I)
# "..., right?" asks only to confirm the statement before it.
_TAG_QUESTION = re.compile(r",\s*(right|correct|yes|isn't it|is that right|no)\?$", re.I)


def second_person(sentence: str, listener: str) -> str:
    """What was said to `listener`, about them: "your flight" → "Ann's flight"."""
    return _rewritten(sentence, listener, _SECOND_PERSON)


# Written as is, whatever words they hold: an address, a link, a host or file name, with its path
# ("dana.kim@proton.me" kept its "me" rewritten as the speaker's name, a trial found). A host's parts after
# the first open in lower case or a digit, its last has two letters at least: "moved.I love it" and "moved.i love
# it" are two sentences, not a host; "i.e." and "e.g." are kept too.
_LITERAL = re.compile(r"\S+@\S+|\b(?:https?://|www\.)\S+|\b(?:i\.e|e\.g)\.|"
                      r"\b[\w-]+(?:\.[a-z0-9][\w-]*)*\.[a-z0-9][\w-]+(?:/\S*)?|(?<![\w/])~?/[\w.~/-]+")


def _rewritten(sentence: str, person: str, patterns: list[tuple[re.Pattern[str], str]]) -> str:
    """`sentence` with each pattern's words put for `person`, in the words between its literals (`_LITERAL`)."""
    out, at = [], 0
    lower_i = patterns is _FIRST_PERSON and _UPPER_I.search(sentence) is None
    for m in _LITERAL.finditer(sentence):
        out += [_put(sentence[at:m.start()], person, patterns, lower_i), m.group(0)]
        at = m.end()
    return _agree("".join([*out, _put(sentence[at:], person, patterns, lower_i)]), person)


def _put(text: str, person: str, patterns: list[tuple[re.Pattern[str], str]], lower_i: bool = False) -> str:
    if patterns is _FIRST_PERSON:
        text = _CHAT_I.sub(lambda m: "I'm" if m.group("am") else "I've", text)
    if lower_i:
        text = _LOWER_I.sub("I", text)
    for pattern, template in patterns:
        text = pattern.sub(template.format(s=person), text)
    return text


_PREFERENCE = re.compile(r"\b(love|loves|like|likes|prefer|prefers|favou?rite|enjoy|enjoys|hate|hates|dislike|"
                         r"can't stand|allergic|vegetarian|vegan)\b", re.I)
_PLAN = re.compile(r"\b(will|going to|gonna|plan|plans|planning|want to|hope to|intend|next (week|month|year)|"
                   r"tomorrow|soon)\b", re.I)
_PROCEDURE = re.compile(r"\b(how to|step \d|first,? .* then|recipe|instructions?)\b", re.I)
_MIN_WORDS = 4


def speaker_of(message: Message) -> str:
    if message.name:
        return message.name
    return {"user": "User", "assistant": "Assistant"}.get(message.role, message.role.capitalize())


def third_person(sentence: str, speaker: str, after: str = "") -> str:
    """The sentence as said of the speaker; `after`: the sentence said before it in the turn — after one of someone
    else ("Grandma is amazing. Turned 90 last week."), a sentence without a subject may be theirs, and is left so."""
    return _rewritten(sentence if _ANOTHER_SUBJECT.match(after) else _with_subject(sentence), speaker, _FIRST_PERSON)


# A sentence whose subject is someone else, or something of someone's: "Grandma is amazing.", "Our dog Rex is getting
# old.", "My wife changed jobs." — not "They are so sweet.", "You have such a caring heart." nor a capitalised first
# word ("Dance is my go-to"): LoCoMo's turns go on with the speaker's own after those (the card lost recall).
_KIN = "|".join(w.capitalize() for w in sorted(PEOPLE))  # "Grandma", "Mom": someone named by what they are to one
_ANOTHER_SUBJECT = re.compile(
    rf"^(?:(?:[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir) (?:[\w'’-]+ ){{0,2}}?[\w'’-]+|(?:{_KIN}))"
    r" (?:is|was|are|were|has|had|have|just|got|gets|turned|turns|[a-z]{2,}ed)\b")


def _with_subject(sentence: str) -> str:
    """The sentence with the "I" chat drops put back: "Closed on a house in Dayton" → "I closed on a house in Dayton",
    "Been eating meat again" → "I have been eating meat again"."""
    if _NO_LONGER.match(sentence):
        return f"I'm {sentence[0].lower()}{sentence[1:]}"
    m = _SUBJECTLESS.match(sentence)
    if m is None:
        return sentence
    said = sentence[m.start("said"):]
    said = said[0].lower() + said[1:]
    return f"I {sentence[:m.start('said')].lower()}{'have ' if said.startswith('been ') else ''}{said}"


# A state the speaker left, said without the subject: "not a smoker anymore", "No longer vegan" (trials: written
# "User: not a smoker ...", a remark, which ended nothing) — not "Not a big deal", "Not bad".
_NO_LONGER = re.compile(r"^(?:[Nn]ot (?:an? )?[\w-]+(?: [\w-]+)? (?:anymore|any more)\b"
                        r"|[Nn]o longer (?!(?:do|does|did|am|is|are|was|were|have|has|had|will|can|could|would|i|we)\b)"
                        r"(?=\w))", re.I)
_PAST = "|".join(f"[{w[0].upper()}{w[0]}]{w[1:]}" for w in sorted(IRREGULAR_PAST))
# A statement of the speaker's without its subject, as chat drops it (trials: written "User: Started ...", no fact to
# update) — its first word, after an adverb:
_SUBJECTLESS = re.compile(
    r"^(?:(?:[Jj]ust|[Ff]inally|[Rr]ecently|[Aa]lso|[Aa]ctually|[Aa]lready|[Oo]fficially) )?"
    r"(?!(?:[Tt]urn(?:ed|s) out|[Ss]ounds|[Ll]ooks|[Ii]ndeed)\b)(?P<said>"  # openers: "Turned out it rained"
    # a verb of change, before any word — a name too: "Started at Atlassian", "Just turned 28", "Moved to Denver";
    r"(?:[Ss]tarted|[Gg]ot|[Ww]ent|[Mm]oved|[Tt]urned|[Jj]oined|[Qq]uit|[Bb]ought|[Ff]inished|[Aa]dopted|[Ss]witched|"
    r"[Cc]hanged|[Bb]ooked|[Ss]igned up|[Gg]raduated|[Rr]etired|[Bb]egan|[Bb]ecame|[Ss]old|[Vv]isited|[Tt]ook|[Hh]ad)"
    r" (?=\w)"
    # any other verb in the past, or "been", before a word in lower case, a number or a mark: "Boomeranged back to
    # Microsoft", "Finally upgraded, ..." — not a name ("Met Gala", "Left Bank", "United Airlines") nor the subject of
    # what follows ("Alfred and I", "Ted is my cousin");
    rf"|(?:[A-Za-z]{{3,}}ed|[Bb]een|{_PAST})"
    r"(?= (?!(?:and|or|is|was|are|were|has|had|will|would|says|said)\b)[a-z0-9$]|[,.!])"
    # or a negated auxiliary: "Haven't had a drink since May" (not "Don't forget ...": that bids the listener).
    r"|(?:[Hh]aven|[Hh]adn|[Dd]idn|[Cc]an|[Ww]on|[Ww]asn|[Cc]ouldn)['’]t(?= [a-z]))")


def informative(sentence: str) -> bool:
    s = sentence.strip()
    if pleasantry(s) or s.endswith("?"):  # a question asks; it rarely states something worth keeping
        return False
    if len(s.split()) >= _MIN_WORDS or _SHORT_FACT.match(s) is not None:
        return True
    # A fact chat says without its subject is as long as with it: "Moved to Denver.", "Just turned 28." (not "Been
    # there.": what it points back at is elsewhere).
    said = _with_subject(s).split()
    return len(said) > len(s.split()) and len(said) >= _MIN_WORDS and said[-1].strip(".!,;").lower() not in PRO_FORMS


# A short statement of what the speaker is, likes or does, which a longer one would only restate: "I'm vegan.",
# "I am 29.", "I'm from Oslo.", "My name is Ana.", "I love sushi.", "I speak French." — not a remark of the same
# length ("I'm so excited!", "I'm fine.", "I love it!", "I like you.", "I play along.", "I'm an idiot."). "i" as chat
# writes it too; and the same of someone named ("Alice likes tea.", "Mom is vegan."), not of a pronoun.
_STATE = (r"(?:vegetarian|vegan|pescatarian|allergic|lactose|gluten|diabetic|married|engaged|divorced|single|"
          r"widowed|pregnant|retired|unemployed|left-handed)\b")
_NOT_A_THING = (r"(?!(?:it|that|this|these|those|them|him|her|one|so|too|to|no|not|u|ya|yall|y'all|lol|up|along|all|"
                r"both|dumb|everything|everyone|everybody|anything|nothing|something|people|myself|you\w*|tonight|"
                r"today|tomorrow|later|again|late|early|well|hard|now|first|next|last)\b)\w{3,}")
_NAMED = r"(?!(?:He|She|It|They|We|You|This|That|There|Here|Everyone|Nobody|Someone|Who|What)\b)[A-Z][a-z]+"
# What "I'm a ..." says of the speaker's mood, not what they are: "I'm a mess.", "I'm a bit tired".
_REMARK = (r"(?:bit|little|lot|tad|mess|wreck|idiot|genius|fool|loser|dork|disaster|sucker|fan|pro|natural|"
           r"saint|monster|goner|lightweight|baby|kid|champ|legend|pushover|softie|sap)\b")
_I_AM = r"(?:[Ii]'m|[Ii] am|[Ii]’m|[Ii]m)"
_SHORT_FACT = re.compile(
    rf"^(?:(?:{_I_AM}|My (?:name|age|birthday|job) is) (?:a |an |now |still )?(?:\d+\b|[A-Z][a-z]|"
    rf"from [A-Z]|{_STATE})"
    rf"|{_I_AM} (?:now |still )?an? (?!{_REMARK})[a-z]{{3,}}(?: now)?[.!]*$"  # "I'm a nurse." — that alone
    rf"|{_I_AM} (?:now |still )?(?:dating|seeing|engaged to|married to) [A-Z]"
    rf"|[Ii] (?:love|like|hate|prefer|enjoy|speak|play|eat|drink|teach|study|collect|use|drive|own|ride) "
    rf"{_NOT_A_THING}"
    rf"|{_NAMED} is (?:a |an |now |still )?(?:from [A-Z]|{_STATE})"  # not "Dinner is 7.": a number of what?
    rf"|{_NAMED} (?:loves|likes|hates|prefers|enjoys|speaks|plays|eats|drinks|teaches|studies|collects) {_NOT_A_THING})")


def classify(text: str, has_time: bool) -> MemoryType:
    if _PROCEDURE.search(text):
        return MemoryType.PROCEDURE
    if _PREFERENCE.search(text):
        return MemoryType.PREFERENCE
    if _PLAN.search(text):
        return MemoryType.PLAN
    if has_time:
        return MemoryType.EVENT
    return MemoryType.FACT


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def _said_on(message: Message) -> str:
    return f"{message.created_at.day} {message.created_at:%B %Y}"


def edited_keywords(text: str, evidence: Sequence[Message], *, keywords_from_assistant: bool = False) -> str:
    """The hidden keywords of a memory whose text a person rewrote: who said it, the day it was said
    and the time the new text names. None of the words of the turns around it: the edit may have
    taken out just what they say. `evidence`: the memory's evidence messages, its own turn last."""
    if not evidence:
        return ""
    own = evidence[-1]
    resolved = timeexpr.resolve(text, own.created_at)
    speaker = speaker_of(own) if own.role != "assistant" or keywords_from_assistant else ""
    return " ".join(x for x in (speaker, _said_on(own), resolved.label() if resolved else "") if x)


def _questions(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip().endswith("?")]


def _context_words(texts: Sequence[str], text: str) -> str:
    """The distinct content words of neighbouring turns that `text` does not already hold, lower
    case: matchable, never shown. Words the text has are left out so they do not count twice, and
    the row stays short (BM25 normalises by the length of the whole row)."""
    own = {w.lower() for w in _WORD.findall(text)}
    words = dict.fromkeys(w.lower() for t in texts for w in _WORD.findall(t))
    return " ".join(w for w in words if w not in CONTEXT_STOP_WORDS and w not in own and len(w) > 1)


class RuleExtractor:
    """One candidate per informative turn (its informative sentences, in the third person).

    Conversation context makes a turn's memory findable and self-contained (each measured on
    LoCoMo, docs/benchmarks.md):

    - A reply to a question carries the question: when the turn before (by another speaker, any
      role) asks something, the memory ends with it — the whole turn, cited as evidence, when it
      is short (``reply_context_words``), else only its questions, uncited. "The Minnesota
      Wolves!" becomes 'John: The Minnesota Wolves! (replying to Tim: Congrats! Which team did
      you sign with?)'. A short reply (fewer than four words) to a question is kept, too, and a
      turn quoted whole by its reply gets no memory of its own.
    - The content words of the ``context_window`` turns on either side that the text lacks go
      into the memory's keywords (indexed for keyword search, never shown), so "what genre is
      Joanna's screenplay" finds "It's a mix of drama and romance!" said two turns after
      "screenplay". Only the speaker's own turns and the memory's evidence lend words — what is
      deleted with the memory's run — and the assistant's turns only when the store sets
      ``keywords_from_assistant``: a memory must not be found by what someone else said near it.
    """

    def __init__(self, *, context_window: int = 2, reply_context_words: int = 25) -> None:
        self.context_window = context_window
        self.reply_context_words = reply_context_words

    def extract(self, messages: Sequence[Message], *, context: Sequence[Message] = (), instructions: str = "",
                keywords_from_assistant: bool = False,
                roles: Collection[str] = DEFAULT_EXTRACT_ROLES) -> list[Candidate]:
        # The run's earlier turns come first: a new turn may reply to one of them, confirm it or take
        # words from it, as it would within one add; they are never extracted again (their add did it).
        timeline = [*context, *messages]
        kinds = {"document", *(r for r in ("user", "assistant") if r in roles)}
        confirmed = ExtractRole.ASSISTANT_CONFIRMED in roles
        out: list[Candidate] = []
        for i in range(len(context), len(timeline)):
            message = timeline[i]
            previous = timeline[i - 1] if i > 0 and message.role != "document" else None
            made: list[Candidate] = []
            if confirmed and message.role == "user" and previous is not None and previous.role == "assistant":
                made = self._confirmation(timeline, i, keywords_from_assistant)
                out += made
            if message.role in kinds:
                # A bare "Yes, right." that confirmed a statement (made above) says nothing more of its own.
                out += self._turn(timeline, i, keywords_from_assistant, in_context=i - 1 < len(context),
                                  kinds=kinds, answered=bool(made))
        # A turn quoted in full (and cited) by the reply to it needs no memory of its own: the same
        # statement twice would take two of a search's few places.
        quoted = {c.evidence[0] for c in out if len(c.evidence) > 1}
        return [c for c in out if len(c.evidence) > 1 or c.evidence[0] not in quoted]

    def _turn(self, timeline: Sequence[Message], i: int, keywords_from_assistant: bool, *, in_context: bool = False,
              kinds: Collection[str] = (), answered: bool = False) -> list[Candidate]:
        """The memory of turn i: its informative sentences, with the question it replies to. A question
        from the context whose turn had a memory of its own (made by its add) is quoted alone, uncited:
        quoted whole, the same statement would be in two memories."""
        message = timeline[i]
        speaker = speaker_of(message)
        previous = timeline[i - 1] if i > 0 and message.role != "document" else None
        asked = _questions(previous.content) if previous is not None and speaker_of(previous) != speaker else []
        parts = [s.strip() for s in _SENTENCE.split(message.content.strip()) if s.strip()]
        sentences = [s for s in parts if informative(s)]
        if not sentences and asked and not answered:
            # A short answer ("The Minnesota Wolves!", "Yes!") means something next to its question.
            sentences = [s for s in parts if not s.endswith("?") and (_ANSWER.match(s) or not pleasantry(s))]
        if not sentences:
            return []
        # A document (a plain-text add) has no speaker to put for "I": its words stay as written.
        before = {s: parts[k - 1] if k else "" for k, s in reversed(list(enumerate(parts)))}
        text = " ".join(s if message.role == "document" else third_person(s, speaker, before[s]) for s in sentences)
        if message.role not in ("document",) and not text.startswith(speaker):
            text = f"{speaker}: {text}"
        resolved = timeexpr.resolve(text, message.created_at)
        evidence = [message.message_id]
        if asked and previous is not None:
            asker = speaker_of(previous)
            remembered = in_context and previous.role in kinds and any(
                informative(p) for p in _SENTENCE.split(previous.content.strip()))
            if len(previous.content.split()) <= self.reply_context_words and not remembered:
                quote = third_person(previous.content.strip(), asker)
                evidence.insert(0, previous.message_id)
            else:
                quote = " ".join(asked)
            text = f"{text} (replying to {asker}: {quote})"
            # "Did you get the keys yesterday?" "Yes!": the answer's time is the question's.
            resolved = resolved or timeexpr.resolve(quote, previous.created_at)
        return [self._candidate(timeline, i, text, evidence, resolved, keywords_from_assistant)]

    def _confirmation(self, timeline: Sequence[Message], i: int, keywords_from_assistant: bool) -> list[Candidate]:
        """What the assistant stated just before, when turn i confirms it ("Yes, exactly."): the user's
        fact now, told about them. Not when the assistant's turn asks something: the "yes" answers that."""
        message, stated = timeline[i], timeline[i - 1]
        if not _CONFIRM.match(message.content.strip()):
            return []
        parts = [_TAG_QUESTION.sub(".", s.strip()) for s in _SENTENCE.split(stated.content.strip()) if s.strip()]
        if any(s.endswith("?") for s in parts):
            return []
        sentences = [_DISCOURSE.sub("", s) for s in parts if informative(s)]
        if not sentences:
            return []
        user, assistant = speaker_of(message), speaker_of(stated)
        text = f"{user} confirmed: " + " ".join(second_person(third_person(s, assistant), user) for s in sentences)
        resolved = timeexpr.resolve(text, stated.created_at)
        return [self._candidate(timeline, i, text, [stated.message_id, message.message_id], resolved,
                                keywords_from_assistant)]

    def _candidate(self, timeline: Sequence[Message], i: int, text: str, evidence: list[str],
                   resolved: timeexpr.ResolvedTime | None, keywords_from_assistant: bool) -> Candidate:
        message = timeline[i]
        speaker = speaker_of(message)
        w = self.context_window
        # Only words that go when the memory goes: its evidence and its speaker's own turns
        # (another person's words, or the assistant's unless the store asks, are not the speaker's).
        nearby = [m for m in timeline[max(0, i - w):i + w + 1] if m is not message and (
            m.message_id in evidence or speaker_of(m) == speaker
            or (m.role == "assistant" and keywords_from_assistant))]
        context = _context_words([m.content for m in nearby], text) if w > 0 else ""
        keywords = " ".join(x for x in (speaker, _said_on(message), resolved.label() if resolved else "",
                                        context) if x)
        return Candidate(
            text=text,
            memory_type=classify(text, resolved is not None),
            evidence=evidence,
            event_time=resolved.when if resolved else None,
            keywords=keywords,
            importance=round(min(1.0, 0.3 + len(text.split()) / 60), 3),
        )
