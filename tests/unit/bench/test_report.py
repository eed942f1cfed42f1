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


# -- the real doc and results: the LoCoMo section is generated, not hand-edited --------------------------
REPO = __import__("pathlib").Path(__file__).resolve().parents[3]
DEVELOPMENT_LOG = "### What each idea gained or lost"  # harness runs kept as a log: no results file behind them


def _locomo_section() -> str:
    doc = (REPO / "docs" / "benchmarks.md").read_text()
    return doc[doc.index("## 1. LoCoMo"):doc.index("\n## 2. ")]


def test_the_doc_is_what_the_results_give():
    assert report.regenerate(REPO / "docs" / "benchmarks.md", REPO / "bench" / "results", check=True) is False, \
        "docs/benchmarks.md is stale: run memlane bench report"


def test_every_figure_table_of_the_locomo_section_sits_between_markers():
    import re

    section = _locomo_section()
    section = section[:section.index(DEVELOPMENT_LOG)] if DEVELOPMENT_LOG in section else section
    outside = re.sub(r"<!-- bench:([\w-]+) -->\n.*?<!-- /bench:\1 -->", "", section, flags=re.S)
    # a figure table holds measured values (0.801); a table describing the methods does not
    figures = [line for line in outside.splitlines() if line.startswith("|") and re.search(r"\b\d\.\d{3}\b", line)]
    assert figures == [], "hand-edited figure tables in docs/benchmarks.md section 1"


def test_a_results_file_from_before_provenance_renders_its_recall_at_k_tables():
    legacy = {"dataset": "locomo-dev.json", "questions": 1154, "turns": 3435, "elapsed_s": 101.3,
              "question_counts": {"headline": 882, "adversarial": 272}, "machine": {"loadavg_1m_end": 2.19},
              "memlane": {"memories": 2772, "failed_tasks": 0},
              "methods": {n: {"recall@1": v, "recall@5": v, "recall@10": v, "recall@20": v, "all_hit@10": v,
                              "recall@1000tok": v, "latency_ms": {"p50": 11.07, "p95": 14.04},
                              "by_category": {"1": {"name": "multi-hop", "questions": 171, "recall@10": v,
                                                    "all_hit@10": v, "recall@1000tok": v}}}
                          for n, v in (("memlane", 0.8014), ("bm25", 0.6112))}}
    text = report.render_legacy(legacy, "locomo-dev-before13.json")
    [row] = [line for line in text.splitlines() if line.startswith("| **memlane**")]
    assert [c.strip() for c in row.split("|")[2:5]] == ["0.801", "0.801", "0.801"]
    assert "0.611" in text and "11.1" in text and "2,772" in text and "1 multi-hop (171)" in text
    assert "no command" in text  # it says it cannot be rerun from its own record


def _with_questions(result, held):
    out = copy.deepcopy(result)
    out["per_question"] = {"conversation": ["a", "a", "b", "b"], "category": [1, 4, 2, 4],
                           "held_out": {n: {k: list(v) for k in RECALLS} for n, v in held.items()}}
    return out


def test_memlane_is_paired_with_a_peer_run_apart_on_the_same_questions(tree):
    # the peer ran alone (its own run, its own JSON): memlane − peer is paired question by question
    main_run = _with_questions(RESULT, {"memlane": [1.0, 1.0, 0.5, 1.0], "bm25": [0.0, 1.0, 0.5, 0.0]})
    peer = _with_questions({**RESULT, "methods": {"mem0": method(0.5, {"threshold": 0.0})}, "paired": {}},
                           {"mem0": [0.0, 1.0, 0.5, 0.5]})
    (tree / "results" / "locomo-dev.json").write_text(json.dumps(main_run))
    (tree / "results" / "locomo-dev-mem0.json").write_text(json.dumps(peer))
    (tree / "benchmarks.md").write_text("<!-- bench:locomo-vs-mem0 -->\n<!-- /bench:locomo-vs-mem0 -->\n")
    report.regenerate(tree / "benchmarks.md", tree / "results")
    text = (tree / "benchmarks.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith("| recall@1000hf")]
    assert row.split("|")[2].strip() == "+0.375"  # mean of 1, 0, 0, 0.5
    other = copy.deepcopy(peer)
    other["per_question"]["conversation"] = ["a", "b", "b", "b"]
    (tree / "results" / "locomo-dev-mem0.json").write_text(json.dumps(other))
    with pytest.raises(report.ResultsInvalid, match="not the same questions"):
        report.regenerate(tree / "benchmarks.md", tree / "results")


def test_a_peer_with_nothing_to_tune_run_on_more_conversations_is_paired_on_ours():
    # memlane ran on conversation a only; the peer (one grid point: its figures do not depend on which
    # conversations chose its parameters) ran on a and b: the pair is memlane's questions of a
    ours = _with_questions(RESULT, {"memlane": [1.0, 1.0, 0.5, 1.0]})
    ours["per_question"] = {"conversation": ["a", "a"], "category": [1, 4],
                            "held_out": {"memlane": {k: [1.0, 1.0] for k in RECALLS}}}
    one_point = method(0.5, {"threshold": 0.0})
    one_point["params"]["grid"] = [{"params": {"threshold": 0.0}, "objective_in_sample": 0.5}]
    peer = _with_questions({**RESULT, "methods": {"mem0": one_point}, "paired": {}}, {"mem0": [0.0, 0.5, 1.0, 1.0]})
    text = report.render_peer_pair(ours, "ours.json", peer, "peer.json")
    [row] = [line for line in text.splitlines() if line.startswith("| recall@1000hf")]
    assert row.split("|")[2].strip() == "+0.750" and "the same 2 questions" in text
    tunable = copy.deepcopy(peer)
    tunable["methods"]["mem0"]["params"]["grid"].append({"params": {"threshold": 0.5}, "objective_in_sample": 0.4})
    with pytest.raises(report.ResultsInvalid, match="not the same questions"):
        report.render_peer_pair(ours, "ours.json", tunable, "peer.json")
