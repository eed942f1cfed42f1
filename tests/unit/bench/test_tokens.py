"""`memlane bench tokens`: the live thread's script, the per-turn metrics, the plot's refresh marks, and a
short live run end to end (hashing embedder, a low summary trigger so a refresh happens in a few turns)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from memlane.bench import conversation, live_thread, plot, tokens

WINDOW = 6


# -- the script -------------------------------------------------------------------------------------


def test_the_live_script_is_deterministic_per_seed_and_another_seed_tells_it_differently() -> None:
    a, b = live_thread.generate(seed=7, exchanges=151), live_thread.generate(seed=7, exchanges=151)
    assert a == b
    other = live_thread.generate(seed=8, exchanges=151)
    assert other.turns != a.turns
    # the same story: the same facts are stated, changed and needed, in another order and with other small talk
    assert {text for _, text in other.turns} & {text for _, text in a.turns}


def test_a_300_turn_thread_alternates_speakers_never_repeats_a_message_and_is_dated_in_order() -> None:
    script = live_thread.generate(seed=7, exchanges=151)
    assert len(script.turns) == len(script.times) == 302
    assert [role for role, _ in script.turns] == ["user", "assistant"] * 151
    users = [text for role, text in script.turns if role == "user"]
    assert len(set(users)) == len(users), "a realistic thread does not say the same thing twice, word for word"
    assert script.times == sorted(script.times)
    assert script.turns[0][1].startswith("Hi! I'm Noor")


def test_a_shorter_thread_is_a_prefix_of_the_longer_one() -> None:
    long, short = live_thread.generate(seed=7, exchanges=151), live_thread.generate(seed=7, exchanges=41)
    assert short.turns == long.turns[:82] and short.times == long.times[:82]
    assert short.needs == {t: n for t, n in long.needs.items() if t < 82}


def test_needs_point_at_the_latest_statement_of_each_fact_beyond_the_recent_window() -> None:
    script = live_thread.generate(seed=7, exchanges=151)
    assert len(script.needs) >= 20 and max(script.needs) >= 250, "facts stated early are needed late"
    for t, needed in script.needs.items():
        assert script.turns[t][0] == "user" and needed
        for n in needed:
            assert script.turns[n][0] == "user" and t - n > WINDOW, (t, n)
    # a changed fact: the turn that needs it cites the new statement; the old one is listed as stale
    assert script.stale, "some facts change during the thread"
    for t, old in script.stale.items():
        assert old and max(old) < max(script.needs[t]) and not set(old) & set(script.needs[t])


def test_the_80_turn_script_is_still_there() -> None:
    script = conversation.script()
    assert len(script.turns) == 80 and script.needs == conversation.NEEDS and script.stale == {}
    assert len(script.times) == 80 and script.user == conversation.USER


# -- the metrics ------------------------------------------------------------------------------------


def test_flat_and_window_prompts_count_the_history_the_system_prompt_and_the_new_message() -> None:
    counts = [10, 20, 30, 40, 50]
    assert tokens.flat_tokens(counts, 4, fixed=7) == 7 + 100
    assert tokens.window_tokens(counts, 4, recent=2, fixed=7) == 7 + 70
    assert tokens.window_tokens(counts, 1, recent=6, fixed=7) == 7 + 10
    assert tokens.flat_tokens(counts, 0, fixed=7) == tokens.window_tokens(counts, 0, recent=6, fixed=7) == 7


def test_card_recall_is_the_share_of_needed_turns_the_card_cites() -> None:
    turn_of = {"m0": 0, "m2": 2, "m9": 9}
    held = tokens.held_turns(["m2", "m9", "not-a-turn"], turn_of)
    assert held == {2, 9}
    assert tokens.recall(held, [2, 4]) == 0.5 and tokens.recall(held, [9]) == 1.0 and tokens.recall(set(), [9]) == 0.0
    # stale only: the card shows where a changed fact used to be and not where it is now
    assert tokens.stale_only({2}, needs=[9], stale=[2]) and not tokens.stale_only({2, 9}, needs=[9], stale=[2])
    assert not tokens.stale_only(set(), needs=[9], stale=[2])


def test_summary_coverage_is_the_turn_of_the_newest_covered_message() -> None:
    turn_of = {"a": 0, "b": 1, "c": 2}
    assert tokens.covered_turn("b", turn_of) == 1 and tokens.covered_turn(None, turn_of) is None


def test_checkpoints_take_the_prompt_built_at_or_before_each_mark() -> None:
    rows = [{"turn": t} for t in range(0, 302, 2)]
    assert [r["turn"] for r in tokens.checkpoints(rows, (20, 40, 80, 150, 300))] == [20, 40, 80, 150, 300]
    # marks past a shorter thread's end show its last prompt once
    short = [{"turn": t} for t in range(0, 80, 2)]
    assert [r["turn"] for r in tokens.checkpoints(short, (20, 40, 80, 150, 300))] == [20, 40, 78]
    assert tokens.checkpoints([], (20,)) == []


def test_refreshes_are_counted_where_the_summary_the_card_saw_changed() -> None:
    rows = [{"turn": 0, "summary_version": None}, {"turn": 2, "summary_version": None},
            {"turn": 4, "summary_version": 1}, {"turn": 6, "summary_version": 1},
            {"turn": 8, "summary_version": 3}, {"turn": 10, "summary_version": 3}]
    assert tokens.refresh_turns(rows) == [4, 8]
    assert tokens.refresh_turns([]) == []


# -- the plot ---------------------------------------------------------------------------------------


def test_the_chart_marks_the_summary_refreshes_with_vertical_lines() -> None:
    series = [("a", [0, 100], [0, 100])]
    bare = plot.line_chart(series, title="t", x_label="x", y_label="y", width=320, height=200)
    marked = plot.line_chart(series, title="t", x_label="x", y_label="y", width=320, height=200,
                             markers=[25, 50], marker_label="summary refresh")
    assert bare != marked and marked[:8] == b"\x89PNG\r\n\x1a\n"
    canvas = plot.chart_canvas(series, title="t", x_label="x", y_label="y", width=320, height=200, markers=[50],
                               marker_label="refresh")
    left, right, top, bottom = plot.MARGINS
    x = left + (320 - left - right) // 2
    column = {bytes(canvas.pixels[(y * 320 + x) * 3:(y * 320 + x) * 3 + 3]) for y in range(top + 40, 200 - bottom)}
    assert bytes(plot.MARKER_COLOR) in column


# -- a live run -------------------------------------------------------------------------------------


def _args(tmp_path: Path, **over: object) -> argparse.Namespace:
    args = argparse.Namespace(conversation="live", turns=40, seed=7, recent=WINDOW, budget=600, summary_trigger=150,
                              summary_keep_recent=WINDOW, think_seconds=10.0, embedder="hashing", json_out=None,
                              png=None, jsonl=None)
    for k, v in over.items():
        setattr(args, k, v)
    return args


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return tokens.run(_args(tmp_path_factory.mktemp("tokens")))


def test_a_live_run_reports_every_prompt_with_the_card_within_its_budget(report: dict) -> None:
    rows = report["rows"]
    assert [r["turn"] for r in rows] == list(range(0, 41, 2))
    for r in rows:
        assert r["card_tokens"] <= 600 and r["card"] == r["fixed"] + r["card_tokens"]
        assert sum(r["card_sections"].values()) >= r["card_tokens"] - 5  # sections add up (headers' joins aside)
        assert r["flat"] >= r["window"]
    assert rows[-1]["flat"] > rows[1]["flat"]
    assert report["settings"]["tokenizer"].startswith("hf:") and report["settings"]["budget_tokens"] == 600


def test_the_summary_refreshes_by_itself_during_the_run_and_leaves_the_recent_turns_out(report: dict) -> None:
    rows = report["rows"]
    assert report["summary"]["refreshes"] >= 1 and report["summary"]["refresh_turns"]
    covered = [r["summary_covered_turn"] for r in rows if r["summary_covered_turn"] is not None]
    assert covered and covered == sorted(covered)
    assert all(r["turn"] - r["summary_covered_turn"] > WINDOW - 1 for r in rows if r["summary_covered_turn"] is not None)
    assert any("summary" in r["card_sections"] for r in rows)


def test_the_report_prints_checkpoints_with_the_ratio_and_stays_quiet_off_a_terminal(report: dict, tmp_path: Path,
                                                                                   capsys) -> None:
    text = tokens.format_report(report)
    assert "flat/card" in text and "| 20 " in text and "| 40 " in text
    png = tokens.plot(report, tmp_path / "t.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert tokens.progress(10, stream=io.StringIO()) is None  # not a terminal: no progress line


def test_compared_card_recipes_are_built_at_every_prompt_side_by_side(tmp_path: Path) -> None:
    r = tokens.run(_args(tmp_path, turns=12, compare="no_floor"))
    assert all(set(row["recipes"]) == {"no_floor"} for row in r["rows"])
    assert all(row["recipes"]["no_floor"]["card"] <= row["fixed"] + 600 for row in r["rows"])
    assert r["recipes"]["no_floor"]["total"] == sum(row["recipes"]["no_floor"]["card"] for row in r["rows"])
    assert r["recipe"] == "default" and "| no_floor " in tokens.format_report(r)
