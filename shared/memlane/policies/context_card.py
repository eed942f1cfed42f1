"""The context card: what an agent needs at its next turn, packed under a token budget. Pure.

Sections hold entries (one line each: a profile attribute, a summary sentence, a memory, a plan, a
turn), each with a value. Packing is greedy by value per token across sections: the best entry at
the head of any section goes in while it fits. An entry too long for what is left is shortened to
the sentences that fit; one that cannot be is left out, and the response lists every section that
lost entries (`Cut`) — nothing disappears silently. A `contiguous` section (the recent turns) never
skips an entry to take a later one: a conversation with a hole in it reads wrong.

The text renders in one fixed order — agent profile, user profile, summary (what changes least),
then memories, plans, recent turns (what changes every turn) — so a provider's prompt cache keeps
the prefix, and the same entries always give the same bytes. The budget is checked against the
token count of that rendered text, headers and separators included: the per-entry costs are only
the packer's estimate (exact for WordPiece, where whitespace is free; not for every tokenizer).
"""

from __future__ import annotations

import functools
import re
from collections import deque
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..domain import language
from ..ports import Tokenizer

SECTIONS = ("agent_profile", "user_profile", "summary", "memories", "plans", "recent")
TITLES = {"agent_profile": "Agent profile", "user_profile": "User profile", "summary": "Conversation summary",
          "memories": "Relevant memories", "plans": "Open plans", "recent": "Recent messages"}
ELLIPSIS = " …"
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_WORD = re.compile(r"\w+")
_SPEAKER = re.compile(r"^([A-Z][\w'’\-]*(?: [A-Z][\w'’\-]*)?): ")
_REPLY = re.compile(r"\s*\(replying to [^)]*\)\s*$", re.S)


@dataclass(frozen=True)
class Entry:
    key: str  # stable id within its section (memory id, message id, attribute name)
    text: str  # one line of the card
    value: float  # worth to the next turn; higher goes in first
    position: int  # where it renders within its section (a thread's order, a profile's order)
    evidence: tuple[str, ...] = ()  # message ids it comes from
    # A label its section shows once above the entries that share it (memories under their date, instead
    # of the date in front of every line); "" = none. Groups render in the order of their labels.
    group: str = ""


@dataclass(frozen=True)
class Section:
    name: str  # one of SECTIONS
    entries: tuple[Entry, ...]
    contiguous: bool = False  # kept as a run in value order, never with a gap


@dataclass(frozen=True)
class Cut:
    """What a section lost to the budget: entries left out, entries shortened."""

    section: str
    dropped: int = 0
    truncated: int = 0


@dataclass(frozen=True)
class Card:
    text: str
    kept: dict[str, tuple[Entry, ...]]  # per section with entries, in render order (shortened texts)
    tokens: dict[str, int]  # per section: its header and lines, as the packer counted them
    total: int  # tokens of `text`: never more than the budget
    cut: tuple[Cut, ...]
    evidence: tuple[str, ...]  # message ids of every kept entry, in render order
    budget: int = 0
    tokenizer: str = ""


def pack(sections: Sequence[Section], budget: int, tokenizer: Tokenizer) -> Card:
    by_name = {s.name: s for s in sections if s.name in TITLES}
    costs = _costs(by_name.values(), tokenizer)
    header = _headers(tokenizer)
    labels = _labels(by_name.values(), tokenizer)
    queues = {n: deque(sorted(s.entries, key=_priority)) for n, s in by_name.items()}
    kept: dict[str, list[Entry]] = {}
    opened: set[tuple[str, str]] = set()  # (section, group) whose label is paid for
    dropped = dict.fromkeys(by_name, 0)
    truncated = dict.fromkeys(by_name, 0)
    left = budget
    while open_ := [n for n in SECTIONS if queues.get(n)]:
        name = max(open_, key=lambda n: (_ratio(n, queues[n][0], costs), -SECTIONS.index(n)))
        entry = queues[name].popleft()
        opening = (0 if name in kept else header[name]) + (
            labels[entry.group] if entry.group and (name, entry.group) not in opened else 0)
        if opening + costs[(name, entry.key)] <= left:
            kept.setdefault(name, []).append(entry)
            opened.add((name, entry.group))
            left -= opening + costs[(name, entry.key)]
            continue
        short = _shorten(entry, left - opening, tokenizer)
        if short is not None:
            text, cost = short
            kept.setdefault(name, []).append(Entry(entry.key, text, entry.value, entry.position, entry.evidence,
                                                   entry.group))
            opened.add((name, entry.group))
            costs[(name, entry.key)] = cost
            left -= opening + cost
            truncated[name] += 1
            continue
        dropped[name] += 1
        if by_name[name].contiguous:  # no later turn may jump the gap
            dropped[name] += len(queues[name])
            queues[name].clear()

    text, total = _render_within(kept, budget, costs, dropped, tokenizer)
    ordered = {n: tuple(sorted(kept[n], key=lambda e: (e.position, e.key))) for n in SECTIONS if kept.get(n)}
    # Per section from the entries' costs (one tokenizer pass less); `total` is the rendered text's count.
    tokens = {n: header[n] + sum(costs[(n, e.key)] for e in es) + sum(labels[g] for g in {e.group for e in es} if g)
              for n, es in ordered.items()}
    cut = tuple(Cut(n, dropped[n], truncated[n]) for n in SECTIONS
                if n in by_name and (dropped[n] or truncated[n]))
    evidence = tuple(dict.fromkeys(ev for es in ordered.values() for e in es for ev in e.evidence))
    return Card(text=text, kept=ordered, tokens=tokens, total=total, cut=cut, evidence=evidence, budget=budget,
                tokenizer=getattr(tokenizer, "name", ""))


def quotes_a_reply(text: str) -> bool:
    """Whether a memory's line ends with the "(replying to ...)" quote of the turn it answered."""
    return _REPLY.search(text) is not None


def compact(text: str, *, speaker: bool = True, replies: bool = True) -> str:
    """A memory's line with fewer tokens and the same facts: without its "Speaker: " prefix when the
    statement names the speaker again (the rule extractor writes "Melanie: Melanie ran a race"), and,
    unless `replies`, without the "(replying to ...)" quote of the turn it answered."""
    if not replies:
        text = _REPLY.sub("", text)
    m = _SPEAKER.match(text) if speaker else None
    if m and re.search(rf"\b{re.escape(m.group(1))}\b", text[m.end():]):
        text = text[m.end():]
    return text


def restates(text: str, shown: Sequence[str], share: float = 0.8) -> bool:
    """Whether `text` says again what one of `shown` says: most of its words are in it (a memory distilled
    from a turn the card already shows, in other words or not)."""
    return restated_in(shown, share)(text)


def restated_in(shown: Sequence[str], share: float = 0.8) -> Callable[[str], bool]:
    """`restates` against the same `shown` for many texts: their words are taken once, not once a text."""
    seen = [_words(s) for s in shown]

    def test(text: str) -> bool:
        words = _words(text)
        return bool(words) and any(len(words & s) >= share * len(words) for s in seen)

    return test


def distinct(texts: Sequence[str], shown: Sequence[str], share: float = 0.8, alike: int = 1) -> list[bool]:
    """For each of `texts` in order: whether it goes in — it does not restate one of `shown`, and fewer than
    `alike` earlier texts that went in say (near enough) the same. Small talk said every evening is one
    line of the card, not thirty; a fact said in two sessions keeps both (0: no limit)."""
    said = restated_in(shown, share)
    kept: list[frozenset[str]] = []
    out = []
    for text in texts:
        words = _words(text)
        new = not said(text) and not (alike and words and
                                      sum(len(words & k) >= share * len(words) for k in kept) >= alike)
        if new:
            kept.append(words)
        out.append(new)
    return out


def render(kept: Mapping[str, Sequence[Entry]]) -> str:
    """The card's text: sections in the fixed order, entries in their own order."""
    return "\n\n".join(_block(n, sorted(kept[n], key=lambda e: (e.position, e.key)))
                       for n in SECTIONS if kept.get(n))


def _render_within(kept: dict[str, list[Entry]], budget: int, costs: dict[tuple[str, str], int],
                   dropped: dict[str, int], tokenizer: Tokenizer) -> tuple[str, int]:
    """Render, count the real text, and while it is over the budget (a tokenizer whose counts do not add
    up line by line) leave out the entry worth least per token. Ends: the empty card has 0 tokens."""
    while True:
        text = render(kept)
        total = tokenizer.count(text) if text else 0
        if total <= budget:
            return text, total
        name, entry = min(((n, e) for n, es in kept.items() for e in es),
                          key=lambda ne: (_ratio(ne[0], ne[1], costs), -SECTIONS.index(ne[0]), ne[1].key))
        kept[name].remove(entry)  # in a contiguous section the least valued entry is the end of its run
        if not kept[name]:
            del kept[name]
        dropped[name] += 1


def _priority(entry: Entry) -> tuple[float, int, str]:
    return (-entry.value, entry.position, entry.key)


def _ratio(name: str, entry: Entry, costs: dict[tuple[str, str], int]) -> float:
    return entry.value / max(costs[(name, entry.key)], 1)


def _costs(sections: Sequence[Section] | object, tokenizer: Tokenizer) -> dict[tuple[str, str], int]:
    pairs = [(s.name, e) for s in sections for e in s.entries]  # type: ignore[attr-defined]
    counts = tokenizer.count_many([_line(e.text) for _, e in pairs]) if pairs else []
    return {(n, e.key): c for (n, e), c in zip(pairs, counts)}


def _labels(sections: Sequence[Section] | object, tokenizer: Tokenizer) -> dict[str, int]:
    groups = sorted({e.group for s in sections for e in s.entries if e.group})  # type: ignore[attr-defined]
    return dict(zip(groups, tokenizer.count_many([_label(g) for g in groups]))) if groups else {}


def _shorten(entry: Entry, room: int, tokenizer: Tokenizer) -> tuple[str, int] | None:
    """The entry's leading sentences that fit in `room` tokens (marked as shortened), or None."""
    sentences = _SENTENCE_END.split(entry.text.strip())
    # Every word is at least one token: only the prefixes of at most `room` words can fit, and they are not worth
    # a tokenizer call past that (a nearly spent budget tries every entry left).
    fits, words = 0, 1
    for sentence in sentences[:-1]:
        words += len(sentence.split())
        if words > room:
            break
        fits += 1
    # The longest prefix that fits, by halving (its cost grows with each sentence): a few tokenizer calls, not one
    # per sentence over ever longer prefixes (a trial: 13 s for a card of six 31,000-character turns).
    best, low, high = None, 1, fits
    while low <= high:
        middle = (low + high) // 2
        text = " ".join(sentences[:middle]) + ELLIPSIS
        cost = tokenizer.count(_line(text))
        if cost <= room:
            best, low = (text, cost), middle + 1
        else:
            high = middle - 1
    return best


@functools.lru_cache(maxsize=20_000)
def _words(text: str) -> frozenset[str]:
    # Cached: a thread's next card checks mostly the same memories against mostly the same turns.
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in language.STOP_WORDS)


_HEADERS: dict[str, dict[str, int]] = {}


def _headers(tokenizer: Tokenizer) -> dict[str, int]:
    """The headers' token counts, once per tokenizer (they never change)."""
    name = getattr(tokenizer, "name", "")
    if not name or name not in _HEADERS:
        counts = dict(zip(TITLES, tokenizer.count_many([_header(n) for n in TITLES])))
        if not name:
            return counts
        _HEADERS[name] = counts
    return _HEADERS[name]


def _header(name: str) -> str:
    return f"## {TITLES[name]}"


def _line(text: str) -> str:
    # One line per entry: a newline inside a message would read as a new entry of the card.
    return "- " + " ".join(text.split())


def _label(group: str) -> str:
    return f"{' '.join(group.split())}:"


def _block(name: str, entries: Sequence[Entry]) -> str:
    lines = [_header(name), *(_line(e.text) for e in entries if not e.group)]
    for group in sorted({e.group for e in entries if e.group}):
        lines += [_label(group), *(_line(e.text) for e in entries if e.group == group)]
    return "\n".join(lines)
