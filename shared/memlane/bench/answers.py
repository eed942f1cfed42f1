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

import re
import string
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
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
        context, used = context_block(texts, self.count_tokens, self.budget)
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
                                  "p95": round(metrics.percentile([g.answer_ms for g in items], 95), 1)}}
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
