"""Search's last step: of two active memories that conflict anyway (written before write-time consolidation, or
beyond what it could tell), the newer ranks first (`newer_first`), read with the write-time rules
(`consolidation.relate`).

A search reads each pair of its first ten hits, and nearly every pair cannot conflict: another subject, a passage
or a remark rather than a fact, or no word and no cue in common. Telling so means reading both statements, clauses
and all — most of the time `newer_first` takes. So each memory is read once when it is written (`reading`), and what
the pairs need is kept with it (`Memory.reading`): its subject, whether it can be either side of a change, whether
it carries a change cue, and its words (32-bit hashes: a shared hash only sends the pair to the full reading).
`may_conflict` tells from two readings alone that a pair cannot conflict; any other pair is read word by word as
before, so the order a search gives is the same with readings or without. A pair that shares a word but carries no
change cue can still change only by a denial, an end, another state, a restatement or another value (`_may_change`),
so a reading also keeps what each of those needs first: the words of the statement and of each of its clauses
(`_Frame`), and whether the pair's full reading could take another way (a quotation, names to write as the older
writes them, a plan called off, an end, a negation, a state).

A kept reading is sealed with a digest of its text keyed by the rules that read it (the source of the modules
below): one made of another text — an edit that did not read it again — or by other rules — an upgrade — is not
trusted, and its memory is read at search time as if it had none.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import sys
import unicodedata
import zlib
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Iterable, NamedTuple

from ..domain.models import ExtractAction, Memory
from . import called_off, consolidation
from .consolidation import Evidence, observed
from .statement import Statement, read_once, statement

_RULE_SOURCES = ("domain/language.py", "policies/statement.py", "policies/still_holds.py",
                 "policies/consolidation.py", "policies/values.py", "policies/conflicts.py", "policies/called_off.py")


def _rules_key() -> bytes | None:
    """A digest of the code that reads statements — its source, and the Python and Unicode versions its case and word
    rules come from: another version of either makes every kept reading stale. None when the source cannot be read
    (an install without it): then no reading is kept or trusted."""
    runtime = f"reading/2 {sys.version_info[:2]} {unicodedata.unidata_version}".encode()
    root, digest = Path(__file__).resolve().parents[1], hashlib.blake2b(runtime, digest_size=32)
    try:
        for name in _RULE_SOURCES:
            digest.update((root / name).read_bytes())
    except OSError:
        return None
    return digest.digest()


_RULES = _rules_key()
_NEWER, _OLDER, _CUE = 1, 2, 4  # a reading's flags
# As the newer of a pair, read word by word whatever the older: `relate` may read another text (a quotation, a subject
# of two), or find a plan called off or an end said.
_READ_THROUGH = 8
_NAMES = 16  # as the older: it names something (a capital past its first word) `relate` may write the newer's words as
_NEGATED = 32  # a clause of it is negated: the pair may be a denial
_STATES = 64  # it says the one value of an attribute: the pair may be another state


def _hash(word: str) -> int:
    return zlib.crc32(word.encode()) or 1  # 0 is a reading's "no subject"; a shared hash only costs a full reading


def _short(word: str) -> int:
    return _hash(word) & 0xFFFF


def _seal(text: str) -> str | None:
    return None if _RULES is None else hashlib.blake2b(text.encode(), key=_RULES, digest_size=8).hexdigest()


class _Frame(NamedTuple):
    """What `_may_change` compares of a statement or of one of its clauses, as 16-bit hashes (`_short`) counted with
    their repeats (a collision adds to both sides, so it never lowers what two share): its tokens, its keys but its
    subject, its content stems. Short, so that a memory's row stays within a page of the table's file."""

    tokens: Counter[int]
    keys: frozenset[int]
    content: Counter[int]

    @classmethod
    def of(cls, s: Statement) -> _Frame:
        return cls(Counter(map(_short, s.tokens)), frozenset(map(_short, s.keys - {s.subject})),
                   Counter(map(_short, s.content)))

    def packed(self) -> str:
        return ",".join(_packed_list(hashes, "H") for hashes in (self.tokens.elements(), self.keys,
                                                                   self.content.elements()))

    @classmethod
    def unpacked(cls, packed: str) -> _Frame:
        tokens, keys, content = (_unpacked_list(part, "H") for part in packed.split(","))
        return cls(Counter(tokens), frozenset(keys), Counter(content))


class _Read:
    """What `may_conflict` reads of a statement, each part on first use (a memory with no kept reading)."""

    def __init__(self, said: Statement):
        self.said = said

    @read_once
    def subject(self) -> int:
        return _hash(self.said.subject) if self.said.subject else 0

    @read_once
    def flags(self) -> int:
        s = self.said
        fact = s.sentences <= 1 and not s.addressed and s.factual  # a single statement of fact, said of no one
        return ((_NEWER if fact and s.subject and len(s.words) <= consolidation.MAX_NEW_WORDS else 0)
                | (_OLDER if fact and len(s.words) <= consolidation.MAX_OLD_WORDS else 0)
                | (_CUE if s.reported_change or s.moves else 0))

    @read_once
    def paths(self) -> int:
        """The flags of the other ways a pair's full reading may take (`_may_change`), read only for such a pair."""
        s = self.said
        return ((_READ_THROUGH if any(mark in s.text for mark in consolidation.QUOTE_MARKS)
                 or consolidation.joint_subject(s, s.text) or called_off.cued(s.text)
                 or any(c.stops for c in s.clauses()) else 0)
                | (_NAMES if any(w[:1].isupper() for w in s._raw[1:]) else 0)
                | (_NEGATED if any(c.negated for c in s.clauses()) else 0)
                | (_STATES if s.states else 0))

    @read_once
    def frames(self) -> tuple[_Frame, ...]:
        """Its own `_Frame`, then its clauses' when it has several."""
        clauses = self.said.clauses()
        return tuple(map(_Frame.of, (self.said, *(clauses if len(clauses) > 1 else ()))))

    @read_once
    def reach(self) -> frozenset[int]:
        """As the newer of a pair: its content stems and tokens, and those of its clauses, but the subject's token
        (what `relate`'s `_share_words` compares), and the attributes it holds one value of."""
        if not self.flags & _NEWER:
            return frozenset()
        content, tokens = self.said.reach
        return frozenset(map(_hash, content | (tokens - {self.said.subject}))) | self._states

    @read_once
    def about(self) -> frozenset[int]:
        """As the older of a pair: what the newer's `reach` is compared with — its content stems and its tokens that
        show what it is about (`keys`), but the subject's, and its attributes."""
        if not self.flags & _OLDER:
            return frozenset()
        s = self.said
        return frozenset(map(_hash, s.content | (s.keys - {s.subject}))) | self._states

    @read_once
    def _states(self) -> frozenset[int]:
        return frozenset(_hash(f"\0{k}") for k in self.said.states)


class _Kept:
    __slots__ = ("subject", "flags", "reach", "about", "_frames")

    def __init__(self, subject: int, flags: int, about: frozenset[int], more: frozenset[int], frames: str):
        self.subject, self.flags, self.about, self.reach = subject, flags, about, about | more
        self._frames: str | tuple[_Frame, ...] | None = frames

    @property
    def paths(self) -> int:
        return self.flags  # kept with the others

    @property
    def frames(self) -> tuple[_Frame, ...] | None:
        """Unpacked when a pair first asks (most pairs part before): None if damaged, and its pairs are read in full."""
        if self._frames == "":  # not kept (`_FRAMED_WORDS`)
            self._frames = None
        if isinstance(self._frames, str):
            try:
                self._frames = tuple(map(_Frame.unpacked, self._frames.split(";")))
            except (ValueError, struct.error):
                self._frames = None
        return self._frames


def _packed(hashes: frozenset[int]) -> str:
    return base64.b64encode(struct.pack(f"<{len(hashes)}I", *sorted(hashes))).decode()


def _unpacked(packed: str) -> frozenset[int]:
    return frozenset(_unpacked_list(packed))


def _packed_list(hashes: Iterable[int], size: str = "I") -> str:
    ordered = sorted(hashes)
    return base64.b64encode(struct.pack(f"<{len(ordered)}{size}", *ordered)).decode()


def _unpacked_list(packed: str, size: str = "I") -> tuple[int, ...]:
    raw = base64.b64decode(packed, validate=True)
    return struct.unpack(f"<{len(raw) // struct.calcsize(size)}{size}", raw)


def reading(text: str) -> str:
    """The reading a memory of this text keeps (`Memory.reading`), made when it is written."""
    seal = _seal(text)
    if seal is None:
        return ""
    read = _Read(statement(text))
    words = f"{_packed(read.about)}:{_packed(read.reach - read.about)}"
    framed = len(read.said.words) <= _FRAMED_WORDS
    return f"{seal}:{read.flags | read.paths}:{read.subject:x}:{words}:" \
           f"{';'.join(f.packed() for f in read.frames) if framed else ''}"


# A longer statement keeps no frames: its pairs are read in full (as every pair was before frames), and its row stays
# small — a 30,000-character memory's reading was 27 KB, and its rows no longer fit a page of a query's answer.
_FRAMED_WORDS = 120


def read(memory: Memory) -> _Read | _Kept:
    """The memory's kept reading if it was made of its text by these rules, else its statement read now."""
    return _kept(memory) or _Read(statement(memory.text))


def stale(memory: Memory) -> bool:
    """The memory keeps no reading these rules made of its text (written before them, or by hand): each search reads
    it anew until `reading` is written again (services/readings.py)."""
    return _RULES is not None and _kept(memory) is None


def _kept(memory: Memory) -> _Kept | None:
    kept = memory.reading.split(":")
    if len(kept) == 6 and kept[0] == _seal(memory.text):
        try:
            return _Kept(int(kept[2], 16), int(kept[1]), _unpacked(kept[3]), _unpacked(kept[4]), kept[5])
        except (ValueError, struct.error):  # damaged where the seal does not reach (binascii.Error is a ValueError)
            pass
    return None


def may_conflict(newer: _Read | _Kept, older: _Read | _Kept) -> bool:
    """False when `relate` can find no change of `older` in `newer`: another subject or none; either not a
    single statement of fact of a length `relate` reads as one; no change cue in the newer, and no word or
    attribute in common. True: the pair must be read word by word."""
    return (newer.subject != 0 and newer.subject == older.subject and bool(newer.flags & _NEWER)
            and bool(older.flags & _OLDER) and (bool(newer.flags & _CUE) or not newer.reach.isdisjoint(older.about)
                                                and _may_change(newer, older)))


def _may_change(newer: _Read | _Kept, older: _Read | _Kept) -> bool:
    """False when `relate` can find no change (UPDATE, DELETE) of `older` in `newer`, two single statements of fact of
    one subject without a change cue in the newer: then only a denial, an end, another state, a restatement or another
    value can be one (`_read_change`; "another value" of the whole or of a clause), and each needs what is checked here
    first — unless the pair would be read as other texts, or as a plan called off (`_READ_THROUGH`, `_NAMES`)."""
    if newer.paths & _READ_THROUGH or older.paths & _NAMES or newer.paths & older.paths & _STATES:
        return True
    frames, olds = newer.frames, older.frames
    if not frames or not olds:
        return True
    new, old = frames[0], olds[0]
    if (newer.paths | older.paths) & _NEGATED and any(_may_deny(c, old) for c in frames[1:] or frames):
        return True  # `_retraction`: a clause of the newer with the other polarity of a clause of the older
    if new.keys <= old.tokens.keys() or old.keys <= new.tokens.keys():
        return True  # `_one_holds_the_other`: says nothing new, or restates it
    keys = old.keys | {older.subject & 0xFFFF}  # the older's own subject, as `_short` hashes it
    return any(not f.keys.isdisjoint(keys) and _shared(f.tokens, old.tokens) >= consolidation.FRAME_SHARE * min(
        f.tokens.total(), old.tokens.total()) for f in frames)  # `_may_align`: another value


def _may_deny(clause: _Frame, old: _Frame) -> bool:
    """`_retraction`'s coverage of a denial, on counts that are never below the stems' own."""
    shared = _shared(clause.content, old.content)
    own, cover = clause.content.total(), consolidation.RETRACT_COVERAGE
    return bool(shared) and (shared / max(old.content.total(), 1) >= cover or own >= 2 and shared / own >= cover)


def _shared(a: Counter[int], b: Counter[int]) -> int:
    return sum(min(n, b[h]) for h, n in a.items() if h in b)


def conflicts(newer: Memory, older: Memory, similarity: float = 0.0,
              readings: tuple[_Read | _Kept, _Read | _Kept] | None = None) -> bool:
    """Whether `newer` replaces or denies `older` (used to rank the newer first when both are active).
    Without a `similarity` only what the words themselves show (another value, a denial, a move) counts.
    `readings`: the two memories' (`read`), when the caller has them."""
    if not may_conflict(*(readings or (read(newer), read(older)))):
        return False
    old, new = statement(older.text), statement(newer.text)
    relation = consolidation.relate(new, old, similarity=similarity)
    if relation is None or relation.action not in (ExtractAction.UPDATE, ExtractAction.DELETE):
        return False
    # Two occasions: neither replaces the other — unless one denies the other.
    return relation.evidence == Evidence.DENIAL or not consolidation.another_occasion(
        older, old, new, newer.event_time, newer.observed_at)


def newer_first(memories: list[Memory], relevance: dict[str, float] | None = None,
                window: int = 10) -> list[Memory]:
    """`memories` (ranked) with each one that replaces or denies an earlier-ranked, older one moved
    just before it: when two active memories conflict anyway, the newer ranks first. Only the
    first `window` are compared (a pairwise reading; the head is what an agent reads).
    `relevance`: each memory's similarity to the query; two that both answer it closely are about
    one thing, so a change cue of the newer one counts as it does at write time."""
    head, tail = list(memories[:window]), list(memories[window:])
    relevance = relevance or {}
    said: dict[int, datetime | None] = {id(m): observed(m) for m in head}
    readings = {id(m): read(m) for m in head}
    # A move restarts the scan at the same place: each pair is read once, its answer kept.
    replaces: dict[tuple[int, int], bool] = {}
    i = 0
    while i < len(head):
        for j in range(i + 1, len(head)):
            a, b = head[i], head[j]
            pair = (id(b), id(a))
            if pair not in replaces:
                close = min(relevance.get(a.memory_id, 0.0), relevance.get(b.memory_id, 0.0))
                before, after = said[id(a)], said[id(b)]
                newer = before is not None and after is not None and after > before
                replaces[pair] = newer and conflicts(b, a, close, (readings[id(b)], readings[id(a)]))
            if replaces[pair]:
                head.insert(i, head.pop(j))
                break
        else:
            i += 1
    return head + tail
