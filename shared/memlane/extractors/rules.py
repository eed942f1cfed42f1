"""The deterministic extractor: used when no LLM is configured. Honest and predictable —
one memory per informative turn, speaker-attributed, with relative dates resolved.

"I went to the support group yesterday" said by Caroline on 8 May 2023 becomes
"Caroline went to the support group yesterday" with event_time 2023-05-07 and the keywords
"Caroline 8 May 2023 7 May 2023", so both "what did Caroline do" and "when" find it.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..domain.language import CONTEXT_STOP_WORDS
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

    def extract(self, messages: Sequence[Message], *, instructions: str = "",
                keywords_from_assistant: bool = False) -> list[Candidate]:
        out: list[Candidate] = []
        for i, message in enumerate(messages):
            if message.role not in ("user", "document"):
                continue  # assistant turns restate and offer; memories are about the user and their world
            speaker = speaker_of(message)
            previous = messages[i - 1] if i > 0 and message.role != "document" else None
            asked = _questions(previous.content) if previous is not None and speaker_of(previous) != speaker else []
            parts = [s.strip() for s in _SENTENCE.split(message.content.strip()) if s.strip()]
            sentences = [s for s in parts if informative(s)]
            if not sentences and asked:
                # A short answer ("The Minnesota Wolves!") means something next to its question.
                sentences = [s for s in parts if not s.endswith("?") and not _PLEASANTRY.match(s)]
            if not sentences:
                continue
            text = " ".join(third_person(s, speaker) for s in sentences)
            if message.role not in ("document",) and not text.startswith(speaker):
                text = f"{speaker}: {text}"
            resolved = timeexpr.resolve(text, message.created_at)
            memory_type = classify(text, resolved is not None)
            evidence = [message.message_id]
            if asked and previous is not None:
                asker = speaker_of(previous)
                if len(previous.content.split()) <= self.reply_context_words:
                    text = f"{text} (replying to {asker}: {third_person(previous.content.strip(), asker)})"
                    evidence.insert(0, previous.message_id)
                else:
                    text = f"{text} (replying to {asker}: {' '.join(asked)})"
            w = self.context_window
            # Only words that go when the memory goes: its evidence and its speaker's own turns
            # (another person's words, or the assistant's unless the store asks, are not the speaker's).
            nearby = [m for m in messages[max(0, i - w):i + w + 1] if m is not message and (
                m.message_id in evidence or speaker_of(m) == speaker
                or (m.role == "assistant" and keywords_from_assistant))]
            context = _context_words([m.content for m in nearby], text) if w > 0 else ""
            keywords = " ".join(x for x in (speaker, _said_on(message), resolved.label() if resolved else "",
                                            context) if x)
            words = len(text.split())
            out.append(Candidate(
                text=text,
                memory_type=memory_type,
                evidence=evidence,
                event_time=resolved.when if resolved else None,
                keywords=keywords,
                importance=round(min(1.0, 0.3 + words / 60), 3),
            ))
        # A turn quoted in full (and cited) by the reply to it needs no memory of its own: the same
        # statement twice would take two of a search's few places.
        quoted = {c.evidence[0] for c in out if len(c.evidence) > 1}
        return [c for c in out if len(c.evidence) > 1 or c.evidence[0] not in quoted]
