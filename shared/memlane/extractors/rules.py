"""The deterministic extractor: used when no LLM is configured. Honest and predictable —
one memory per informative turn, speaker-attributed, with relative dates resolved.

"I went to the support group yesterday" said by Caroline on 8 May 2023 becomes
"Caroline went to the support group yesterday" with event_time 2023-05-07 and the keywords
"Caroline 8 May 2023 7 May 2023", so both "what did Caroline do" and "when" find it.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..domain.models import Candidate, MemoryType, Message
from ..policies import timeexpr

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'(A-Z0-9])")
_PLEASANTRY = re.compile(
    r"^(hi|hey|hello|thanks|thank you|bye|goodbye|good night|ok|okay|sure|cool|great|wow|lol|haha|yes|no|yeah|yep|"
    r"nice|awesome|sounds good|see you|take care|you too|me too|congrats|congratulations)\b[\s!.,a-z]*$",
    re.I,
)
_FIRST_PERSON = [
    (re.compile(r"\bI'm\b|\bI am\b", re.I), "{s} is"),
    (re.compile(r"\bI've\b|\bI have\b"), "{s} has"),
    (re.compile(r"\bI'll\b|\bI will\b"), "{s} will"),
    (re.compile(r"\bI'd\b"), "{s} would"),
    (re.compile(r"\bI was\b"), "{s} was"),
    (re.compile(r"\bmyself\b", re.I), "{s}"),
    (re.compile(r"\bmine\b", re.I), "{s}'s"),
    (re.compile(r"\bmy\b", re.I), "{s}'s"),
    (re.compile(r"\bme\b"), "{s}"),
    (re.compile(r"\bI\b"), "{s}"),
]
# "I work" → "Ann works": present-tense verbs that follow a first-person subject, with one optional adverb.
_PRESENT = re.compile(
    r"\b(?P<subject>{s})(?P<adverb> (?:really|also|usually|often|always|still|just|now|actually|mostly|sometimes))?"
    r" (?P<verb>work|live|love|like|prefer|enjoy|hate|want|need|think|feel|play|teach|study|own|know|plan|hope|"
    r"run|write|read|cook|eat|drink|use|take|make|get|go|do|try|believe|miss|wish|remember|volunteer|paint|"
    r"collect|support|dislike|practice|practise|attend|visit|speak|care|agree|see|mean|keep|find|look|spend)\b")


def _agree(sentence: str, speaker: str) -> str:
    def inflect(m: re.Match[str]) -> str:
        verb = m.group("verb")
        verb = {"go": "goes", "do": "does", "try": "tries", "miss": "misses", "wish": "wishes",
                "teach": "teaches"}.get(verb, verb + "s")
        return f"{m.group('subject')}{m.group('adverb') or ''} {verb}"

    return re.compile(_PRESENT.pattern.format(s=re.escape(speaker))).sub(inflect, sentence)


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


def third_person(sentence: str, speaker: str) -> str:
    for pattern, template in _FIRST_PERSON:
        sentence = pattern.sub(template.format(s=speaker), sentence)
    return _agree(sentence, speaker)


def informative(sentence: str) -> bool:
    s = sentence.strip()
    if len(s.split()) < _MIN_WORDS or _PLEASANTRY.match(s):
        return False
    return not s.endswith("?")  # a question asks; it rarely states something worth keeping


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


class RuleExtractor:
    """One candidate per informative turn (its informative sentences, in the third person)."""

    def extract(self, messages: Sequence[Message], *, instructions: str = "") -> list[Candidate]:
        out: list[Candidate] = []
        for message in messages:
            if message.role not in ("user", "document"):
                continue  # assistant turns restate and offer; memories are about the user and their world
            speaker = speaker_of(message)
            sentences = [s for s in _SENTENCE.split(message.content.strip()) if informative(s)]
            if not sentences:
                continue
            text = " ".join(third_person(s.strip(), speaker) for s in sentences)
            if message.role not in ("document",) and not text.startswith(speaker):
                text = f"{speaker}: {text}"
            resolved = timeexpr.resolve(text, message.created_at)
            said_on = f"{message.created_at.day} {message.created_at:%B %Y}"
            keywords = " ".join(x for x in (speaker, said_on, resolved.label() if resolved else "") if x)
            words = len(text.split())
            out.append(Candidate(
                text=text,
                memory_type=classify(text, resolved is not None),
                evidence=[message.message_id],
                event_time=resolved.when if resolved else None,
                keywords=keywords,
                importance=round(min(1.0, 0.3 + words / 60), 3),
            ))
        return out
