"""Context cards on LoCoMo: what a card under a token budget holds of what a question needs, beside two
plain ways of filling the same budget, measured in one run.

Each conversation is ingested into its own tenant through the real service path (locomo.Memlane: one
thread per session by default, or `--threads conversation`: all sessions in one thread, whose summary then
refreshes as it grows; the local worker extracts, no LLM, MiniLM). Every question is then asked as the next
turn of the conversation's last session: the card of that thread (services/context.build, the route's
own service) is built with the question as its query, at each budget. Beside it, at the same budgets:

- ``last_turns``    the newest turns of the conversation that fit (plain truncation of the history).
- ``search_top_k``  memlane's search for the question, its results in rank order while they fit.

Per method, budget and question category: *prompt recall* (the share of the question's evidence turns
the prompt holds — as a recent turn, a summary sentence's citation or a memory's evidence), *answer words*
(the share of the gold answer's words the prompt's text holds: recall counts a turn whose memory is in
the card, so a card that cut a memory's answering sentence would still score; this does not), tokens of the
prompt against the flat full history (every turn, same line format, same tokenizer), and p50/p95 latency
of building it (wall and CPU time). Tokens are counted with the service's tokenizer (deps.tokenizer), not
words. ``--recipes`` builds the card with other recipes of services/context.RECIPES on the same state, side by
side (``card:<recipe>``); every figure is also given per conversation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..domain import language
from . import metrics
from .answers import normalize_answer
from .common import CachedEmbedder, Progress, machine, minilm, table
from .locomo import APP, CATEGORY_NAMES, HEADLINE, STORE, Conversation, Memlane, load

BUDGETS = (500, 1000, 1500, 2000)
METHODS = ("card", "last_turns", "search_top_k")
THREADS = ("session", "conversation")  # what a LoCoMo session is added to (docs/benchmarks.md, section 7)
SEARCH_K = 100  # results the search baseline asks for (enough to fill 2,000 tokens)


def turn_line(speaker: str, content: str, when: Any) -> str:
    """A turn as the card renders it (services/context.py): the flat history uses the same form."""
    return f"- [{when:%Y-%m-%d}] {speaker}: {content}"


def last_turns(lines: Sequence[str], budget: int, tokenizer: Any,
               counts: Sequence[int] | None = None) -> tuple[list[int], int]:
    """Indexes of the newest lines that fit in `budget` tokens together, and their token count. `counts`:
    the lines' own counts, when the caller has them (a conversation's lines are counted once)."""
    counts = counts if counts is not None else tokenizer.count_many(list(lines)) if lines else []
    kept: list[int] = []
    used = 0
    for i in range(len(lines) - 1, -1, -1):
        if used + counts[i] > budget:
            break
        kept.insert(0, i)
        used += counts[i]
    total = tokenizer.count("\n".join(lines[i] for i in kept)) if kept else 0
    while total > budget:  # a tokenizer whose counts do not add up line by line
        kept.pop(0)
        total = tokenizer.count("\n".join(lines[i] for i in kept)) if kept else 0
    return kept, total


def top_k(hits: Sequence[tuple[str, Iterable[str]]], budget: int, tokenizer: Any) -> tuple[set[str], int, str]:
    """The turns covered by the leading hits (text, turns) that fit in `budget` tokens, the tokens, the text."""
    lines = [f"- {text}" for text, _ in hits]
    counts = tokenizer.count_many(lines) if lines else []
    covered: set[str] = set()
    used = 0
    kept: list[str] = []
    for (_, turns), line, n in zip(hits, lines, counts):
        if used + n > budget:
            break
        used += n
        kept.append(line)
        covered.update(turns)
    text = "\n".join(kept)
    return covered, tokenizer.count(text) if kept else 0, text


def recall(message_ids: Iterable[str], turn_of: Mapping[str, str], evidence: Sequence[str]) -> float:
    held = set(metrics.map_evidence(message_ids, turn_of))
    return sum(1 for e in set(evidence) if e in held) / len(set(evidence))


# Words an answer shares with any text: out. Month names stay ("7 May 2023" needs its "may").
_NOT_ANSWER = language.STOP_WORDS - set(language.MONTHS)
_WORDS = re.compile(r"\w+")


def answer_words(gold: str | None, category: int) -> frozenset[str]:
    """The gold answer's words, normalised as LoCoMo's F1 does; an open-domain answer's first alternative."""
    if not gold:
        return frozenset()
    if category == 3:
        gold = gold.split(";")[0]
    return frozenset(w for w in normalize_answer(str(gold)).split() if w not in _NOT_ANSWER)


def answer_share(words: frozenset[str], text: str) -> float | None:
    """The share of `words` the text holds (exact words: no stemming, so "bowls" does not match "bowl"
    — a floor); None when there is nothing to look for."""
    if not words:
        return None
    return len(words & set(_WORDS.findall(text.lower()))) / len(words)


class Tally:
    """Per method, budget and category: recall, tokens, ratio to the full history, latencies."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int, int, str],
                        list[tuple[float, int, float, float, float, float | None]]] = defaultdict(list)

    def add(self, method: str, budget: int, category: int, recall_: float, tokens: int, full: int,
            ms: float, conversation: str = "", cpu_ms: float | None = None, answer: float | None = None) -> None:
        self.rows[(method, budget, category, conversation)].append(
            (recall_, tokens, full / max(tokens, 1), ms, ms if cpu_ms is None else cpu_ms, answer))

    def methods(self) -> list[str]:
        return list(dict.fromkeys(m for m, _, _, _ in self.rows))

    def summary(self, method: str, budget: int, categories: Iterable[int] | None,
                conversation: str | None = None) -> dict[str, Any]:
        rows = [r for (m, b, c, v), rs in self.rows.items() if m == method and b == budget
                and (categories is None or c in categories) and conversation in (None, v) for r in rs]
        if not rows:
            return {"questions": 0}
        n = len(rows)
        tokens = sum(r[1] for r in rows) / n
        full = sum(r[1] * r[2] for r in rows) / n  # mean full-history tokens of these questions
        latencies, cpu = [r[3] for r in rows], [r[4] for r in rows]
        answered = [r[5] for r in rows if r[5] is not None]
        return {"questions": n, "recall": round(sum(r[0] for r in rows) / n, 4),
                "answer_words": round(sum(answered) / len(answered), 4) if answered else None,
                "all_hit": round(sum(1 for r in rows if r[0] >= 1.0) / n, 4),
                "tokens_mean": round(tokens, 1), "ratio_vs_full": round(full / max(tokens, 1e-9), 2),
                "latency_ms": {"p50": round(metrics.percentile(latencies, 50), 2),
                               "p95": round(metrics.percentile(latencies, 95), 2)},
                # CPU time of the process while building: what the load of a shared machine moves least.
                "cpu_ms": {"p50": round(metrics.percentile(cpu, 50), 2), "p95": round(metrics.percentile(cpu, 95), 2)}}


def thread_of(session: int, per: str) -> str:
    """The thread a session is added to: its own (`session`), or the conversation's one (`conversation`)."""
    if per not in THREADS:
        raise ValueError(f"threads must be one of {THREADS}")
    return f"session-{session}" if per == "session" else "conversation"


class _Threads(Memlane):
    """memlane's LoCoMo path with the sessions added to the threads `per` says."""

    def __init__(self, embedder: Any, data_dir: Path, per: str) -> None:
        super().__init__(embedder, data_dir)
        self.per = per

    def scope(self, conv: Conversation, session: int | None = None) -> dict[str, str]:  # type: ignore[override]
        scope = {"app_id": APP, "tenant_id": conv.sample_id}
        return scope if session is None else {**scope, "run_id": thread_of(session, self.per)}


def card_method(recipe: str) -> str:
    """The method name of a card recipe in the report: `card` for the shipped one, `card:<recipe>` beside it."""
    from ..services.context import DEFAULT_RECIPE

    return "card" if recipe == DEFAULT_RECIPE else f"card:{recipe}"


def evaluate(convs: list[Conversation], ours: Memlane, budgets: Sequence[int], recent: int,
             progress: Progress | None = None, per: str = "session",
             recipes: Sequence[str] = ("default",)) -> tuple[Tally, list[int], dict[str, Any]]:
    from ..services import context
    from ..services.search import search

    deps = ours.deps
    tokenizer = deps.tokenizer
    tally, fulls, summaries = Tally(), [], {"per": per, "threads": 0, "with_summary": 0}
    for conv in convs:
        if progress:
            progress.update(0, f"{conv.sample_id}: ingest")
        ours.prepare(conv)
        thread = thread_of(conv.sessions[-1][0], per)
        lines = [turn_line(t.speaker, t.content, t.created_at) for t in conv.turns]
        full = tokenizer.count("\n".join(lines))
        counts = tokenizer.count_many(lines)
        fulls.append(full)
        threads = list(dict.fromkeys(thread_of(n, per) for n, _, _ in conv.sessions))
        summaries["threads"] += len(threads)
        summaries["with_summary"] += sum(context.get_summary(deps, STORE, _thread_scope(conv, t)) is not None
                                         for t in threads)
        if progress:
            progress.update(len(conv.turns), f"{conv.sample_id}: questions")
        for q in conv.questions:
            wanted = answer_words(q.answer, q.category)
            for budget in budgets:
                for recipe in recipes:
                    t0, c0 = time.perf_counter(), time.process_time()
                    card = context.build(deps, STORE, app_id=APP, tenant_id=conv.sample_id, thread_id=thread,
                                         query=q.text, budget_tokens=budget, recent_messages=recent, recipe=recipe)
                    ms, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
                    tally.add(card_method(recipe), budget, q.category, recall(card.evidence, ours.turn_of, q.evidence),
                              card.total, full, ms, conv.sample_id, cpu, answer_share(wanted, card.text))

                t0 = time.perf_counter()
                kept, tokens = last_turns(lines, budget, tokenizer, counts)
                ms = (time.perf_counter() - t0) * 1000
                held = {conv.turns[i].dia_id for i in kept}
                tally.add("last_turns", budget, q.category, sum(e in held for e in set(q.evidence)) / len(set(q.evidence)),
                          tokens, full, ms, conv.sample_id, answer=answer_share(wanted, "\n".join(lines[i] for i in kept)))

            t0 = time.perf_counter()
            hits = search(deps, STORE, query=q.text, scope=ours.scope(conv), top_k=SEARCH_K)
            search_ms = (time.perf_counter() - t0) * 1000
            pairs = [(h.memory.text, metrics.map_evidence(h.memory.evidence, ours.turn_of)) for h in hits]
            for budget in budgets:
                t0 = time.perf_counter()
                covered, tokens, text = top_k(pairs, budget, tokenizer)
                ms = search_ms + (time.perf_counter() - t0) * 1000
                tally.add("search_top_k", budget, q.category,
                          sum(e in covered for e in set(q.evidence)) / len(set(q.evidence)), tokens, full, ms,
                          conv.sample_id, answer=answer_share(wanted, text))
            if progress:
                progress.update(1, f"{conv.sample_id}: questions")
    return tally, fulls, summaries


def _thread_scope(conv: Conversation, thread: str) -> Any:
    from ..domain.scope import Scope

    return Scope(app_id=APP, tenant_id=conv.sample_id, run_id=thread)


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    budgets = [int(b) for b in str(args.budgets).split(",")]
    skip = getattr(args, "skip_conversations", 0) or 0  # another subset than the first ones
    convs = load(args.data, None if args.limit_conversations is None else skip + args.limit_conversations)[skip:]
    embedder = minilm()
    if getattr(args, "embed_cache", None):
        embedder = CachedEmbedder(embedder, Path(args.embed_cache))
    embedder.embed(["warm up"])  # load the model before anything is timed
    tmp = tempfile.TemporaryDirectory(prefix="memlane-bench-") if not args.data_dir else None
    data_dir = Path(args.data_dir) if args.data_dir else Path(tmp.name)  # type: ignore[union-attr]
    per = getattr(args, "threads", "session")
    ours = _Threads(embedder, data_dir / "memlane", per)
    progress = Progress(sum(len(c.questions) + len(c.turns) for c in convs), "starting")
    try:
        load_start = os.getloadavg()[0]
        recipes = [r for r in str(getattr(args, "recipes", "default")).split(",") if r]
        tally, fulls, summaries = evaluate(convs, ours, budgets, args.recent, progress, per, recipes)
        tokenizer = ours.deps.tokenizer.name  # type: ignore[union-attr]
    finally:
        progress.close()
        ours.close()
        if tmp:
            tmp.cleanup()
    categories = sorted({c.category for conv in convs for c in conv.questions})
    methods = {m: {str(b): {"all": tally.summary(m, b, HEADLINE),
                            **{str(c): tally.summary(m, b, (c,)) for c in categories}} for b in budgets}
               for m in tally.methods()}
    # Per conversation (categories 1-4): an idea is kept only if it helps on each, not just on the mean.
    per_conversation = {c.sample_id: {m: {str(b): tally.summary(m, b, HEADLINE, c.sample_id) for b in budgets}
                                      for m in tally.methods()} for c in convs}
    return {
        "dataset": Path(args.data).name, "conversations": [c.sample_id for c in convs],
        "questions": {"headline": sum(1 for c in convs for q in c.questions if q.category in HEADLINE),
                      "all": sum(len(c.questions) for c in convs)},
        "budgets": budgets, "recent_messages": args.recent, "tokenizer": tokenizer, "embedder": embedder.name,
        "full_history_tokens_mean": round(sum(fulls) / max(len(fulls), 1), 1),
        "threads": summaries, "memories": ours.memories, "failed_tasks": ours.failed_tasks,
        "methods": methods, "per_conversation": per_conversation,
        "machine": {**machine(), "loadavg_1m_start": round(load_start, 2),
                    "loadavg_1m_end": round(os.getloadavg()[0], 2)},
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def format_report(report: dict[str, Any]) -> str:
    out = [f"LoCoMo {report['dataset']}: {report['questions']['headline']} questions in categories 1-4, asked as the "
           f"next turn of each conversation's last session; tokens by {report['tokenizer']}; full history "
           f"{report['full_history_tokens_mean']:,.0f} tokens on average; one thread per {report['threads']['per']}, "
           f"summaries on {report['threads']['with_summary']}/{report['threads']['threads']} threads", ""]
    methods = list(report["methods"])
    rows = []
    for budget in report["budgets"]:
        for method in methods:
            s = report["methods"][method][str(budget)]["all"]
            cpu = s.get("cpu_ms", {})
            rows.append([budget, method, s["recall"], s["all_hit"], s.get("answer_words") or "-", s["tokens_mean"],
                         f"{s['ratio_vs_full']:.1f}x", s["latency_ms"]["p50"], s["latency_ms"]["p95"],
                         cpu.get("p50", "-"), cpu.get("p95", "-")])
    out.append(table(["budget", "method", "prompt recall", "all evidence", "answer words", "tokens", "fewer than full",
                      "p50 ms", "p95 ms", "CPU p50 ms", "CPU p95 ms"], rows))
    cats = [c for c in next(iter(report["methods"]["card"].values())) if c != "all"]
    out += ["", "prompt recall by category:"]
    crow = [[budget, method, *(report["methods"][method][str(budget)][c].get("recall", "-") for c in cats)]
            for budget in report["budgets"] for method in methods]
    out.append(table(["budget", "method", *(f"{c} {CATEGORY_NAMES.get(int(c), '')}" for c in cats)], crow))
    per = report.get("per_conversation", {})
    if len(per) > 1:
        out += ["", "prompt recall and fewer-than-full by conversation (categories 1-4):"]
        prow = [[budget, method, *(f"{per[c][method][str(budget)].get('recall', '-')} / "
                                   f"{per[c][method][str(budget)].get('ratio_vs_full', 0):.1f}x" for c in per)]
                for budget in report["budgets"] for method in methods]
        out.append(table(["budget", "method", *per], prow))
    m = report.get("machine", {})
    if "loadavg_1m_start" in m:
        out += ["", f"load average (1 min) {m['loadavg_1m_start']} at start, {m['loadavg_1m_end']} at end"]
    return "\n".join(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=Path(os.environ.get("MEMLANE_LOCOMO", "locomo-dev.json")),
                   help="LoCoMo JSON file (original format)")
    p.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS), help="comma-separated token budgets")
    p.add_argument("--recent", type=int, default=6, help="recent messages asked for in the card")
    p.add_argument("--threads", choices=THREADS, default="session",
                   help="add each LoCoMo session to its own thread (default) or all to one thread per conversation")
    p.add_argument("--recipes", default="default",
                   help="card recipes (services/context.RECIPES) measured side by side, comma-separated")
    p.add_argument("--json", dest="json_out", type=Path, help="write the full report here")
    p.add_argument("--limit-conversations", type=int, default=None)
    p.add_argument("--skip-conversations", type=int, default=0, help="leave out the first N conversations")
    p.add_argument("--data-dir", help="keep memlane's data here instead of a temporary directory")
    p.add_argument("--embed-cache", help=argparse.SUPPRESS)  # development aid; never for published latency


def main(args: argparse.Namespace) -> int:
    if not Path(args.data).is_file():
        print(f"error: no LoCoMo data at {args.data} (pass --data PATH)", file=sys.stderr)
        return 2
    report = run(args)
    print(format_report(report))
    print(f"\n{report['memories']} memories, {report['failed_tasks']} failed tasks; {report['elapsed_s']} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0
