"""LoCoMo retrieval benchmark: turn-level evidence recall of memlane's search against plain baselines.

Each conversation is ingested into its own tenant through the real service path (store create →
``ingest.add`` per session → the local worker's extract → index), then every question is asked
through ``memlane.services.search.search``. A memory covers the dialog turns it cites as evidence
(its evidence message ids mapped back to the ``dia_id`` they were sent as). The baselines search
the raw turns directly:

With ``--ingest exchange`` (method ``memlane-exchange``) each add carries one exchange — a turn and
its reply, as a live agent writes — instead of a whole session; extraction then sees the earlier
turns of the run only as context (services/extract.py). ``--ingest session,exchange`` measures both
in one run.

- ``bm25``   SQLite FTS5 (porter unicode61) over "Speaker: text", the query's words OR-ed after
             English stop words are dropped (with them R@10 is ~0.03 lower).
- ``vector`` exact cosine over the same texts embedded with the same MiniLM model.
- ``rrf``    reciprocal rank fusion (k=60) of those two lists, equal weights.

Metrics per question (categories 1–4 averaged as the headline; 5 = adversarial, reported apart):
recall@1/5/10/20, all_hit@10 (every evidence turn covered in the top 10), recall@1000tok
(evidence covered by the leading results whose text fits in 1,000 tokens, tokens =
ceil(1.3 × words)), and latency p50/p95 of the search call alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from ..domain.language import STOP_WORDS
from . import metrics
from .common import CachedEmbedder, Progress, machine, minilm, table

STORE = "locomo"
APP = "locomo"
FETCH_K = 50  # results asked per question: enough for recall@20 and for 1,000 tokens of short texts
BUDGET = 1000
KS = (1, 5, 10, 20)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE = (1, 2, 3, 4)


# -- data ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    content: str  # the turn's text, with its photo caption appended when it shares one
    session: int
    created_at: datetime


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    sessions: list[tuple[int, datetime, list[Turn]]]
    questions: list[Question]
    malformed_evidence: int = 0
    no_evidence: int = 0

    @property
    def turns(self) -> list[Turn]:
        return [t for _, _, ts in self.sessions for t in ts]


def turn_content(raw: dict[str, Any]) -> str:
    text = str(raw.get("text") or "").strip()
    caption = str(raw.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [shares a photo of {caption}]".strip()
    return text


def load(path: Path, limit: int | None = None) -> list[Conversation]:
    data = json.loads(Path(path).read_text())
    out: list[Conversation] = []
    for sample in data[:limit] if limit else data:
        conv = sample["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        sessions = []
        for n in numbers:
            when = metrics.parse_locomo_time(conv[f"session_{n}_date_time"])
            turns = [Turn(str(t["dia_id"]), str(t["speaker"]), turn_content(t), n, when)
                     for t in conv[f"session_{n}"] if turn_content(t)]
            sessions.append((n, when, turns))
        c = Conversation(sample_id=str(sample["sample_id"]), sessions=sessions, questions=[])
        known = {t.dia_id for t in c.turns}
        for qa in sample["qa"]:
            evidence, bad = metrics.clean_evidence(qa.get("evidence", []), known)
            c.malformed_evidence += bad
            if not evidence:
                c.no_evidence += 1
                continue
            c.questions.append(Question(str(qa["question"]), int(qa["category"]), tuple(evidence)))
        out.append(c)
    return out


# -- methods -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Result:
    turns: tuple[str, ...]  # the dialog turns this result covers
    text: str  # the text it returns (what an agent would put in its prompt)


class Method(Protocol):
    name: str

    def prepare(self, conv: Conversation) -> None: ...

    def search(self, conv: Conversation, query: str, k: int) -> list[Result]: ...


def raw_text(turn: Turn) -> str:
    return f"{turn.speaker}: {turn.content}"


class BM25Turns:
    """Plain BM25 over raw turns: SQLite FTS5 with the porter tokenizer, query content words OR-ed."""

    name = "bm25"

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(conv UNINDEXED, dia UNINDEXED, body, "
                        "tokenize='porter unicode61')")
        self.texts: dict[tuple[str, str], str] = {}

    def prepare(self, conv: Conversation) -> None:
        rows = [(conv.sample_id, t.dia_id, raw_text(t)) for t in conv.turns]
        self.db.executemany("INSERT INTO t (conv, dia, body) VALUES (?, ?, ?)", rows)
        self.texts.update({(c, d): b for c, d, b in rows})

    def ranked(self, conv: Conversation, query: str, k: int) -> list[str]:
        words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query)))
        words = [w for w in words if w not in STOP_WORDS] or words
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = self.db.execute("SELECT dia FROM t WHERE t MATCH ? AND conv = ? ORDER BY bm25(t) LIMIT ?",
                               (match, conv.sample_id, k)).fetchall()
        return [r[0] for r in rows]

    def search(self, conv: Conversation, query: str, k: int) -> list[Result]:
        return [Result((d,), self.texts[(conv.sample_id, d)]) for d in self.ranked(conv, query, k)]


class VectorTurns:
    """Plain exact cosine over raw turns, embedded with the same model as memlane."""

    name = "vector"

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.data: dict[str, tuple[list[str], list[str], np.ndarray]] = {}

    def prepare(self, conv: Conversation) -> None:
        turns = conv.turns
        texts = [raw_text(t) for t in turns]
        matrix = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        self.data[conv.sample_id] = ([t.dia_id for t in turns], texts, matrix)

    def ranked(self, conv: Conversation, query: str, k: int) -> list[str]:
        ids, _, matrix = self.data[conv.sample_id]
        q = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        scores = matrix @ q
        top = np.argsort(-scores, kind="stable")[:k]
        return [ids[i] for i in top]

    def search(self, conv: Conversation, query: str, k: int) -> list[Result]:
        ids, texts, _ = self.data[conv.sample_id]
        where = {d: i for i, d in enumerate(ids)}
        return [Result((d,), texts[where[d]]) for d in self.ranked(conv, query, k)]


class RRFTurns:
    """Reciprocal rank fusion (k=60, equal weights) of the bm25 and vector baselines, 100 candidates each."""

    name = "rrf"

    def __init__(self, bm25: BM25Turns, vector: VectorTurns) -> None:
        self.bm25, self.vector = bm25, vector

    def prepare(self, conv: Conversation) -> None:  # shares the other two's indexes
        pass

    def search(self, conv: Conversation, query: str, k: int) -> list[Result]:
        fused: dict[str, float] = defaultdict(float)
        for ranked in (self.bm25.ranked(conv, query, 100), self.vector.ranked(conv, query, 100)):
            for rank, d in enumerate(ranked, start=1):
                fused[d] += 1.0 / (60 + rank)
        top = sorted(fused, key=lambda d: (-fused[d], d))[:k]
        return [Result((d,), self.bm25.texts[(conv.sample_id, d)]) for d in top]


def exchanges(turns: Sequence[Turn]) -> list[list[Turn]]:
    """A session as a live agent adds it: a turn and its reply per add (a speaker's consecutive
    turns are one turn)."""
    out: list[list[Turn]] = []
    speakers: list[str] = []  # the speakers of the exchange being built, in order
    for t in turns:
        if not out or (t.speaker != speakers[-1] and len(speakers) == 2):
            out.append([])
            speakers = []
        if not speakers or t.speaker != speakers[-1]:
            speakers.append(t.speaker)
        out[-1].append(t)
    return out


INGESTS = ("session", "exchange")


class Memlane:
    """The full memlane path as shipped: local service, rule extractor, hybrid search + reranker."""

    name = "memlane"

    def __init__(self, embedder: Any, data_dir: Path, backend: str = "embedded", recipe: str | None = None,
                 name: str | None = None, ingest: str = "session") -> None:
        from ..bootstrap import build_local
        from ..config import Settings
        from ..services import stores

        env = {k: v for k, v in os.environ.items()
               if k in ("MEMLANE_OPENSEARCH_URL", "MEMLANE_OPENSEARCH_SIGV4", "AWS_REGION")} \
            if backend == "opensearch" else {}
        settings = Settings.from_env(env=env, data_dir=data_dir, index=backend, table="sqlite")
        if ingest not in INGESTS:
            raise ValueError(f"ingest must be one of {INGESTS}")
        self.name = name or ("memlane" if ingest == "session" else f"memlane-{ingest}")
        self.recipe, self.ingest = recipe, ingest
        self.service = build_local(settings, embedder=embedder)
        self.deps = self.service.deps
        stores.create(self.deps, name=STORE, description="LoCoMo benchmark")
        self.turn_of: dict[str, str] = {}  # message id → dia_id
        self.failed_tasks = 0
        self.memories = 0
        self.adds = 0

    def prepare(self, conv: Conversation) -> None:
        from ..services import ingest

        request_ids = []
        for n, when, turns in conv.sessions:
            for part in ([turns] if self.ingest == "session" else exchanges(turns)):
                if not part:
                    continue
                messages = [{"role": "user", "name": t.speaker, "content": t.content, "created_at": when}
                            for t in part]
                task = ingest.add(self.deps, STORE, scope=self.scope(conv, n), messages=messages)
                self.turn_of.update(zip(task.message_ids, (t.dia_id for t in part)))
                request_ids.append(task.request_id)
        self.adds += len(request_ids)
        self.service.drain(timeout=600)
        for rid in request_ids:
            task = self.deps.repo.locate_task(STORE, rid)
            if task.status != "SUCCEEDED":
                self.failed_tasks += 1
            self.memories += len(task.memory_ids)

    @staticmethod
    def scope(conv: Conversation, session: int | None = None) -> dict[str, str]:
        scope = {"app_id": APP, "tenant_id": conv.sample_id}
        if session is not None:
            scope["run_id"] = f"session-{session}"
        return scope

    def search(self, conv: Conversation, query: str, k: int) -> list[Result]:
        from ..services.search import search

        hits = search(self.deps, STORE, query=query, scope=self.scope(conv), top_k=k, recipe=self.recipe)
        return [Result(tuple(metrics.map_evidence(h.memory.evidence, self.turn_of)), h.memory.text) for h in hits]

    def close(self) -> None:
        self.service.close()


# -- evaluation ----------------------------------------------------------------------------------
@dataclass
class Scores:
    overall: metrics.Accumulator = field(default_factory=metrics.Accumulator)
    by_category: dict[int, metrics.Accumulator] = field(default_factory=lambda: defaultdict(metrics.Accumulator))
    latencies: list[float] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.overall.means())
        out["questions"] = self.overall.n
        out["by_category"] = {str(c): {"name": CATEGORY_NAMES.get(c, str(c)), "questions": a.n, **a.means()}
                              for c, a in sorted(self.by_category.items())}
        out["latency_ms"] = {"p50": round(metrics.percentile(self.latencies, 50), 2),
                             "p95": round(metrics.percentile(self.latencies, 95), 2),
                             "mean": round(sum(self.latencies) / max(len(self.latencies), 1), 2)}
        return out


def question_metrics(results: Sequence[Result], evidence: Sequence[str]) -> dict[str, float]:
    covers = [r.turns for r in results]
    values = {f"recall@{k}": metrics.recall_at(covers, evidence, k) for k in KS}
    values["all_hit@10"] = metrics.all_hit_at(covers, evidence, 10)
    values[f"recall@{BUDGET}tok"] = metrics.recall_within_tokens(covers, [r.text for r in results], evidence,
                                                                 BUDGET)
    return values


def evaluate(convs: list[Conversation], methods: list[Method], progress: Progress | None = None,
             ) -> dict[str, Scores]:
    scores = {m.name: Scores() for m in methods}
    for conv in convs:
        for m in methods:
            if progress:
                progress.update(0, f"{conv.sample_id}: ingest {m.name}")
            m.prepare(conv)
        if progress:
            progress.update(len(conv.turns), f"{conv.sample_id}: questions")
        for q in conv.questions:
            for m in methods:
                t0 = time.perf_counter()
                results = m.search(conv, q.text, FETCH_K)
                elapsed = (time.perf_counter() - t0) * 1000
                values = question_metrics(results, q.evidence)
                s = scores[m.name]
                s.latencies.append(elapsed)
                s.by_category[q.category].add(values)
                if q.category in HEADLINE:
                    s.overall.add(values)
            if progress:
                progress.update(1, f"{conv.sample_id}: questions")
    return scores


def format_report(report: dict[str, Any]) -> str:
    methods = report["methods"]
    cols = ["recall@1", "recall@5", "recall@10", "recall@20", "all_hit@10", f"recall@{BUDGET}tok"]
    rows = [[name, *(m.get(c, 0.0) for c in cols), m["latency_ms"]["p50"], m["latency_ms"]["p95"]]
            for name, m in methods.items()]
    counts = report["question_counts"]
    out = [f"LoCoMo {report['dataset']}: {counts['headline']} questions in categories 1-4 "
           f"({counts['adversarial']} adversarial apart), embedder {report['embedder']}, {report['backend']} index",
           "", table(["method", "R@1", "R@5", "R@10", "R@20", "all@10", f"R@{BUDGET}tok", "p50 ms", "p95 ms"], rows),
           "", "by category (R@10 / all@10 / R@1000tok):"]
    cats = sorted({c for m in methods.values() for c in m["by_category"]}, key=int)
    crow = []
    for name, m in methods.items():
        cells = []
        for c in cats:
            v = m["by_category"].get(c)
            cells.append(f"{v['recall@10']:.3f} / {v['all_hit@10']:.3f} / {v[f'recall@{BUDGET}tok']:.3f}"
                         if v else "-")
        crow.append([name, *cells])
    out.append(table(["method", *(f"{c} {CATEGORY_NAMES.get(int(c), '')} (n={methods[next(iter(methods))]['by_category'].get(c, {}).get('questions', 0)})" for c in cats)], crow))
    return "\n".join(out)


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    convs = load(args.data, args.limit_conversations)
    embedder = minilm()
    if args.embed_cache:
        embedder = CachedEmbedder(embedder, Path(args.embed_cache))
    embedder.embed(["warm up"])  # load the model before anything is timed
    tmp = tempfile.TemporaryDirectory(prefix="memlane-bench-") if not args.data_dir else None
    data_dir = Path(args.data_dir) if args.data_dir else Path(tmp.name)  # type: ignore[union-attr]
    bm25, vector = BM25Turns(), VectorTurns(embedder)
    ours = [Memlane(embedder, data_dir / ("memlane" if mode == "session" else f"memlane-{mode}"),
                    backend=args.backend, ingest=mode)
            for mode in _ingests(args.ingest)]
    methods: list[Method] = [*ours, bm25, vector, RRFTurns(bm25, vector)]
    if args.methods:
        wanted = set(args.methods.split(","))
        methods = [m for m in methods if m.name in wanted]
    # One unit per ingested turn and per question: a rough but steady ETA.
    progress = Progress(sum(len(c.questions) + len(c.turns) for c in convs), "starting")
    try:
        scores = evaluate(convs, methods, progress)
    finally:
        progress.close()
        for m in ours:
            m.close()
        if tmp:
            tmp.cleanup()
    counts = defaultdict(int)
    for c in convs:
        for q in c.questions:
            counts[q.category] += 1
    report = {
        "dataset": Path(args.data).name,
        "questions": sum(counts.values()),
        "question_counts": {"headline": sum(counts[c] for c in HEADLINE), "adversarial": counts.get(5, 0),
                      "by_category": {str(k): v for k, v in sorted(counts.items())},
                      "skipped_no_evidence": sum(c.no_evidence for c in convs),
                      "malformed_evidence_ids": sum(c.malformed_evidence for c in convs)},
        "conversations": [c.sample_id for c in convs],
        "turns": sum(len(c.turns) for c in convs),
        "embedder": embedder.name,
        "backend": args.backend,
        "token_counting": f"ceil({metrics.TOKENS_PER_WORD} x whitespace words)",
        "fetch_k": FETCH_K,
        "methods": {name: s.report() for name, s in scores.items()},
        # per memlane method (ingest mode): "memlane" (whole sessions), "memlane-exchange"
        **{m.name: {"ingest": m.ingest, "adds": m.adds, "memories": m.memories, "failed_tasks": m.failed_tasks}
           for m in ours},
        "machine": {**machine(), "loadavg_1m_end": round(os.getloadavg()[0], 2)},
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    return report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=Path(os.environ.get("MEMLANE_LOCOMO", "locomo-dev.json")),
                   help="LoCoMo JSON file (original format)")
    p.add_argument("--json", dest="json_out", type=Path, help="write the full report here")
    p.add_argument("--backend", choices=["embedded", "opensearch"], default="embedded")
    p.add_argument("--limit-conversations", type=int, default=None)
    p.add_argument("--methods", help="comma-separated subset of memlane,memlane-exchange,bm25,vector,rrf")
    p.add_argument("--ingest", default="session",
                   help="comma-separated: session (one add per session), exchange (one add per turn and its "
                        "reply, method memlane-exchange); 'session,exchange' measures both in one run")
    p.add_argument("--data-dir", help="keep memlane's data here instead of a temporary directory")
    p.add_argument("--embed-cache", help=argparse.SUPPRESS)  # development aid; never for published latency


def _ingests(value: str) -> list[str]:
    modes = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not modes or any(m not in INGESTS for m in modes):
        raise SystemExit(f"error: --ingest takes a comma-separated list of {', '.join(INGESTS)}")
    return modes


def main(args: argparse.Namespace) -> int:
    if not Path(args.data).is_file():
        print(f"error: no LoCoMo data at {args.data} (pass --data PATH)", file=sys.stderr)
        return 2
    report = run(args)
    print(format_report(report))
    made = ", ".join(f"{name}: {report[name]['memories']} memories from {report[name]['adds']} adds"
                     for name in report["methods"] if name.startswith("memlane"))
    print(f"\n{report['turns']} turns ({made}), "
          f"{report['question_counts']['malformed_evidence_ids']} malformed evidence ids skipped, "
          f"{report['question_counts']['skipped_no_evidence']} questions without usable evidence; "
          f"{report['elapsed_s']} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0
