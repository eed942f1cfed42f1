"""The default local reranker: query-term coverage with light stemming, plus phrase and proximity bonuses.

No model, no dependencies, deterministic. It reorders the fused candidates so that texts which
contain more of the query's words (rarer words counting more), in the query's order and close
together, come first. Scores are in [0, 1].
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Sequence

from ...domain.language import STOP_WORDS, drop_possessive

_WORD = re.compile(r"\w+")
_COVERAGE, _PHRASE, _PROXIMITY = 0.7, 0.2, 0.1  # weights of the three signals; they sum to 1


@lru_cache(maxsize=65536)  # a conversation reuses its words: most calls are cache hits
def stem(word: str) -> str:
    """A light suffix stripper: enough to match likes/liked/liking or study/studies, nothing more."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith(("ies", "ied")) and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ingly", "edly", "ing", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[:-len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":  # running -> run
                word = word[:-1]
            break
    if len(word) > 3 and word.endswith("e"):  # like/liked -> lik
        word = word[:-1]
    if len(word) > 3 and word.endswith("y"):  # happy/happily -> happi
        word = word[:-1] + "i"
    return word


@lru_cache(maxsize=8192)  # a tenant's searches meet the same memories again: each text is read once (≈ 3 MB)
def _terms(text: str) -> tuple[str, ...]:
    return tuple(map(stem, _WORD.findall(drop_possessive(text).lower())))


def _query_terms(query: str) -> list[str]:
    words = _WORD.findall(drop_possessive(query).lower())  # no bare "s" to match every "that's"
    content = [w for w in words if w not in STOP_WORDS]
    return [stem(w) for w in (content or words)]  # a query of stopwords only still means something


class HeuristicReranker:
    name = "heuristic"

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        q = list(dict.fromkeys(_query_terms(query)))  # distinct, in query order
        if not q or not texts:
            return [0.0] * len(texts)
        docs = [_terms(t) for t in texts]
        held = [set(d) for d in docs]
        # Rarer terms among the candidates tell them apart better: weight by a smoothed idf.
        df = {t: sum(t in h for h in held) for t in q}
        weight = {t: math.log(1.0 + (len(docs) + 1) / (df[t] + 0.5)) for t in q}
        total = sum(weight.values())
        pairs = list(zip(q, q[1:], strict=False))
        return [self._score(q, pairs, d, h, weight, total) for d, h in zip(docs, held)]

    @staticmethod
    def _score(q: list[str], pairs: list[tuple[str, str]], doc: tuple[str, ...], held: set[str],
               weight: dict[str, float], total: float) -> float:
        matched = [t for t in q if t in held]
        if not matched:
            return 0.0
        coverage = sum(weight[t] for t in matched) / total
        if len(matched) == 1:  # no query bigram can be in the text; one term is its own window
            phrase, proximity = (0.0 if pairs else 1.0), 1.0
        else:
            # Phrase: query bigrams that appear as adjacent words in the text, in order.
            bigrams = set(zip(doc, doc[1:], strict=False))
            phrase = sum(1 for p in pairs if p in bigrams) / len(pairs) if pairs else 1.0
            # Proximity: the matched terms fit in a short window (1.0 when adjacent).
            at: dict[str, list[int]] = {t: [] for t in matched}  # each matched term's positions, in one pass
            for i, w in enumerate(doc):
                if w in at:
                    at[w].append(i)
            window = _smallest_window(list(at.values()))
            proximity = len(matched) / window
        return _COVERAGE * coverage + _PHRASE * phrase * coverage + _PROXIMITY * proximity * coverage


def _smallest_window(lists: list[list[int]]) -> int:
    """Length of the shortest span of text positions holding at least one position from each list."""
    events = sorted((pos, k) for k, plist in enumerate(lists) for pos in plist)
    need, have, counts, best, left = len(lists), 0, [0] * len(lists), math.inf, 0
    for pos, k in events:
        counts[k] += 1
        have += counts[k] == 1
        while have == need:
            lpos, lk = events[left]
            best = min(best, pos - lpos + 1)
            counts[lk] -= 1
            have -= counts[lk] == 0
            left += 1
    return int(best)
