"""A dependency-free lexical embedder: the fallback when no embedding model is installed.

Word tokens and character trigrams are hashed into signed buckets (the "hashing trick"), so
texts that share words or word pieces get a high cosine. It knows nothing of meaning
("kitten" is not near "cat"); the composition root says so loudly when it picks it.

The hash is blake2b, not Python's `hash()`, which is salted per process: vectors written by
one process must match queries embedded by another.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from functools import lru_cache
from typing import Sequence

_WORD = re.compile(r"\w+")
_TRIGRAM_WEIGHT = 0.5  # words carry more signal than their pieces; trigrams catch inflections and typos
_EMPTY = "\x00empty"  # the feature of a text with no words: a fixed unit vector, never a zero one


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    # Low bits pick the bucket, the top bit the sign: signs make collisions cancel out on average.
    return value % dim, (1.0 if value >> 63 else -1.0)


def _features(text: str) -> dict[str, float]:
    words: Counter[str] = Counter()
    trigrams: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        words[word] += 1
        padded = f"#{word}#"  # boundary marks: a word's start and end are features of their own
        trigrams.update(padded[i:i + 3] for i in range(len(padded) - 2))
    # log damping: a word repeated ten times should not drown out the rest of the text.
    feats = {"w:" + w: 1.0 + math.log(n) for w, n in words.items()}
    feats.update({"c:" + t: _TRIGRAM_WEIGHT * (1.0 + math.log(n)) for t, n in trigrams.items()})
    return feats


class HashingEmbedder:
    name = "hashing-lexical"

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise ValueError("dim must be at least 2")
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed_one(t) for t in texts]

    def _embed_one(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for feat, weight in _features(text).items():
            bucket, sign = _bucket(feat, self.dim)
            vec[bucket] += sign * weight
        norm = math.sqrt(sum(v * v for v in vec))
        if norm < 1e-12:  # no words (or every feature cancelled out): a fixed unit vector, never zero
            bucket, sign = _bucket(_EMPTY, self.dim)
            vec = [0.0] * self.dim
            vec[bucket], norm = sign, 1.0
        return [v / norm for v in vec]
