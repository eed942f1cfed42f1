"""The embedded index's keyword half: BM25 over one tenant's own documents, held in memory.

A tenant's statistics are its own: how many documents it has, their average length, how many of them
hold a word. What another tenant writes changes no score of this one, so scores tell nothing about
other tenants' words (FTS5's bm25() counted them over the whole file: docs/security.md). The scoring is
FTS5's bm25() otherwise (k1 1.2, b 0.75, idf floored at 1e-6, text and keywords weighted alike, the
tenant token counted in each length) and the analysis its `porter unicode61` tokenizer's (domain/analysis.py):
on a file holding one tenant the scores are FTS5's (tests/unit/adapters/test_embedded_keyword.py).

Words are kept as hashes (Python's `hash`: salted per process, and this index lives in one process),
never as text. A tenant's index is built from its rows on first search, then follows the process's own
writes as segments (a new one per write, deletions marked dead, merged as they pile up); another
process's write drops it (`EmbeddedIndex._check_foreign_writes`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ...domain.analysis import document_tokens, query_tokens

K1, B = 1.2, 0.75
_MAX_SEGMENTS = 8
_KEPT_DF, _KEPT_SHARE = 512, 4  # weights kept: of terms held this often, for at most one posting in four
# What a search's filter checks of a row, read with its text: (memory_id, record_type, agent_id, run_id, status).
Facts = tuple[str, str, str, str, str]
_FACTS_BYTES = 200  # about what one row's facts hold in memory (its tuple, its id; the other values are shared)


def query_terms(text: str) -> list[int]:
    """The terms a keyword search looks for (analysis.query_tokens), as hashes."""
    return [hash(t) for t in query_tokens(text)]


def _document(text: str, keywords: str) -> tuple[list[int], int]:
    """A document's indexed terms and its length in tokens, +1 for the tenant token FTS5's rows held."""
    found, length = document_tokens(text, keywords)
    return list(map(hash, found)), length + 1


@dataclass
class Segment:
    """Postings of some of a tenant's rows, by term: rows[starts[t]:starts[t + 1]] hold terms[t]."""

    ids: np.ndarray  # int64 docs.id of each row, ascending
    lengths: np.ndarray  # float64 tokens of each row
    terms: np.ndarray  # int64 term hashes, ascending
    starts: np.ndarray  # int64, len(terms) + 1
    rows: np.ndarray  # int32 row of each posting
    freqs: np.ndarray  # float32 occurrences of the term in the row
    facts: np.ndarray  # object: the `Facts` of each row (empty if its reader read none)
    live: np.ndarray = field(init=False)  # False once the row is deleted
    dead: int = field(init=False, default=0)  # rows not live

    def __post_init__(self) -> None:
        self.live = np.ones(self.ids.size, dtype=bool)

    @classmethod
    def of(cls, docs: Iterable[Sequence[Any]]) -> Segment:
        """From (docs.id, text, keywords, *facts) rows in id order: `facts` are what a search's filter
        checks of a row (`Facts`), kept so that its candidates need not be read again."""
        ids, lengths, terms, rows, facts = [], [], [], [], []
        for row, (doc_id, text, keywords, *known) in enumerate(docs):
            found, length = _document(text, keywords or "")
            ids.append(doc_id)
            lengths.append(length)
            terms.extend(found)
            rows.extend([row] * len(found))
            facts.append(_facts(known))
        return cls.postings(np.array(ids, dtype=np.int64), np.array(lengths, dtype=np.float64),
                            np.array(terms, dtype=np.int64), np.array(rows, dtype=np.int32),
                            np.ones(len(terms), dtype=np.float32), _objects(facts))

    @classmethod
    def postings(cls, ids: np.ndarray, lengths: np.ndarray, terms: np.ndarray, rows: np.ndarray,
                 freqs: np.ndarray, facts: np.ndarray) -> Segment:
        """A segment from (term, row, freq) triples in any order, a (term, row) pair possibly repeated."""
        order = np.lexsort((rows, terms))
        terms, rows, freqs = terms[order], rows[order], freqs[order]
        first = np.ones(terms.size, dtype=bool)
        first[1:] = (terms[1:] != terms[:-1]) | (rows[1:] != rows[:-1])
        at = np.flatnonzero(first)
        freqs = np.add.reduceat(freqs, at) if at.size else freqs
        terms, rows = terms[at], rows[at]
        new_term = np.ones(terms.size, dtype=bool)
        new_term[1:] = terms[1:] != terms[:-1]
        starts = np.append(np.flatnonzero(new_term), terms.size).astype(np.int64)
        return cls(ids, lengths, terms[new_term], starts, rows, freqs.astype(np.float32), facts)

    @property
    def nbytes(self) -> int:
        arrays = (self.ids, self.lengths, self.terms, self.starts, self.rows, self.freqs, self.live)
        return sum(a.nbytes for a in arrays) + self.facts.size * _FACTS_BYTES

    def place(self, term: int) -> int:
        """Where `term` is in `terms`, or -1."""
        t = int(np.searchsorted(self.terms, term))
        return t if t < self.terms.size and self.terms[t] == term else -1

    def holding(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """The live rows holding the term at `t` (-1: none), and how often each holds it."""
        if t < 0:
            return _NO_ROWS, _NO_FREQS
        rows = self.rows[self.starts[t]:self.starts[t + 1]]
        freqs = self.freqs[self.starts[t]:self.starts[t + 1]]
        if not self.dead:
            return rows, freqs
        alive = self.live[rows]
        return rows[alive], freqs[alive]


_NO_ROWS = np.empty(0, dtype=np.int32)
_NO_FREQS = np.empty(0, dtype=np.float32)
_NO_IDS = np.empty(0, dtype=np.int64)
_NO_SCORES = np.empty(0, dtype=np.float64)


def _facts(known: Sequence[Any]) -> tuple[str, ...]:
    """A row's facts, the values many rows repeat (type, agent, run, status) held once."""
    return (known[0], *map(sys.intern, known[1:])) if known else ()


def _objects(items: list[Any]) -> np.ndarray:
    return np.fromiter(items, dtype=object, count=len(items))  # one object per item, tuples kept whole


class TermIndex:
    """One tenant's keyword index: its segments, its live document count and total length."""

    def __init__(self, docs: Iterable[Sequence[Any]]):
        self.segments: list[Segment] = []
        self.size, self.total_length = 0, 0.0
        # Common terms' weights (`_weighted`), kept until a write changes the statistics they were scored with.
        self._kept: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._kept_postings = 0
        self.add(docs)

    @property
    def nbytes(self) -> int:
        # The kept weights counted at their most (rows copied, 4 bytes, and weights, 8), so the size does not
        # drift from what the tenant cache was told.
        return sum(s.nbytes for s in self.segments) + self._postings() // _KEPT_SHARE * 12

    def _postings(self) -> int:
        return sum(s.rows.size for s in self.segments)

    def add(self, docs: Iterable[Sequence[Any]]) -> None:
        segment = Segment.of(docs)
        if segment.ids.size:
            self._forget_weights()
            self.segments.append(segment)
            self.size += segment.ids.size
            self.total_length += float(segment.lengths.sum())
            self._merge()

    def remove(self, ids: Sequence[int]) -> None:
        gone = np.unique(np.asarray(ids, dtype=np.int64))
        self._forget_weights()
        for s in self.segments:
            rows = np.searchsorted(s.ids, gone)
            inside = rows < s.ids.size
            rows = rows[inside][s.ids[rows[inside]] == gone[inside]]
            rows = rows[s.live[rows]]
            s.live[rows] = False
            s.dead += rows.size
            self.size -= rows.size
            self.total_length -= float(s.lengths[rows].sum())
        self._merge()

    def facts(self, ids: np.ndarray) -> list[tuple[int, Facts]] | None:
        """The live rows among `ids` with their facts, or None if they were not read: a search's check of its
        candidates, answered from memory (an id not here is not one of the tenant's rows)."""
        found: list[tuple[int, Facts]] = []
        for s in self.segments:
            if s.facts.size and not s.facts[0]:
                return None
            at = np.searchsorted(s.ids, ids)
            inside = at < s.ids.size
            at = at[inside][s.ids[at[inside]] == ids[inside]]
            at = at[s.live[at]]
            found += zip(s.ids[at].tolist(), s.facts[at].tolist())
        return found

    def scores(self, terms: Sequence[int], enough: int = 0) -> tuple[np.ndarray, np.ndarray, bool]:
        """(docs.id, BM25 score) of the live rows holding one of `terms`, in no order, and whether some were
        left out. With `enough`, only the best few times `enough` may be returned (more than `enough`, each
        outscoring every row left out): a search's top k is then chosen among a few hundred rows, not among
        every row that holds a speaker's name."""
        if not self.size or not terms:
            return _NO_IDS, _NO_SCORES, False
        average = self.total_length / self.size
        weighed = {t: self._weighted(t, average) for t in dict.fromkeys(terms)}
        ids, scores = [_NO_IDS], [_NO_SCORES]
        for n, s in enumerate(self.segments):
            part = [weighed[t][n] for t in terms if weighed[t][n][0].size]  # a term twice in the query counts twice
            if not part:
                continue
            rows = np.concatenate([r for r, _ in part])
            weights = np.concatenate([w for _, w in part])
            if rows.size * 16 < s.ids.size:  # few postings: summed per row they hold, not over every row
                hit, at = np.unique(rows, return_inverse=True)
                total = np.bincount(at, weights=weights, minlength=hit.size)
            else:
                total = np.bincount(rows, weights=weights, minlength=s.ids.size)
                hit = np.flatnonzero(total > 0)  # every weight is: an idf is floored above 0
                total = total[hit]
            ids.append(s.ids[hit])
            scores.append(total)
        found, scored = np.concatenate(ids), np.concatenate(scores)
        if enough <= 0 or scored.size <= 8 * enough:
            return found, scored, False
        # A cut a few times `enough` from the top, read from a sample: the rows at or above it are kept.
        sample = np.sort(scored[::max(1, scored.size // 2048)])[::-1]
        keep = scored >= sample[min(sample.size - 1, 4 * enough * sample.size // scored.size)]
        if not enough < np.count_nonzero(keep) < scored.size:
            return found, scored, False
        return found[keep], scored[keep], True

    def _weighted(self, term: int, average: float) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per segment, the live rows holding `term` and its part of their scores; kept for the common terms
        (where a query's cost is) while they hold at most one posting in `_KEPT_SHARE`."""
        kept = self._kept.get(term)
        if kept is not None:
            return kept
        held = [s.holding(s.place(term)) for s in self.segments]
        df = sum(rows.size for rows, _ in held)
        idf = max(math.log((self.size - df + 0.5) / (df + 0.5)), 1e-6) if df else 0.0
        weighed = []
        for s, (rows, freqs) in zip(self.segments, held):
            tf = freqs.astype(np.float64)  # kept as float32; scored in double, as FTS5
            weighed.append((rows, idf * (K1 + 1) * tf / (tf + K1 * (1 - B + B * s.lengths[rows] / average))))
        if df >= _KEPT_DF and self._kept_postings + df <= self._postings() // _KEPT_SHARE:
            self._kept[term] = weighed
            self._kept_postings += df
        return weighed

    def _forget_weights(self) -> None:
        self._kept.clear()
        self._kept_postings = 0

    def _merge(self) -> None:
        """Fewer segments: the newest are merged into one once there are too many, and all of them once the
        newer hold a quarter of the rows or a third of the rows are dead (each row merged O(log n) times)."""
        if len(self.segments) <= _MAX_SEGMENTS and self._dead() * 3 <= self._rows():
            return
        base = self.segments[0]
        newer = sum(s.ids.size for s in self.segments[1:])
        whole = newer * 4 >= base.ids.size or self._dead() * 3 > self._rows()
        first = 0 if whole else 1
        self.segments[first:] = [_merged(self.segments[first:])] if self.segments[first:] else []
        self.segments = [s for s in self.segments if s.ids.size]

    def _rows(self) -> int:
        return sum(s.ids.size for s in self.segments)

    def _dead(self) -> int:
        return self._rows() - self.size


def _merged(segments: list[Segment]) -> Segment:
    """One segment of the live rows of `segments` (in id order: each is newer than the one before)."""
    ids, lengths, terms, rows, freqs, facts = [], [], [], [], [], []
    offset = 0
    for s in segments:
        renumber = np.cumsum(s.live) - 1 + offset  # a live row's place among the merged rows
        per_posting = np.repeat(s.terms, np.diff(s.starts))
        alive = s.live[s.rows]
        ids.append(s.ids[s.live])
        lengths.append(s.lengths[s.live])
        terms.append(per_posting[alive])
        rows.append(renumber[s.rows[alive]].astype(np.int32))
        freqs.append(s.freqs[alive])
        facts.append(s.facts[s.live])
        offset += int(s.live.sum())
    return Segment.postings(*(np.concatenate(a) for a in (ids, lengths, terms, rows, freqs, facts)))
