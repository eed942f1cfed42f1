"""The extractive thread summary: deterministic, no model, every sentence citing its message.

Selection. Each message is split into sentences. A sentence is a *statement* when it has at least
four words, is not a pleasantry ("thanks!", "sounds good") and is not a question. Its value is what
it carries: distinct content words, plus numbers and dates, names, and plan or decision cues, with a
mild penalty for length. The most valuable statements are kept until the token cap, then put back
in the order they were said. Each becomes "YYYY-MM-DD Speaker: sentence" — the date it was said is
kept beside any date it names — and cites its message id.

Open items are the statements with a plan or goal cue ("I will", "need to", "next week"), decisions
those with a decision cue ("decided", "let's go with", "booked"); the newest few of each are kept, within half
the cap (a sentence longer than MAX_STATEMENT_WORDS is cut there, so none fills the summary alone). An
open item is closed by a later statement saying its own verb was done — a past form of it by the speaker
("I booked", "we've gone ahead and booked"), opening a clause ("Just booked ...") or as a passive ("... is
booked"), in a clause naming everything the item names ("need to book the hotel near Alfama" / "I booked
the hotel near Alfama yesterday") — not negated, asked, wished, planned or made a condition: a card does
not offer as open what the thread says is done.

Merge (incremental refresh). The new summary is the previous one followed by the statements of the
new messages. Over the cap, the older half gives way first: its least valuable sentence is dropped,
then the next, until the whole fits; a newer statement is never dropped while an older one could
go. Nothing is rewritten, so every kept sentence still cites the messages it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from ..domain.models import Message, SummarySentence
from ..domain.language import FILLER, SENTENCE_BREAK, drop_possessive, irrealis, negated, pleasantry, stem

Count = Callable[[Sequence[str]], list[int]]  # a tokenizer's count_many

MAX_ITEMS = 5  # open items and decisions kept, newest first
ITEMS_SHARE = 0.5  # of the cap, at most, for the open items and decisions: the sentences keep the rest
MAX_STATEMENT_WORDS = 60  # a longer sentence (a voice transcript has no full stops) is cut there, marked " …"
_MIN_WORDS = 4
_SENTENCE = SENTENCE_BREAK
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_NUMBER = re.compile(r"\d+")
_RENDERED = re.compile(r"^\d{4}-\d{2}-\d{2} [^:]{1,128}: ")
_OPEN = re.compile(r"\b(will|going to|gonna|plan|plans|planning|need to|needs to|have to|has to|want to|wants to|"
                   r"hope to|intend|todo|to-do|remind|next (week|month|year)|tomorrow|deadline|still need)\b", re.I)
_DECIDED = re.compile(r"\b(decided|decide on|agreed|let's go with|we'll go with|chose|chosen|settled on|booked|"
                      r"confirmed|signed|picked|going with)\b", re.I)
# Not done (yet), whatever a clause of it says: "I'll tell you once I've booked", "I wish I had booked", "it is
# still open", "the hotel is fully booked" (no room left).
_NOT_YET = re.compile(r"['’]ll\b|\bwish(?:es|ed)?\b|\bstill (?:open|to do|pending)\b|\b(?:fully|completely) booked\b"
                      r"|\bbooked (?:up|solid|out)\b", re.I)
_PLANNING = re.compile(r"\b(will|going to|gonna|need to|needs to|have to|has to|want to|wants to|hope to|intend|"
                       r"plan to|plans to|planning to|still need)\b", re.I)
# Between a speaker's "I"/"we" (or a clause's start, or "is" of a passive) and the verb of what they did.
_ON_THE_WAY = frozenset("just finally already now also all ahead and gone went have had 've got ok okay done so then "
                        "really actually us".split())
# The speaker, or a present passive ("is booked"); not "was booked" (by whom, and is it still?).
_SUBJECTS = frozenset({"i", "we", "i've", "we've", "i’ve", "we’ve", "is", "are", "it's", "it’s"})
# A clause that reports a doing long past or in doubt: "last year", "whether I booked", "I thought I booked".
_NOT_NOW = re.compile(r"\b(?:last (?:year|time|month|summer|winter)|years? ago|whether|thought|forgot|turns? out)\b",
                      re.I)
# Past forms a suffix does not give: "paid" of "pay".
_IRREGULAR = {"paid": "pay", "bought": "buy", "sent": "send", "wrote": "write", "got": "get", "made": "make",
              "did": "do", "took": "take", "gave": "give", "found": "find", "sold": "sell", "told": "tell",
              "brought": "bring", "spent": "spend", "chose": "choose", "built": "build", "left": "leave",
              "met": "meet", "won": "win", "ran": "run", "kept": "keep", "set": "set", "put": "put", "read": "read"}
_CLAUSE = re.compile(r",|;|\s(?:and|but|so|because|once|when|after|before|while)\s", re.I)


@dataclass(frozen=True)
class Draft:
    """What a summary says: its sentences in time order, open items and decisions."""

    sentences: list[SummarySentence] = field(default_factory=list)
    open_items: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    cited: dict[str, list[str]] = field(default_factory=dict)  # an open item's or decision's messages

    def citing(self) -> dict[str, list[str]]:
        """`cited` of its open items and decisions only (what the cut left out is not kept)."""
        return {t: self.cited[t] for t in dict.fromkeys(self.open_items + self.decisions) if t in self.cited}


@dataclass(frozen=True)
class _Statement:
    text: str  # rendered: "date speaker: sentence"
    sentence: str
    message_id: str
    order: int
    value: float
    evidence: tuple[str, ...] = ()  # every message that said it (the statement is kept once)


def speaker(message: Message) -> str:
    if message.name:
        return message.name
    return {"user": "User", "assistant": "Assistant"}.get(message.role, message.role.capitalize())


def line(message: Message) -> str:
    """A message as a summary (and its trigger) counts it: who said it, when, and what."""
    return f"{message.created_at:%Y-%m-%d} {speaker(message)}: {message.content}"


def value(sentence: str) -> float:
    """How much a sentence carries (see the module docstring)."""
    words = _WORD.findall(sentence)
    content = {w.lower() for w in words if w.lower() not in FILLER}
    names = {w for w in words[1:] if w[0].isupper() and w.lower() not in FILLER}
    score = len(content) + 2.0 * min(len(_NUMBER.findall(sentence)), 3) + 1.5 * len(names)
    score += 2.0 if _OPEN.search(sentence) or _DECIDED.search(sentence) else 0.0
    return score / (1.0 + len(words) / 40.0)


def statement(sentence: str) -> bool:
    s = sentence.strip()
    return len(s.split()) >= _MIN_WORDS and not pleasantry(s) and not s.endswith("?")


def extract(messages: Sequence[Message], count: Count, cap: int) -> Draft:
    """The summary of `messages` alone, at most `cap` tokens."""
    found: list[_Statement] = []
    for message in messages:
        for sentence in _SENTENCE.split(message.content.strip()):
            words = sentence.split()
            sentence = " ".join(words[:MAX_STATEMENT_WORDS]) + (" …" if len(words) > MAX_STATEMENT_WORDS else "")
            if statement(sentence):
                found.append(_Statement(f"{message.created_at:%Y-%m-%d} {speaker(message)}: {sentence}", sentence,
                                        message.message_id, len(found), value(sentence)))
    found = _said_once(found)
    open_items = [s.text for k, s in enumerate(found) if _OPEN.search(s.sentence)
                  and not _done(s.sentence, [later.sentence for later in found[k + 1:]])][-MAX_ITEMS:]
    decisions = [s.text for s in found if _DECIDED.search(s.sentence)][-MAX_ITEMS:]
    open_items, decisions, used_by_items = _items_within(open_items, decisions, count, cap)
    budget = cap - used_by_items
    sizes = count([s.text for s in found]) if found else []
    kept, used = [], 0
    # Most valuable first (ties: the earlier), while they fit; then back in the order they were said.
    for i in sorted(range(len(found)), key=lambda i: (-found[i].value, found[i].order)):
        if used + sizes[i] <= budget:
            kept.append(found[i])
            used += sizes[i]
    kept.sort(key=lambda s: s.order)
    cited = {s.text: list(s.evidence) for s in found}
    draft = Draft([SummarySentence(text=s.text, evidence=list(s.evidence)) for s in kept], open_items, decisions, cited)
    return replace(draft, cited=draft.citing())


def _said_once(found: list[_Statement]) -> list[_Statement]:
    """A statement said again by the same speaker is kept once, where it was said last, citing every time."""
    last: dict[str, _Statement] = {}
    for s in found:
        before = last.pop(_key(s.text), None)
        cited = (*before.evidence, s.message_id) if before else (s.message_id,)
        last[_key(s.text)] = replace(s, evidence=tuple(dict.fromkeys(cited)))
    return sorted(last.values(), key=lambda s: s.order)


def _key(rendered: str) -> str:
    """Who said a rendered statement ("YYYY-MM-DD Speaker: ...") and what, without its date, case or punctuation."""
    found = _RENDERED.match(rendered)
    speaker = rendered[len("YYYY-MM-DD "):found.end() - len(": ")] if found else ""
    return f"{speaker}|{' '.join(_WORD.findall(_said(rendered).lower()))}"


def _once(texts: list[str]) -> list[str]:
    """Rendered statements, each said once: where it was said last."""
    last = {_key(t): i for i, t in enumerate(texts)}
    return [t for i, t in enumerate(texts) if last[_key(t)] == i]


def merge(previous: Draft, new: Draft, count: Count, cap: int) -> Draft:
    """`previous` followed by `new`, cut to `cap` tokens: the older half's least valuable sentences go first.
    A statement the new part says again is kept once, where it was said last, citing every time."""
    said_since = [_said(t) for t in [*(s.text for s in new.sentences), *new.decisions]]
    still_open = [t for t in previous.open_items if not _done(_said(t), said_since)]
    open_items = _once(still_open + new.open_items)[-MAX_ITEMS:]
    decisions = _once(previous.decisions + new.decisions)[-MAX_ITEMS:]
    cited = {**previous.cited}
    for text, evidence in new.cited.items():  # said again: every time cites
        earlier = [e for t, es in previous.cited.items() if _key(t) == _key(text) for e in es]
        cited[text] = list(dict.fromkeys([*earlier, *evidence]))
    again = {_key(s.text) for s in new.sentences}
    sentences: list[SummarySentence] = []
    earlier_said: dict[str, list[str]] = {}
    for s in previous.sentences:
        if _key(s.text) in again:
            earlier_said.setdefault(_key(s.text), []).extend(s.evidence)
        else:
            sentences.append(s)
    sentences += [SummarySentence(text=s.text,
                                  evidence=list(dict.fromkeys([*earlier_said.get(_key(s.text), []), *s.evidence])))
                  for s in new.sentences]
    open_items, decisions, used_by_items = _items_within(open_items, decisions, count, cap)
    budget = cap - used_by_items
    sizes = count([s.text for s in sentences]) if sentences else []
    total = sum(sizes)
    while sentences and total > budget:
        older = range((len(sentences) + 1) // 2)
        drop = min(older, key=lambda i: (value(_said(sentences[i].text)), i))
        total -= sizes[drop]
        del sentences[drop], sizes[drop]
    draft = Draft(sentences, open_items, decisions, cited)
    return replace(draft, cited=draft.citing())


def _items_within(open_items: list[str], decisions: list[str], count: Count,
                  cap: int) -> tuple[list[str], list[str], int]:
    """The open items and decisions within ITEMS_SHARE of the cap, the oldest of the longer list out first, and
    the tokens they take: whole statements, they would otherwise leave the sentences no room or pass the cap."""
    sizes = dict(zip(open_items + decisions, count(open_items + decisions))) if open_items or decisions else {}
    open_items, decisions = list(open_items), list(decisions)
    while (used := sum(sizes[t] for t in open_items + decisions)) > cap * ITEMS_SHARE:
        del (open_items if len(open_items) >= len(decisions) else decisions)[0]
    return open_items, decisions, used


def _done(item: str, later: Sequence[str]) -> bool:
    """Whether a later sentence reports the open item `item` done: one of its clauses, not negated nor a plan,
    says the item's own verb was done (`_did`) and names every content word the item names (two at least:
    "finished it" closes nothing); the sentence neither a question, a wish, a condition, a plan of its own
    ("I'll tell you once I've booked ..."), nor a doing long past or in doubt ("last year", "whether")."""
    named = _content_stems(item)
    return len(named) >= 2 and any(
        not s.rstrip().endswith("?") and not irrealis(s) and not _NOT_YET.search(s) and not _NOT_NOW.search(s)
        and any(named <= _content_stems(clause) | _done_in(clause) and not _PLANNING.search(clause)
                and not negated([w.lower() for w in _WORD.findall(clause)], clause) and _did(clause, named)
                for clause in _CLAUSE.split(s)) for s in later)


def _did(clause: str, named: set[str]) -> bool:
    """The clause says the item's own verb was done, by the speaker or as a passive: a past form of one of the
    item's words ("booked" of "book") opening the clause, or after I/we or "is" ("Just booked ...", "we've
    gone ahead and booked ...", "the hotel is booked") — not another's doing ("Mark booked ...") nor another
    verb ("sent a reminder to book ...")."""
    words = [w.lower() for w in _WORD.findall(clause)]
    for i, w in enumerate(words):
        if _done_stems(w) & named:
            before = [b for b in words[:i] if b not in _ON_THE_WAY]
            if not before or before[-1] in _SUBJECTS:
                return True
    return False


def _done_stems(word: str) -> set[str]:
    """The stems of the verb a past form may be of ("booked" → book, "cancelled" → cancel or cancell, "paid" →
    pay); none for a word that is no past form ("bed", "need")."""
    if word in _IRREGULAR:
        return {stem(_IRREGULAR[word])}
    if not word.endswith("ed") or stem(word) == word:
        return set()
    return {stem(word), *([stem(word[:-3])] if len(word) > 5 and word[-3] == word[-4] else [])}


def _done_in(clause: str) -> set[str]:
    return {d for w in _WORD.findall(clause) for d in _done_stems(w.lower())}


def _content_stems(sentence: str) -> set[str]:
    # The plan's own cue words ("need to", "will", "next week") are not what it is about.
    return {stem(w.lower()) for w in _WORD.findall(_OPEN.sub(" ", drop_possessive(sentence))) if w.lower() not in FILLER}


def says_item(text: str, item: str) -> bool:
    """Whether `text` (a plan memory) names two thirds of what the rendered open item `item` names: the same plan."""
    named = _content_stems(_said(item))
    return bool(named) and 3 * len(named & _content_stems(text)) >= 2 * len(named)


def _said(text: str) -> str:
    """A rendered statement without its "date speaker:" prefix (whose digits are no content)."""
    found = _RENDERED.match(text)
    return text[found.end():] if found else text


def tokens(draft: Draft, count: Count) -> int:
    parts = [s.text for s in draft.sentences] + draft.open_items + draft.decisions
    return sum(count(parts)) if parts else 0
