"""How text becomes the terms keyword search counts, the same on every index: SQLite FTS5's
`porter unicode61` analysis (lower case, Latin diacritics removed, runs of letters and digits, Porter
stems), done here so each index can count a tenant's terms itself (adapters/local/index_terms.py,
adapters/opensearch/documents.py) instead of over everything it holds."""

from __future__ import annotations

import re
import unicodedata

from .language import LUCENE_STOP_WORDS, search_words
from .porter import stem

MAX_QUERY_WORDS = 64  # bounds one query's cost: longer queries keep their first 64 words and tokens
_TOKEN = re.compile(r"[^\W_]+")  # letters and digits, as OpenSearch's `[^\p{L}\p{N}]+` splits


def tokens(text: str) -> list[str]:
    """Every token of `text`, in order."""
    return list(map(stem, _words(text)))


def document_tokens(text: str, keywords: str) -> tuple[list[str], int]:
    """A document's tokens that a search can ask for (stop words never are), and how many tokens it has."""
    words = _words(f"{text} {keywords}")
    return [stem(w) for w in words if w not in LUCENE_STOP_WORDS], len(words)


def query_tokens(text: str) -> list[str]:
    """The tokens a keyword search looks for: each search word's (language.search_words: stop words and
    possessives out, each word once), the first 64. Two words of one stem count twice, as in FTS5's OR."""
    # Capped as tokens, not words: "w0_w1_..._w999" is one word of a thousand tokens.
    return [t for word in search_words(text, MAX_QUERY_WORDS) for t in tokens(word)][:MAX_QUERY_WORDS]


def _words(text: str) -> list[str]:
    text = text.lower()
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return _TOKEN.findall(text)
