"""Answer quality on LoCoMo: an answer generated from what a method retrieved, scored with LoCoMo's
token F1 and an LLM judge.

The protocol is the one behind the LoCoMo QA figures the peers publish (the Mem0 evaluation
harness, reused by Zep, Memobase and MemMachine): categories 1–4 (adversarial questions are left
out), a short answer generated from the retrieved context only, the F1 of LoCoMo's own evaluation
script (normalised, Porter-stemmed tokens; multi-hop answers compared part by part; the first
alternative of an open-domain gold answer), and a binary judge that is generous about wording and
date formats but not about facts. The prompts below follow that harness's instructions in our own
words; `--judge-prompt FILE` swaps in any other judge prompt (placeholders {question}, {gold},
{answer}) to reproduce a published one exactly.

Every method is given the same thing: the leading results it returned, cut to the same token
budget, counted with the same tokenizer. The models are any OpenAI-compatible endpoint (vLLM,
Ollama's /v1, OpenAI) or Bedrock (`--answer-url bedrock`).
"""

from __future__ import annotations

import argparse
import re
import string
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from pydantic import BaseModel, Field

from ..ports import LLM
from . import metrics

ANSWER_SYSTEM = (
    "You answer questions about two people from memories of their past conversations. Use only the "
    "memories given. Each memory may carry the date it was said: turn relative times (\"last year\", "
    "\"yesterday\") into the actual date or period using that date. If the memories disagree, trust the "
    "most recent. Answer in as few words as possible (at most six), with no explanation.")
ANSWER_PROMPT = "Memories:\n{context}\n\nQuestion: {question}\nShort answer:"

JUDGE_SYSTEM = (
    "You grade an answer to a question one person could ask about another, given the gold answer. Label it "
    "CORRECT when it states the same fact as the gold answer, even if it is longer, worded differently or "
    "gives a date in another format or as a relative time that points to the same date or period; label it "
    "WRONG when it states another fact, misses the fact, or says it does not know.")
JUDGE_PROMPT = "Question: {question}\nGold answer: {gold}\nGenerated answer: {answer}"


class Answer(BaseModel):
    answer: str = Field(max_length=2000)


class Verdict(BaseModel):
    reasoning: str = Field(default="", max_length=4000)
    label: Literal["CORRECT", "WRONG"]


# -- LoCoMo's token F1 ----------------------------------------------------------------------------
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation: lower case, no punctuation (commas dropped first), no articles or 'and'."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def _stem(words: list[str]) -> list[str]:
    try:
        from nltk.stem import PorterStemmer
    except ImportError as e:  # an optional extra: say which
        raise SystemExit("LoCoMo's F1 stems with NLTK's Porter stemmer: pip install 'memlane[bench]'") from e
    stemmer = PorterStemmer()
    return [stemmer.stem(w) for w in words]


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = _stem(normalize_answer(prediction).split()), _stem(normalize_answer(gold).split())
    common = sum((Counter(pred) & Counter(ref)).values())
    if not common:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    """The F1 of LoCoMo's evaluation per category: a multi-hop gold answer lists parts (each matched
    with the best part of the prediction), an open-domain one gives alternatives after ';' (the first
    counts)."""
    if category == 1:
        parts = [p for p in (s.strip() for s in prediction.split(",")) if p] or [prediction]
        golds = [g for g in (s.strip() for s in gold.split(",")) if g] or [gold]
        return sum(max(token_f1(p, g) for p in parts) for g in golds) / len(golds)
    if category == 3:
        gold = gold.split(";")[0].strip()
    return token_f1(prediction, gold)


# -- answering and judging ------------------------------------------------------------------------
def context_block(texts: Sequence[str], count_tokens: Callable[[str], int], budget: int) -> tuple[str, int]:
    """The leading texts that fit in `budget` tokens, one per line, and the tokens they take. The first
    text is cut, not dropped, when it alone is over the budget (an answer still gets some context)."""
    lines: list[str] = []
    used = 0
    for text in texts:
        line = "- " + " ".join(text.split())
        cost = count_tokens(line)
        if used + cost > budget:
            if not lines:  # the first text alone is over the budget: cut it rather than answer from nothing
                words = line.split()
                while len(words) > 1 and count_tokens(" ".join(words)) > budget:
                    words = words[: len(words) * 3 // 4]
                if count_tokens(" ".join(words)) <= budget:
                    lines, used = [" ".join(words)], count_tokens(" ".join(words))
            break
        lines.append(line)
        used += cost
    return "\n".join(lines), used


@dataclass(frozen=True)
class Graded:
    answer: str
    f1: float
    correct: bool | None  # None without a judge
    context_tokens: int
    answer_ms: float
    judge_ms: float


class Grader:
    """Answers a question from a method's results and grades the answer (F1, and the judge when given)."""

    def __init__(self, answerer: LLM, judge: LLM | None, count_tokens: Callable[[str], int],
                 budget_tokens: int = 1000, judge_prompt: str = JUDGE_PROMPT,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.answerer, self.judge = answerer, judge
        self.count_tokens, self.budget = count_tokens, budget_tokens
        self.judge_prompt, self.clock = judge_prompt, clock

    def grade(self, question: str, gold: str, category: int, texts: Sequence[str]) -> Graded:
        """From a method's results, in rank order, cut to the budget."""
        context, used = context_block(texts, self.count_tokens, self.budget)
        return self.grade_context(question, gold, category, context, used)

    def grade_context(self, question: str, gold: str, category: int, context: str, used: int) -> Graded:
        """From a context already under the budget (a context card, `used` tokens)."""
        t0 = self.clock()
        answer = self.answerer.generate(system=ANSWER_SYSTEM, response_model=Answer,
                                        prompt=ANSWER_PROMPT.format(context=context or "(none)",
                                                                    question=question)).answer.strip()
        t1 = self.clock()
        correct = None
        if self.judge is not None:
            verdict = self.judge.generate(system=JUDGE_SYSTEM, response_model=Verdict,
                                          prompt=self.judge_prompt.format(question=question, gold=gold,
                                                                          answer=answer))
            correct = verdict.label == "CORRECT"
        t2 = self.clock()
        return Graded(answer, locomo_f1(answer, gold, category), correct, used,
                      (t1 - t0) * 1000, (t2 - t1) * 1000)


@dataclass
class AnswerScores:
    """Per method: F1 and judge accuracy overall (the headline categories) and per category, the
    context tokens an answer was given, and the answer and judge latencies."""
    by_category: dict[int, list[Graded]] = field(default_factory=lambda: defaultdict(list))

    def add(self, category: int, graded: Graded) -> None:
        self.by_category[category].append(graded)

    def report(self, names: dict[int, str], headline: Sequence[int]) -> dict[str, Any]:
        def summary(items: list[Graded]) -> dict[str, Any]:
            judged = [g.correct for g in items if g.correct is not None]
            return {"questions": len(items),
                    "f1": round(sum(g.f1 for g in items) / max(len(items), 1), 4),
                    "judge_accuracy": round(sum(judged) / len(judged), 4) if judged else None,
                    "context_tokens_mean": round(sum(g.context_tokens for g in items) / max(len(items), 1), 1),
                    "answer_ms": {"p50": round(metrics.percentile([g.answer_ms for g in items], 50), 1),
                                  "p95": round(metrics.percentile([g.answer_ms for g in items], 95), 1)},
                    "judge_ms": {"p50": round(metrics.percentile([g.judge_ms for g in items], 50), 1),
                                 "p95": round(metrics.percentile([g.judge_ms for g in items], 95), 1)}}
        overall = [g for c in headline for g in self.by_category.get(c, [])]
        return {**summary(overall),
                "by_category": {str(c): {"name": names.get(c, str(c)), **summary(items)}
                                for c, items in sorted(self.by_category.items())}}


def llm_from_options(model: str, url: str, api_key: str | None) -> LLM:
    """An answering or judging model: `url` is an OpenAI-compatible base URL, or `bedrock`."""
    if url == "bedrock":
        import boto3

        from ..adapters.bedrock.llm import BedrockLLM
        return BedrockLLM(model, client=boto3.client("bedrock-runtime"), max_tokens=512)
    from ..adapters.openai.llm import OpenAICompatibleLLM
    return OpenAICompatibleLLM(url, model, api_key=api_key)


# -- `memlane bench locomo --answer-model ...` ------------------------------------------------------
SOURCES = ("results", "card")  # what an answer is generated from: a method's top results, memlane's card


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("answer quality", "generate an answer per question (categories 1-4) and score it "
                             "with LoCoMo's F1 and an LLM judge; OpenAI-compatible endpoints (key: "
                             "MEMLANE_OPENAI_API_KEY) or Bedrock")
    g.add_argument("--answer-model", help="model that answers from the retrieved context")
    g.add_argument("--answer-url", help="its OpenAI-compatible base URL (e.g. http://localhost:8000/v1), or 'bedrock'")
    g.add_argument("--judge-model", help="model that grades each answer against the gold one (needs --answer-model)")
    g.add_argument("--judge-url", help="the judge's base URL or 'bedrock' (default: --answer-url)")
    g.add_argument("--judge-prompt", type=Path, help="a judge prompt file with {question}, {gold} and {answer}, to "
                                                     "reproduce a published judge exactly")
    g.add_argument("--answer-from", default="results",
                   help="comma-separated: results (every method's top results cut to the budget), card (memlane's "
                        "context card of the conversation's last thread, method <name>+card)")
    g.add_argument("--answer-budget", type=int, default=1000, help="context tokens an answer is given")


def check_arguments(args: argparse.Namespace) -> str | None:
    """What is wrong with the answer flags, or None: checked before an hour's retrieval run starts."""
    if args.answer_model is None:
        return "--judge-model needs --answer-model (the judge grades generated answers)" if args.judge_model else None
    if not args.answer_url:
        return "--answer-model needs --answer-url (an OpenAI-compatible base URL, or bedrock)"
    if sources(args.answer_from) is None:
        return f"--answer-from takes a comma-separated list of {', '.join(SOURCES)}"
    if args.answer_budget <= 0:
        return "--answer-budget must be positive"
    if args.judge_prompt is not None:
        try:
            args.judge_prompt.read_text().format(question="", gold="", answer="")
        except (OSError, KeyError, IndexError, ValueError) as exc:
            return f"--judge-prompt {args.judge_prompt}: {exc} (placeholders: {{question}}, {{gold}}, {{answer}})"
    return None


def sources(value: str) -> list[str] | None:
    found = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    return found if found and all(v in SOURCES for v in found) else None


def grader_from_args(args: argparse.Namespace, count_tokens: Callable[[str], int]) -> Grader | None:
    if args.answer_model is None:
        return None
    from ..config import Settings  # the key comes from the environment through the one settings object

    key = Settings.from_env().openai_api_key or None
    judge = llm_from_options(args.judge_model, args.judge_url or args.answer_url, key) if args.judge_model else None
    prompt = args.judge_prompt.read_text() if args.judge_prompt else JUDGE_PROMPT
    return Grader(llm_from_options(args.answer_model, args.answer_url, key), judge, count_tokens,
                  budget_tokens=args.answer_budget, judge_prompt=prompt)


def setup(args: argparse.Namespace) -> dict[str, Any]:
    """What a report says about how its answers were made."""
    return {"answer_model": args.answer_model, "answer_url": args.answer_url, "judge_model": args.judge_model,
            "judge_url": (args.judge_url or args.answer_url) if args.judge_model else None,
            "judge_prompt": str(args.judge_prompt) if args.judge_prompt else "default (answers.JUDGE_PROMPT)",
            "budget_tokens": args.answer_budget, "from": sources(args.answer_from)}
