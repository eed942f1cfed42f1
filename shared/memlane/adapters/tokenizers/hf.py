"""A `tokenizer.json` (Hugging Face `tokenizers` format) as the Tokenizer port.

The default file ships inside memlane (data/all-minilm-l6-v2.json: the local embedding model's BERT
WordPiece vocabulary, Apache-2.0), so counting needs no network and no model package — on a laptop and in
the Lambda layers alike. MEMLANE_TOKENIZER names another file to match the caller's model. `tiktoken` is
not used: it downloads its encodings on first use.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ...domain.errors import DependencyFailed

if TYPE_CHECKING:
    import tokenizers


class TokenizerUnavailable(DependencyFailed):
    """A typed failure the core can act on (thread summaries turn themselves off rather than fail an add)."""

    code = "tokenizer_unavailable"


DEFAULT = Path(__file__).parent / "data" / "all-minilm-l6-v2.json"


class HFTokenizer:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or DEFAULT
        self.name = "hf:all-minilm-l6-v2" if path is None else f"hf:{path}"
        self._tokenizer: tokenizers.Tokenizer | None = None
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encodings = self._load().encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]

    def _load(self) -> "tokenizers.Tokenizer":
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = self._build()
        return self._tokenizer

    def _build(self) -> "tokenizers.Tokenizer":
        try:
            import tokenizers
        except ImportError as exc:
            raise TokenizerUnavailable("token counting needs the `tokenizers` package (pip install 'memlane[local]')") from exc
        if not self.path.is_file():
            raise TokenizerUnavailable(f"no tokenizer.json at {self.path}: set MEMLANE_TOKENIZER to one")
        tok = tokenizers.Tokenizer.from_file(str(self.path))
        tok.no_truncation()  # count every token, not the model's 256/512 window
        tok.no_padding()
        return tok
