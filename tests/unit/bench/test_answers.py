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



# -- `memlane bench locomo --answer-model ... --judge-model ...`: end to end over HTTP ------------------
LOCOMO = [{
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle named Max last Saturday."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Cute! Which breed did you want before?"},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "A corgi, honestly."},
        ],
        "session_2_date_time": "9:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "I started working as a nurse at the city hospital."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "That is wonderful news, Bob, congratulations!"},
        ],
    },
    "qa": [
        {"question": "What dog did Ann adopt?", "answer": "a beagle", "evidence": ["D1:1"], "category": 4},
        {"question": "What does Bob work as?", "answer": "nurse", "evidence": ["D2:1"], "category": 1},
        {"question": "What did Ann say about cats?", "adversarial_answer": "nothing", "evidence": ["D1:3"],
         "category": 5},
    ],
}]


class ReadingChat(BaseHTTPRequestHandler):
    """An answerer that answers only from the memories it was given (a fact it was not shown is "I don't
    know"), and a judge that compares with the gold answer; each request's model and prompt are kept."""
    facts = {"beagle": "a beagle", "nurse": "a nurse"}
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(body)
        prompt = body["messages"][-1]["content"]
        if prompt.startswith("Question:"):
            gold = prompt.split("Gold answer: ")[1].split("\n")[0]
            said = prompt.split("Generated answer: ")[1]
            content = {"label": "CORRECT" if answers.normalize_answer(said) == answers.normalize_answer(gold)
                       else "WRONG"}
        else:
            memories, question = prompt.split("Question: ")
            found = [v for k, v in self.facts.items() if k in memories.lower() and
                     (k == "beagle") == ("dog" in question)]
            content = {"answer": found[0] if found else "I don't know"}
        raw = json.dumps({"choices": [{"message": {"role": "assistant", "content": json.dumps(content)}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def reading() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ReadingChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ReadingChat.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_the_gold_answer_is_loaded_and_adversarial_questions_have_none(tmp_path) -> None:
    from memlane.bench import locomo

    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    [conv] = locomo.load(path)
    assert [(q.category, q.answer) for q in conv.questions] == [(4, "a beagle"), (1, "nurse"), (5, None)]


def test_locomo_answers_from_results_and_cards_and_judges_over_http(tmp_path, reading, minilm, capsys) -> None:
    from memlane.bench import main as bench_main

    path, out = tmp_path / "locomo.json", tmp_path / "out.json"
    path.write_text(json.dumps(LOCOMO))
    code = bench_main(["locomo", "--data", str(path), "--methods", "memlane,bm25", "--json", str(out),
                       "--answer-model", "answerer-1", "--answer-url", reading,
                       "--judge-model", "judge-1", "--judge-url", reading, "--answer-from", "results,card"])
    assert code == 0
    got = json.loads(out.read_text())["answers"]
    assert got["answer_model"] == "answerer-1" and got["judge_model"] == "judge-1" and got["budget_tokens"] == 1000
    assert set(got["methods"]) == {"memlane", "memlane+card", "bm25"}  # baselines have no card
    for name, m in got["methods"].items():
        assert m["questions"] == 2, name  # categories 1-4 only: the adversarial one has no gold answer
        assert (m["judge_accuracy"], m["f1"]) == (1.0, 1.0), name
        assert 0 < m["context_tokens_mean"] <= 1000 and m["answer_ms"]["p95"] >= m["answer_ms"]["p50"] > 0
        assert m["judge_ms"]["p95"] >= m["judge_ms"]["p50"] > 0
        assert m["by_category"]["4"]["judge_accuracy"] == 1.0 and m["by_category"]["1"]["name"] == "multi-hop"
    prompts = [(r["model"], r["messages"][-1]["content"]) for r in ReadingChat.seen]
    asked = [p for model, p in prompts if model == "answerer-1"]
    assert len(asked) == 3 * 2 and len([p for model, p in prompts if model == "judge-1"]) == 3 * 2
    assert not any("cats" in p for _, p in prompts)
    assert any("- Ann: I adopted a beagle named Max last Saturday." in p for p in asked)  # bm25's returned row
    assert any("Relevant memories" in p for p in asked)  # a context card, as services/context.py renders it
    printed = capsys.readouterr().out
    assert "answer quality" in printed and "memlane+card" in printed and "judge" in printed


def test_a_judge_without_an_answering_model_is_refused(tmp_path, capsys) -> None:
    from memlane.bench import main as bench_main

    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    assert bench_main(["locomo", "--data", str(path), "--judge-model", "j", "--judge-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--answer-model" in capsys.readouterr().err
    assert bench_main(["locomo", "--data", str(path), "--answer-model", "a"]) == 2
    assert "--answer-url" in capsys.readouterr().err
