"""Answer quality: LoCoMo's F1, the context every method is given, and answering + judging through a
real OpenAI-compatible HTTP endpoint that answers from a script."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from memlane.bench import answers


def words(text: str) -> int:
    return len(text.split())


def test_normalisation_follows_locomo() -> None:
    assert answers.normalize_answer("The Cat, and a Dog!") == "cat dog"


def test_f1_stems_and_ignores_articles() -> None:
    assert answers.token_f1("running in the park", "ran in park") == pytest.approx(2 / 3)
    assert answers.token_f1("He runs", "run") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert answers.token_f1("Paris", "London") == 0.0


def test_multi_hop_gold_parts_are_each_matched_with_the_best_part_of_the_answer() -> None:
    assert answers.locomo_f1("hiking, painting", "painting, hiking", 1) == 1.0
    assert answers.locomo_f1("painting", "painting, hiking", 1) == 0.5


def test_open_domain_counts_the_first_alternative_of_the_gold_answer() -> None:
    assert answers.locomo_f1("a teacher", "teacher; educator", 3) == 1.0
    assert answers.locomo_f1("educator", "teacher; educator", 3) == 0.0


def test_the_context_keeps_the_leading_results_that_fit_the_budget() -> None:
    text, used = answers.context_block(["one two three", "four five", "six seven eight nine"], words, 7)
    assert text == "- one two three\n- four five"
    assert used == 7


def test_a_first_result_over_the_budget_is_cut_not_dropped() -> None:
    text, used = answers.context_block(["w " * 40], words, 10)
    assert 0 < used <= 10
    assert text.startswith("- w")


class ScriptedChat(BaseHTTPRequestHandler):
    """`POST /v1/chat/completions`: answers a question with its scripted answer, and judges an answer
    CORRECT when it is the gold one."""
    script = {"When did Caroline go to the LGBTQ support group?": "7 May 2023"}
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(body)
        prompt = body["messages"][-1]["content"]
        if prompt.startswith("Question:"):  # the judge
            gold = prompt.split("Gold answer: ")[1].split("\n")[0]
            said = prompt.split("Generated answer: ")[1]
            content = {"reasoning": "compared", "label": "CORRECT" if said == gold else "WRONG"}
        else:
            question = prompt.split("Question: ")[1].split("\n")[0]
            content = {"answer": self.script.get(question, "I don't know")}
        raw = json.dumps({"choices": [{"message": {"role": "assistant", "content": json.dumps(content)}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ScriptedChat.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_answers_and_judges_over_http(endpoint: str) -> None:
    model = answers.llm_from_options("scripted", endpoint, api_key=None)
    grader = answers.Grader(model, model, words, budget_tokens=50)
    right = grader.grade("When did Caroline go to the LGBTQ support group?", "7 May 2023", 2,
                         ["Caroline (8 May 2023): I went to a support group yesterday."])
    wrong = grader.grade("What is Melanie's hobby?", "painting", 4, ["Melanie: I love pottery."])
    assert (right.answer, right.f1, right.correct) == ("7 May 2023", 1.0, True)
    assert (wrong.answer, wrong.f1, wrong.correct) == ("I don't know", 0.0, False)
    asked = ScriptedChat.seen[0]["messages"][-1]["content"]
    assert "- Caroline (8 May 2023): I went to a support group yesterday." in asked  # the context it was given
    scores = answers.AnswerScores()
    scores.add(2, right)
    scores.add(4, wrong)
    report = scores.report({2: "temporal", 4: "single-hop"}, headline=(1, 2, 3, 4))
    assert report["questions"] == 2
    assert report["judge_accuracy"] == 0.5
    assert report["f1"] == 0.5
    assert report["by_category"]["2"]["judge_accuracy"] == 1.0

