"""`memlane bench report`: the LoCoMo figure tables of docs/benchmarks.md come from the results JSON."""

import copy
import json

import pytest

from memlane.bench import report

INTERVAL = {"by_question": {"mean": 0.8, "low": 0.78, "high": 0.82},
            "by_conversation": {"mean": 0.8, "low": 0.7, "high": 0.9}}
RECALLS = ["recall@500hf", "recall@1000hf", "recall@2000hf", "recall@5turns", "recall@10turns", "recall@20turns",
           "recall@1", "recall@5", "recall@10", "recall@20", "recall@1000tok"]


def method(value, params):
    return {**{k: value for k in RECALLS}, "all_hit@10": value, "view": "held_out", "questions": 882,
            "in_sample": {**{k: value for k in RECALLS}, "all_hit@10": value},
            "intervals": {k: INTERVAL for k in RECALLS},
            "params": {"default": params, "in_sample": params,
                       "folds": [{"tuned_on": ["a"], "chosen": params, "scored_on": ["b"]},
                                 {"tuned_on": ["b"], "chosen": params, "scored_on": ["a"]}]},
            "latency_ms": {"p50": 11.0, "p95": 14.0, "mean": 12.0},
            "by_category": {"1": {"name": "multi-hop", "questions": 171, **{k: value for k in RECALLS}}}}


RESULT = {
    "dataset": "locomo-dev.json", "question_counts": {"headline": 882, "adversarial": 272}, "turns": 3435,
    "conversations": ["a", "b"], "embedder": "minilm", "tokenizer": "hf:all-minilm-l6-v2", "objective": "recall@1000hf",
    "seed": 13, "resamples": 1000, "elapsed_s": 100.0, "folds": [{"tune": ["a"], "score": ["b"]}],
    "methods": {"memlane": method(0.8, {"rrf_k": 10}), "bm25": method(0.6, {"k1": 1.2})},
    "paired": {"method": "memlane", "baseline": "bm25", "chosen_by": "recall@1000hf",
               "difference": {k: INTERVAL for k in RECALLS}},
    "machine": {"loadavg_1m_end": 2.0},
    "provenance": {"git": {"commit": "0123456789abcdef", "dirty": False}, "packages": {"numpy": "2.4.6"},
                   "python": "3.11.7", "seed": 13, "command": "memlane bench locomo --data x.json",
                   "machine": {"cores": 2, "blas": {"name": "scipy-openblas", "corename": "Haswell"}}},
}

DOC = """# Benchmarks

Hand-written text stays.

<!-- bench:locomo -->
old table
<!-- /bench:locomo -->

More hand-written text.
"""


@pytest.fixture()
def tree(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "locomo-dev.json").write_text(json.dumps(RESULT))
    (tmp_path / "benchmarks.md").write_text(DOC)
    return tmp_path


def test_the_generator_replaces_only_what_is_between_the_markers_and_is_deterministic(tree):
    first = report.regenerate(tree / "benchmarks.md", tree / "results")
    text = (tree / "benchmarks.md").read_text()
    assert first and "old table" not in text
    assert text.startswith("# Benchmarks\n\nHand-written text stays.\n\n<!-- bench:locomo -->\n")
    assert text.endswith("<!-- /bench:locomo -->\n\nMore hand-written text.\n")
    assert "0.800 (0.780–0.820)" in text and "memlane bench locomo --data x.json" in text and "0123456789ab" in text
    assert report.regenerate(tree / "benchmarks.md", tree / "results") is False  # a second run changes nothing
    assert (tree / "benchmarks.md").read_text() == text


def test_a_results_file_missing_a_field_fails_naming_the_field(tree):
    broken = copy.deepcopy(RESULT)
    del broken["provenance"]["git"]["commit"]
    (tree / "results" / "locomo-dev.json").write_text(json.dumps(broken))
    with pytest.raises(report.ResultsInvalid, match=r"locomo-dev\.json: missing provenance\.git\.commit"):
        report.regenerate(tree / "benchmarks.md", tree / "results")
    assert (tree / "benchmarks.md").read_text() == DOC  # nothing half-written


def test_a_doc_without_the_markers_is_refused(tree):
    (tree / "benchmarks.md").write_text("# Benchmarks\n")
    with pytest.raises(report.ResultsInvalid, match="bench:locomo"):
        report.regenerate(tree / "benchmarks.md", tree / "results")
