"""The lexical hashing embedder: the fallback when no model is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.ports import Embedder

TEXTS = ["The cat sat on the mat", "Ünïcode wörds and 数字 123", ""]


def test_satisfies_the_port() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dim) == ("hashing-lexical", 384)
    assert len(HashingEmbedder(dim=64).embed(["x"])[0]) == 64


def test_every_vector_has_unit_length_even_without_words() -> None:
    vecs = np.array(HashingEmbedder().embed(["The cat sat on the mat", "", "!!! ???", "a " * 1000]))
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-9)


def test_same_vectors_in_another_process_with_another_hash_seed() -> None:
    # Vectors are stored by one process and compared with queries embedded by another.
    code = ("import json, sys\nfrom memlane.adapters.embedders.hashing import HashingEmbedder\n"
            "print(json.dumps(HashingEmbedder().embed(json.loads(sys.argv[1]))))")
    here = HashingEmbedder().embed(TEXTS)
    for seed in ("1", "12345"):
        out = subprocess.run([sys.executable, "-c", code, json.dumps(TEXTS)], check=True, capture_output=True,
                             text=True, env={**os.environ, "PYTHONHASHSEED": seed}, timeout=60)
        assert json.loads(out.stdout) == here


def test_shared_words_and_word_pieces_rank_above_unrelated_text() -> None:
    query, near, inflected, far = np.array(HashingEmbedder().embed([
        "The cat sat on the mat", "a cat on a mat", "the cats sitting on mats", "Quarterly revenue grew 5%"]))
    assert query @ near > query @ far + 0.3
    assert query @ inflected > query @ far + 0.2  # trigrams catch inflections
    assert abs(query @ far) < 0.2


def test_case_does_not_matter() -> None:
    upper, lower = HashingEmbedder().embed(["HELLO World", "hello world"])
    assert upper == lower
