"""`memlane bench context`: the baselines' packing and the prompt recall of a card."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memlane.adapters.tokenizers.hf import HFTokenizer
from memlane.bench import context as bench
from tests.unit.bench.test_locomo import SAMPLE



def test_last_turns_keep_the_newest_that_fit_and_never_exceed_the_budget() -> None:
    tok = HFTokenizer()
    lines = [f"Speaker: turn number {i} says a few words." for i in range(50)]
    kept, tokens = bench.last_turns(lines, 40, tok)
    assert kept and kept == list(range(50 - len(kept), 50))
    assert tokens == tok.count("\n".join(lines[i] for i in kept)) <= 40
    assert bench.last_turns(lines, 0, tok) == ([], 0)


def test_top_k_keeps_the_leading_hits_that_fit() -> None:
    tok = HFTokenizer()
    hits = [("short one.", ("D1:1",)), ("a much longer memory text " * 20, ("D1:2",)), ("another short.", ("D1:3",))]
    covered, tokens, text = bench.top_k(hits, 30, tok)
    # greedy in rank order: the long one does not fit and stops the list (a prompt keeps its ranking)
    assert covered == {"D1:1"} and 0 < tokens <= 30 and text == "- short one."


def test_prompt_recall_is_the_share_of_evidence_turns_the_card_holds() -> None:
    turn_of = {"m1": "D1:1", "m2": "D1:2", "m3": "D2:5"}
    assert bench.recall(["m1", "m3", "unknown"], turn_of, ("D1:1", "D1:2")) == 0.5
    assert bench.recall([], turn_of, ("D1:1",)) == 0.0


def test_answer_words_are_the_gold_answers_content_words_the_prompt_holds() -> None:
    # LoCoMo's normalisation (case, punctuation, articles), stop words out: "her" is in every card
    words = bench.answer_words("Her mentors, family, and friends", 1)
    assert words == {"mentors", "family", "friends"}
    assert bench.answer_share(words, "- Caroline's family and friends are her rocks.") == 2 / 3
    # an open-domain answer gives alternatives after ';': the first is the answer, as LoCoMo's F1 takes it
    assert bench.answer_words("National park; she likes the outdoors", 3) == {"national", "park"}
    # a date answer keeps its numbers; nothing to look for gives no figure, not a free 1.0
    assert bench.answer_share(bench.answer_words("7 May 2023", 2), "(2023-05-07) ran a race") == 1 / 3
    assert bench.answer_words(None, 4) == frozenset() and bench.answer_share(frozenset(), "anything") is None


def test_the_report_names_budgets_methods_and_the_tokenizer(tmp_path: Path, minilm) -> None:
    data = tmp_path / "locomo.json"
    answered = json.loads(json.dumps(SAMPLE))
    answered[0]["qa"][0]["answer"], answered[0]["qa"][1]["answer"] = "a beagle named Max", "city hospital"
    data.write_text(json.dumps(answered))
    args = argparse.Namespace(data=data, limit_conversations=None, budgets="20,40", recent=4, json_out=None,
                              data_dir=str(tmp_path / "data"), embed_cache=None)
    report = bench.run(args)
    assert report["tokenizer"] == "hf:all-minilm-l6-v2" and report["budgets"] == [20, 40]
    for method in ("card", "last_turns", "search_top_k"):
        for budget in ("20", "40"):
            row = report["methods"][method][budget]["all"]
            assert 0.0 <= row["recall"] <= 1.0 and 0 <= row["tokens_mean"] <= int(budget)
            assert row["ratio_vs_full"] >= 0 and row["latency_ms"]["p95"] >= row["latency_ms"]["p50"] >= 0
            assert 0.0 <= row["answer_words"] <= 1.0
    # the question about Ann's dog is asked in session 2: search reaches session 1, the last turns do not
    assert report["methods"]["search_top_k"]["40"]["4"]["recall"] == 1.0
    assert report["methods"]["last_turns"]["40"]["4"]["recall"] == 0.0
    assert report["full_history_tokens_mean"] > 40
    assert "card" in bench.format_report(report) and "answer words" in bench.format_report(report)


def test_one_thread_per_conversation_puts_every_session_in_the_same_thread(tmp_path: Path, minilm) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(SAMPLE))
    args = argparse.Namespace(data=data, limit_conversations=None, budgets="400", recent=5, json_out=None,
                              data_dir=str(tmp_path / "data"), embed_cache=None, threads="conversation")
    report = bench.run(args)
    # two sessions, one thread (below the summary trigger: no summary yet)
    assert report["threads"] == {"per": "conversation", "threads": 1, "with_summary": 0}
    args.threads, args.data_dir = "session", str(tmp_path / "data2")
    assert bench.run(args)["threads"] == {"per": "session", "threads": 2, "with_summary": 0}


def test_card_recipes_are_measured_side_by_side_and_per_conversation(tmp_path: Path, minilm) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(SAMPLE))
    args = argparse.Namespace(data=data, limit_conversations=None, budgets="40", recent=4, json_out=None,
                              data_dir=str(tmp_path / "data"), embed_cache=None, recipes="default,no_floor")
    report = bench.run(args)
    assert {"card", "card:no_floor", "last_turns", "search_top_k"} <= set(report["methods"])
    row = report["methods"]["card:no_floor"]["40"]["all"]
    assert row["cpu_ms"]["p95"] >= row["cpu_ms"]["p50"] >= 0
    conv = next(iter(report["per_conversation"].values()))
    assert conv["card"]["40"]["questions"] == report["methods"]["card"]["40"]["all"]["questions"]
    assert "load average" in bench.format_report(report) and "card:no_floor" in bench.format_report(report)
