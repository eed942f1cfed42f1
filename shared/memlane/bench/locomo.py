"""LoCoMo retrieval benchmark: turn-level evidence recall of memlane's search against plain baselines.

Each conversation is ingested into its own tenant through the real service path (store create →
``ingest.add`` per session → the local worker's extract → index), then every question is asked
through ``memlane.services.search.search``. A memory covers the dialog turns it cites as evidence
(its evidence message ids mapped back to the ``dia_id`` they were sent as). The baselines search
the turns directly (the list below).

With ``--ingest exchange`` (method ``memlane-exchange``) each add carries one exchange — a turn and
its reply, as a live agent writes — instead of a whole session; extraction then sees the earlier
turns of the run only as context (services/extract.py). ``--ingest session,exchange`` measures both
in one run.

- ``bm25``   BM25 with FTS5's analyzer (porter unicode61) and formula, k1 and b free, over
             "Speaker (date): text" rows — the speaker and session day memlane's extractor puts in a
             memory's hidden keywords — the query's words OR-ed, stop words dropped or kept.
- ``vector`` exact cosine over the same rows embedded with the same MiniLM model.
- ``rrf``    weighted reciprocal rank fusion of those two lists (k and weights free).
- ``mem0``   Mem0 as a peer, only with ``--methods mem0`` (bench/peers.py).

Every method's free parameters are chosen by one grid procedure (bench/tuning.py): in sample, and
held out over two halves of the conversations (the reported figures). Metrics per question
(categories 1–4 averaged as the headline; 5 = adversarial, reported apart): recall within 500 /
1,000 / 2,000 tokens of returned text by the real tokenizer (the headline), within 5 / 10 / 20 turns
returned (a result citing two turns spends two), recall@1/5/10/20, all_hit@10, the older
recall@1000tok (1.3 × words), each with 95% bootstrap intervals (bench/stats.py) over questions and
over conversations, memlane paired against the best baseline; latency p50/p95 of the search call at
each method's default. The JSON records where it came from (bench/provenance.py) and
``memlane bench report`` turns it into docs/benchmarks.md's tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from ..domain.language import STOP_WORDS
from . import answers, metrics, provenance, stats, tuning
from .common import CachedEmbedder, Progress, machine, minilm, table

STORE = "locomo"
APP = "locomo"
FETCH_K = 100  # results asked per question (search's maximum): enough for 2,000 tokens of turns
# The API's default top_k: each question's search is timed a second time at it, as most callers ask — a search of
# FETCH_K reranks and returns more, and reads more cosines by id (those the vector list did not reach).
LATENCY_K = 10
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
    answer: str | None = None  # the gold answer (adversarial questions, category 5, have none)


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
            gold = qa.get("answer")
            c.questions.append(Question(str(qa["question"]), int(qa["category"]), tuple(evidence),
                                        None if gold is None else str(gold)))
        out.append(c)
    return out


# -- methods -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Result:
    turns: tuple[str, ...]  # the dialog turns this result covers
    text: str  # the text it returns (what an agent would put in its prompt)


Params = dict[str, Any]


class Method(Protocol):
    name: str
    grid: list[Params]  # its free parameters' grid; the first point is its default

    def prepare(self, conv: Conversation) -> None: ...

    def search(self, conv: Conversation, query: str, k: int, params: Params | None = None) -> list[Result]: ...


def raw_text(turn: Turn) -> str:
    return f"{turn.speaker}: {turn.content}"


def said_on(when: datetime) -> str:
    """The session day as memlane's rule extractor writes it into a memory's hidden keywords
    (extractors/rules.py ``_said_on``): '8 May 2023'."""
    return f"{when.day} {when:%B %Y}"


def dated_text(turn: Turn) -> str:
    """A baseline row: what memlane's extractor sees that the raw turn lacks — the speaker and the
    day the session was said."""
    return f"{turn.speaker} ({said_on(turn.created_at)}): {turn.content}"


# What a baseline indexes; each returns the raw "Speaker: text" (a memory likewise returns its text,
# its date and speaker keywords stay hidden).
ROWS = {"dated": dated_text, "raw": raw_text}


def key(params: Params) -> str:
    return json.dumps(params, sort_keys=True)


class Fts5Tokens:
    """Tokens exactly as SQLite FTS5's ``porter unicode61`` (memlane's embedded index analyzer) makes them."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE VIRTUAL TABLE tok USING fts5(body, tokenize='porter unicode61')")
        self.db.execute("CREATE VIRTUAL TABLE tok_i USING fts5vocab(tok, instance)")

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        self.db.executemany("INSERT INTO tok (rowid, body) VALUES (?, ?)", enumerate(texts, start=1))
        out: list[list[str]] = [[] for _ in texts]
        for term, doc in self.db.execute("SELECT term, doc FROM tok_i ORDER BY doc, offset"):
            out[doc - 1].append(term)
        self.db.execute("DELETE FROM tok")
        return out


BM25_DEFAULT: Params = {"rows": "dated", "k1": 1.2, "b": 0.75, "stop_words": True}  # FTS5's k1, b
BM25_GRID: list[Params] = [BM25_DEFAULT] + [
    p for p in ({"rows": r, "k1": k1, "b": b, "stop_words": sw} for r in ROWS for sw in (True, False)
                for k1 in (0.6, 0.9, 1.2, 1.5, 2.0) for b in (0.25, 0.5, 0.75, 1.0)) if p != BM25_DEFAULT]


class BM25Turns:
    """BM25 over the turn rows with FTS5's analyzer (porter unicode61) and formula, its k1 and b free:
    FTS5 fixes them at 1.2 / 0.75, so the scoring is done here (test: same order as FTS5 at those).
    The query's distinct words are OR-ed, English stop words dropped (or kept: a grid choice)."""

    name = "bm25"
    DEFAULT = BM25_DEFAULT
    grid = BM25_GRID

    def __init__(self) -> None:
        self.tokens = Fts5Tokens()
        # (conversation, rows) → dia ids, row lengths, postings term → (row indexes, term frequencies)
        self.index: dict[tuple[str, str], tuple[list[str], np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]] = {}
        self.texts: dict[tuple[str, str], str] = {}
        self._queries: dict[tuple[str, bool], list[str]] = {}

    def prepare(self, conv: Conversation) -> None:
        turns = conv.turns
        self.texts.update({(conv.sample_id, t.dia_id): raw_text(t) for t in turns})
        for rows, render in ROWS.items():
            docs = self.tokens([render(t) for t in turns])
            postings: dict[str, dict[int, int]] = defaultdict(dict)
            for i, doc in enumerate(docs):
                for term in doc:
                    postings[term][i] = postings[term].get(i, 0) + 1
            self.index[(conv.sample_id, rows)] = (
                [t.dia_id for t in turns], np.array([len(d) for d in docs], dtype=float),
                {t: (np.fromiter(p.keys(), dtype=np.int64), np.fromiter(p.values(), dtype=float))
                 for t, p in postings.items()})

    def query_terms(self, query: str, stop_words: bool) -> list[str]:
        found = self._queries.get((query, stop_words))
        if found is None:
            words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query)))
            if stop_words:
                words = [w for w in words if w not in STOP_WORDS] or words
            found = list(dict.fromkeys(t for ts in self.tokens(words) for t in ts)) if words else []
            self._queries[(query, stop_words)] = found
        return found

    def ranked(self, conv: Conversation, query: str, k: int, params: Params | None = None) -> list[str]:
        p = params or self.DEFAULT
        ids, lengths, postings = self.index[(conv.sample_id, p["rows"])]
        n, avg = len(ids), float(lengths.mean()) if len(ids) else 1.0
        scores = np.zeros(n)
        matched = np.zeros(n, dtype=bool)
        k1, b = p["k1"], p["b"]
        for term in self.query_terms(query, p["stop_words"]):
            if term not in postings:
                continue
            rows, tf = postings[term]
            idf = max(math.log((n - len(rows) + 0.5) / (len(rows) + 0.5)), 1e-6)  # FTS5's floor
            scores[rows] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[rows] / avg))
            matched[rows] = True
        hits = np.flatnonzero(matched)
        order = hits[np.lexsort((hits, -scores[hits]))][:k]
        return [ids[i] for i in order]

    def text(self, conv: Conversation, dia: str) -> str:
        return self.texts[(conv.sample_id, dia)]

    def search(self, conv: Conversation, query: str, k: int, params: Params | None = None) -> list[Result]:
        return [Result((d,), self.text(conv, d)) for d in self.ranked(conv, query, k, params)]


class VectorTurns:
    """Exact cosine over the turn rows, embedded with the same model as memlane."""

    name = "vector"
    DEFAULT: Params = {"rows": "dated"}
    grid: list[Params] = [DEFAULT, {"rows": "raw"}]

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.data: dict[tuple[str, str], tuple[list[str], np.ndarray]] = {}
        self.texts: dict[tuple[str, str], str] = {}
        self._queries: dict[str, np.ndarray] = {}

    def prepare(self, conv: Conversation) -> None:
        turns = conv.turns
        self.texts.update({(conv.sample_id, t.dia_id): raw_text(t) for t in turns})
        for rows, render in ROWS.items():
            matrix = np.asarray(self.embedder.embed([render(t) for t in turns]), dtype=np.float32)
            self.data[(conv.sample_id, rows)] = ([t.dia_id for t in turns], matrix)

    def query_vector(self, query: str, fresh: bool = True) -> np.ndarray:
        """The query's embedding; `fresh` embeds it again (a timed search), else the grid reuses it."""
        if fresh or query not in self._queries:
            self._queries[query] = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        return self._queries[query]

    def ranked(self, conv: Conversation, query: str, k: int, params: Params | None = None,
               fresh: bool = True) -> list[str]:
        ids, matrix = self.data[(conv.sample_id, (params or self.DEFAULT)["rows"])]
        scores = matrix @ self.query_vector(query, fresh)
        return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]

    def text(self, conv: Conversation, dia: str) -> str:
        return self.texts[(conv.sample_id, dia)]

    def search(self, conv: Conversation, query: str, k: int, params: Params | None = None) -> list[Result]:
        return [Result((d,), self.text(conv, d)) for d in self.ranked(conv, query, k, params)]


RRF_CANDIDATES = 100  # per list into fusion, as memlane's recipe
RRF_GRID: list[Params] = [{"k": 60, "w_bm25": 1.0, "w_vector": 1.0}] + [
    p for p in ({"k": k, "w_bm25": wb, "w_vector": wv} for k in (60, 30, 20, 10, 5)
                for wb, wv in ((1.0, 1.0), (1.0, 0.5), (0.5, 1.0), (1.0, 0.25), (0.25, 1.0)))
    if p != {"k": 60, "w_bm25": 1.0, "w_vector": 1.0}]


def fuse(bm25: Sequence[str], vector: Sequence[str], params: Params, k: int) -> list[str]:
    """Weighted reciprocal rank fusion: Σ w / (k + rank), rank from 1; ties by id."""
    fused: dict[str, float] = defaultdict(float)
    for weight, ranked in ((params["w_bm25"], bm25), (params["w_vector"], vector)):
        for rank, d in enumerate(ranked, start=1):
            fused[d] += weight / (params["k"] + rank)
    return sorted(fused, key=lambda d: (-fused[d], d))[:k]


class RRFTurns:
    """Reciprocal rank fusion of the bm25 and vector baselines (each at its own chosen parameters),
    its k and the two weights free."""

    name = "rrf"
    grid = RRF_GRID

    def __init__(self, bm25: BM25Turns, vector: VectorTurns) -> None:
        self.bm25, self.vector = bm25, vector

    def prepare(self, conv: Conversation) -> None:  # shares the other two's indexes
        pass

    def search(self, conv: Conversation, query: str, k: int, params: Params | None = None,
               bm25: Params | None = None, vector: Params | None = None) -> list[Result]:
        top = fuse(self.bm25.ranked(conv, query, RRF_CANDIDATES, bm25),
                   self.vector.ranked(conv, query, RRF_CANDIDATES, vector), params or self.grid[0], k)
        return [Result((d,), self.bm25.text(conv, d)) for d in top]


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


# memlane's one fusion constant, over three points of the grid it was first tuned on (docs/benchmarks.md,
# step 3: each point is a full search per question, the costliest part of the run); its shipped value
# first. Its other constants (context window, quote length) were tuned on this split too and are not
# re-tuned here.
MEMLANE_GRID: list[Params] = [{"rrf_k": k} for k in (10, 60, 20)]


class Memlane:
    """The full memlane path as shipped: local service, rule extractor, hybrid search + reranker."""

    name = "memlane"
    grid = MEMLANE_GRID

    def __init__(self, embedder: Any, data_dir: Path, backend: str = "embedded", recipe: str | None = None,
                 name: str | None = None, ingest: str = "session") -> None:
        from ..bootstrap import build_local
        from ..config import Settings
        from ..services import stores

        env = {k: v for k, v in os.environ.items()
               if k in ("MEMLANE_OPENSEARCH_URL", "MEMLANE_OPENSEARCH_SIGV4", "MEMLANE_OPENSEARCH_INDEX_PREFIX",
                      "MEMLANE_OPENSEARCH_KNN_ENGINE", "AWS_REGION")} \
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

    def search(self, conv: Conversation, query: str, k: int, params: Params | None = None) -> list[Result]:
        from ..services.search import search

        hits = search(self.deps, STORE, query=query, scope=self.scope(conv), top_k=k, recipe=self._recipe(params))
        return [Result(tuple(metrics.map_evidence(h.memory.evidence, self.turn_of)), h.memory.text) for h in hits]

    def card(self, conv: Conversation, query: str, budget: int) -> tuple[str, int]:
        """The context card of the conversation's last thread for `query` (services/context.py, as
        bench/context.py builds it): its text and tokens."""
        from ..services import context

        card = context.build(self.deps, STORE, app_id=APP, tenant_id=conv.sample_id,
                             thread_id=self.scope(conv, conv.sessions[-1][0])["run_id"], query=query,
                             budget_tokens=budget)
        return card.text, card.total

    def _recipe(self, params: Params | None) -> str | None:
        """The shipped recipe with the grid point's rrf_k: a named recipe (search takes recipes by
        name), registered for this process only."""
        from ..policies.ranking import RECIPES

        base = self.recipe or self.deps.settings.default_recipe
        if params is None or RECIPES[base].rrf_k == params["rrf_k"]:
            return self.recipe
        name = f"{base}-bench-rrf{params['rrf_k']}"
        RECIPES.setdefault(name, replace(RECIPES[base], name=name, rrf_k=params["rrf_k"]))
        return name

    def close(self) -> None:
        self.service.close()


# -- evaluation ----------------------------------------------------------------------------------
TURN_BUDGETS = (5, 10, 20)
TOKEN_BUDGETS = (500, 1000, 2000)
OBJECTIVE_BUDGET = 1000
OBJECTIVE = f"recall@{OBJECTIVE_BUDGET}hf"  # what every method's grid is tuned for: the headline figure
SEED = 13
RESAMPLES = 1000


class TokenCounter:
    """Tokens of returned text by the real tokenizer port (MiniLM's WordPiece, adapters/tokenizers/hf.py),
    remembered per text; also the old rule of thumb (1.3 × words) for the legacy column."""

    def __init__(self, tokenizer: Any = None) -> None:
        if tokenizer is None:
            from ..adapters.tokenizers.hf import HFTokenizer

            tokenizer = HFTokenizer()
        self.tokenizer, self.name = tokenizer, tokenizer.name
        self._hf: dict[str, int] = {}
        self._words: dict[str, int] = {}

    def counts(self, texts: Sequence[str]) -> list[int]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._hf]
        if missing:
            self._hf.update(zip(missing, self.tokenizer.count_many(missing)))
        return [self._hf[t] for t in texts]

    def words(self, texts: Sequence[str]) -> list[int]:
        for t in texts:
            if t not in self._words:
                self._words[t] = metrics.tokens(t)
        return [self._words[t] for t in texts]


_COUNTER: TokenCounter | None = None


def question_metrics(results: Sequence[Result], evidence: Sequence[str],
                     counter: TokenCounter | None = None) -> dict[str, float]:
    global _COUNTER
    counter = counter or _COUNTER or (_COUNTER := TokenCounter())
    covers = [r.turns for r in results]
    texts = [r.text for r in results]
    values = {f"recall@{k}": metrics.recall_at(covers, evidence, k) for k in KS}
    values["all_hit@10"] = metrics.all_hit_at(covers, evidence, 10)
    values[f"recall@{BUDGET}tok"] = metrics.recall_within_counts(covers, counter.words(texts), evidence, BUDGET)
    for n in TURN_BUDGETS:
        values[f"recall@{n}turns"] = metrics.recall_within_turns(covers, evidence, n)
    counts = counter.counts(texts)
    for n in TOKEN_BUDGETS:
        values[f"recall@{n}hf"] = metrics.recall_within_counts(covers, counts, evidence, n)
    return values


@dataclass
class Collected:
    """What every method returned for every question: at its default (timed) and at each grid point."""

    questions: list[tuple[str, Question]] = field(default_factory=list)
    runs: dict[str, dict[str, list[list[Result]]]] = field(default_factory=dict)  # method → point → per question
    grids: dict[str, list[Params]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    latencies_default_k: dict[str, list[float]] = field(default_factory=dict)  # at LATENCY_K
    texts: dict[tuple[str, str], str] = field(default_factory=dict)  # (conversation, dia) → returned text
    rrf: bool = False


def evaluate(convs: list[Conversation], methods: list[Method], progress: Progress | None = None,
             rrf: tuple[BM25Turns, VectorTurns] | None = None) -> Collected:
    """Ingest each conversation into every method, then ask every question: once at each method's
    default, timed, then (untimed) at every other point of its grid. `rrf`: also time the fusion of
    these two (its grid is fused afterwards from their lists; they are evaluated too)."""
    if rrf:
        methods = [*methods, *(b for b in rrf if b not in methods)]
    out = Collected(grids={m.name: m.grid for m in methods}, rrf=rrf is not None)
    timed: list[Any] = [*methods, RRFTurns(*rrf)] if rrf else list(methods)
    for m in methods:
        out.runs[m.name] = {key(p): [] for p in m.grid}
    for m in timed:
        out.latencies[m.name], out.latencies_default_k[m.name] = [], []
    for conv in convs:
        for m in methods:
            if progress:
                progress.update(0, f"{conv.sample_id}: ingest {m.name}")
            m.prepare(conv)
        if progress:
            progress.update(len(conv.turns), f"{conv.sample_id}: questions")
        for t in conv.turns:
            out.texts[(conv.sample_id, t.dia_id)] = raw_text(t)
        for q in conv.questions:
            out.questions.append((conv.sample_id, q))
            for m in timed:
                t0 = time.perf_counter()
                results = m.search(conv, q.text, FETCH_K)
                out.latencies[m.name].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                m.search(conv, q.text, LATENCY_K)
                out.latencies_default_k[m.name].append((time.perf_counter() - t0) * 1000)
                if m.name in out.runs:
                    out.runs[m.name][key(m.grid[0])].append(results)
            for m in methods:
                for p in m.grid[1:]:
                    out.runs[m.name][key(p)].append(m.search(conv, q.text, FETCH_K, p))
            if progress:
                progress.update(1, f"{conv.sample_id}: questions")
    return out


def _recall_keys(values: dict[str, float]) -> list[str]:
    return [k for k in values if k.startswith("recall@")]


@dataclass
class Chosen:
    """Every method's grid points scored, and the parameters chosen for each (in sample and per fold)."""

    values: dict[str, "Points"]
    choices: dict[str, tuning.CrossValidation]

    def held_out(self, name: str) -> list[list[Result]]:
        """What the method returned for each question at the parameters chosen without that question."""
        return [self.values[name].runs[p][i] for i, p in enumerate(self.choices[name].per_question)]


def choose(collected: Collected, counter: TokenCounter) -> Chosen:
    """Score every grid point and choose each method's parameters (tuning.py: in sample and held out)."""
    conv_of = [c for c, _ in collected.questions]
    headline = [q.category in HEADLINE for _, q in collected.questions]
    evidence = [q.evidence for _, q in collected.questions]

    def score(runs: dict[str, list[list[Result]]]) -> Points:
        return Points(runs, evidence, counter)

    values: dict[str, Points] = {name: score(runs) for name, runs in collected.runs.items()}
    choices = {name: tuning.cross_validate(points.objectives(), conv_of, headline)
               for name, points in values.items()}
    if collected.rrf:
        values["rrf"], choices["rrf"] = _rrf(collected, choices, conv_of, headline, score)
        collected.grids["rrf"] = RRF_GRID
    return Chosen(values, choices)


def summarize(collected: Collected, seed: int = SEED, counter: TokenCounter | None = None,
              resamples: int = RESAMPLES, chosen: Chosen | None = None) -> dict[str, Any]:
    """Report held-out figures with bootstrap intervals and the paired comparison, at the parameters
    `choose` picks (or picked: `chosen`)."""
    counter = counter or TokenCounter()
    conv_of = [c for c, _ in collected.questions]
    categories = [q.category for _, q in collected.questions]
    headline = [c in HEADLINE for c in categories]
    chosen = chosen or choose(collected, counter)
    values, choices = chosen.values, chosen.choices

    held: dict[str, list[dict[str, float]]] = {
        name: [values[name][p][i] for i, p in enumerate(cv.per_question)] for name, cv in choices.items()}
    keep = [i for i, h in enumerate(headline) if h]
    groups = [conv_of[i] for i in keep]
    methods: dict[str, Any] = {}
    for name, cv in choices.items():
        per_q = held[name]
        in_sample = values[name][cv.in_sample]
        rep: dict[str, Any] = _means([per_q[i] for i in keep])
        rep["questions"] = len(keep)
        rep["view"] = "held_out" if cv.held_out else "in_sample"
        rep["in_sample"] = _means([in_sample[i] for i in keep])
        rep["by_category"] = {str(c): {"name": CATEGORY_NAMES.get(c, str(c)),
                                       "questions": sum(1 for x in categories if x == c),
                                       **_means([per_q[i] for i, x in enumerate(categories) if x == c])}
                              for c in sorted(set(categories))}
        rep["intervals"] = {
            k: {"by_question": stats.bootstrap_mean([per_q[i][k] for i in keep], seed=seed,
                                                    resamples=resamples).as_dict(),
                "by_conversation": stats.bootstrap_mean([per_q[i][k] for i in keep], groups=groups, seed=seed,
                                                        resamples=resamples).as_dict()}
            for k in _recall_keys(per_q[keep[0]])} if keep else {}
        grid = collected.grids[name]
        rep["params"] = {"default": grid[0], "in_sample": json.loads(cv.in_sample),
                         "folds": [{"tuned_on": list(f.tuned_on), "chosen": json.loads(f.chosen),
                                    "scored_on": list(f.scored_on)} for f in cv.folds],
                         "grid": [{"params": json.loads(p), "objective_in_sample": round(
                             sum(vs[i] for i in keep) / max(len(keep), 1), 4)}
                             for p, vs in values[name].objectives().items()
                             if not p.startswith("fold")]}  # rrf's per-fold copies are not grid points
        lat = collected.latencies.get(name, [])
        rep["latency_ms"] = {**metrics.p50_p95(lat), "mean": round(sum(lat) / max(len(lat), 1), 2)}
        rep[f"latency_top{LATENCY_K}_ms"] = metrics.p50_p95(collected.latencies_default_k.get(name, []))
        methods[name] = rep
    ours = [n for n in methods if n.startswith("memlane")]
    baselines = [n for n in methods if not n.startswith("memlane")]
    paired: dict[str, Any] = {}
    if ours and baselines and keep:
        best = max(baselines, key=lambda n: methods[n][OBJECTIVE])
        paired = {"method": ours[0], "baseline": best, "chosen_by": OBJECTIVE, "difference": {
            k: {"by_question": stats.paired_difference([held[ours[0]][i][k] for i in keep],
                                                       [held[best][i][k] for i in keep], seed=seed,
                                                       resamples=resamples).as_dict(),
                "by_conversation": stats.paired_difference([held[ours[0]][i][k] for i in keep],
                                                           [held[best][i][k] for i in keep], groups=groups,
                                                           seed=seed, resamples=resamples).as_dict()}
            for k in _recall_keys(held[ours[0]][keep[0]])}}
    return {"methods": methods, "paired": paired, "objective": OBJECTIVE, "seed": seed, "resamples": resamples,
            "tokenizer": counter.name,
            "folds": [{"tune": list(a), "score": list(b)} for a, b in tuning.folds(conv_of)],
            "per_question": {"conversation": [conv_of[i] for i in keep], "category": [categories[i] for i in keep],
                             "held_out": {n: {k: [round(held[n][i][k], 4) for i in keep]
                                              for k in _recall_keys(held[n][keep[0]])} for n in methods}
                             if keep else {}}}


def answer_quality(grader: answers.Grader, collected: Collected, chosen: Chosen, convs: Sequence[Conversation],
                   ours: Sequence[Memlane], sources: Sequence[str], progress: Progress | None = None) -> dict[str, Any]:
    """Every method's answers to the questions with a gold answer in categories 1-4 (bench/answers.py):
    from its held-out results (`results`), and from memlane's context card (`card`, methods <name>+card)."""
    by_id = {c.sample_id: c for c in convs}
    held = {name: chosen.held_out(name) for name in chosen.values} if "results" in sources else {}
    scores: dict[str, answers.AnswerScores] = {}
    for i, (conv, q) in enumerate(collected.questions):
        if q.category not in HEADLINE or q.answer is None:
            continue
        if "results" in sources:
            for name, per_question in held.items():
                texts = [r.text for r in per_question[i]]
                scores.setdefault(name, answers.AnswerScores()).add(
                    q.category, grader.grade(q.text, q.answer, q.category, texts))
        if "card" in sources:
            for m in ours:
                text, used = m.card(by_id[conv], q.text, grader.budget)
                scores.setdefault(f"{m.name}+card", answers.AnswerScores()).add(
                    q.category, grader.grade_context(q.text, q.answer, q.category, text, used))
        if progress:
            progress.update(1, f"{conv}: answers")
    return {name: s.report(CATEGORY_NAMES, HEADLINE) for name, s in scores.items()}


class Points:
    """A method's grid points, scored lazily: every point gets its objective (one budget cut per
    question), only the points chosen get all the metrics — scoring all of them for each of bm25's
    80 points took most of a run's summary."""

    def __init__(self, runs: dict[str, list[list[Result]]], evidence: Sequence[Sequence[str]],
                 counter: TokenCounter) -> None:
        self.runs, self.evidence, self.counter = runs, evidence, counter
        self._objectives: dict[str, list[float]] = {}
        self._full: dict[str, list[dict[str, float]]] = {}

    def objectives(self) -> dict[str, list[float]]:
        for point, results in self.runs.items():
            if point not in self._objectives:
                self._objectives[point] = [
                    metrics.recall_within_counts([r.turns for r in res], self.counter.counts([r.text for r in res]),
                                                 e, OBJECTIVE_BUDGET)
                    for res, e in zip(results, self.evidence)]
        return self._objectives

    def __getitem__(self, point: str) -> list[dict[str, float]]:
        if point not in self._full:
            self._full[point] = [question_metrics(r, e, self.counter) for r, e in zip(self.runs[point], self.evidence)]
        return self._full[point]


def _rrf(collected: Collected, choices: dict[str, tuning.CrossValidation], conv_of: list[str],
         headline: list[bool], score: Any) -> tuple[Points, tuning.CrossValidation]:
    """RRF's grid over the bm25 and vector lists at *their* chosen points: in sample with their
    in-sample choices, and in each fold with what that fold's tuning half chose for them."""
    runs = collected.runs

    def fused(b_point: str, v_point: str) -> dict[str, list[list[Result]]]:
        out = {}
        for p in RRF_GRID:
            res = []
            for i, (conv, _) in enumerate(collected.questions):
                ids = fuse([r.turns[0] for r in runs["bm25"][b_point][i]],
                           [r.turns[0] for r in runs["vector"][v_point][i]], p, FETCH_K)
                res.append([Result((d,), collected.texts[(conv, d)]) for d in ids])
            out[key(p)] = res
        return out

    b, v = choices["bm25"], choices["vector"]
    base = fused(b.in_sample, v.in_sample)
    base_scores = score(base)
    in_sample = tuning.choose(base_scores.objectives(), headline)
    cv = tuning.CrossValidation(in_sample=in_sample, per_question=[in_sample] * len(conv_of))
    all_runs = dict(base)  # in-sample points keep their plain keys
    for n, (bf, vf) in enumerate(zip(b.folds, v.folds)):
        same = (bf.chosen, vf.chosen) == (b.in_sample, v.in_sample)
        fold_runs = base if same else fused(bf.chosen, vf.chosen)
        tune = set(bf.tuned_on)
        chosen = tuning.choose((base_scores if same else score(fold_runs)).objectives(),
                               [h and c in tune for h, c in zip(headline, conv_of)])
        fold_key = f"fold{n}:{chosen}"
        all_runs[fold_key] = fold_runs[chosen]
        cv.folds.append(tuning.Fold(bf.tuned_on, chosen, bf.scored_on))
        for i, c in enumerate(conv_of):
            if c in set(bf.scored_on):
                cv.per_question[i] = fold_key
    return score(all_runs), cv


def _means(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]}


def format_report(report: dict[str, Any]) -> str:
    methods = report["methods"]
    budgets = [f"recall@{n}hf" for n in TOKEN_BUDGETS] + [f"recall@{n}turns" for n in TURN_BUDGETS]
    cols = budgets + ["recall@10", "all_hit@10"]

    def ci(m: dict[str, Any], k: str) -> str:
        iv = m["intervals"].get(k)
        return f"{m[k]:.3f} [{iv['by_question']['low']:.3f}, {iv['by_question']['high']:.3f}]" if iv else f"{m[k]:.3f}"

    top = f"latency_top{LATENCY_K}_ms"  # absent from reports made before it was measured
    rows = [[name, *(ci(m, c) if c.startswith("recall") else m.get(c, 0.0) for c in cols),
             m["latency_ms"]["p50"], m["latency_ms"]["p95"], m.get(top, {}).get("p50"), m.get(top, {}).get("p95")]
            for name, m in methods.items()]
    counts = report["question_counts"]
    view = next(iter(methods.values()))["view"] if methods else "in_sample"
    out = [f"LoCoMo {report['dataset']}: {counts['headline']} questions in categories 1-4 "
           f"({counts['adversarial']} adversarial apart), embedder {report['embedder']}, {report['backend']} index; "
           f"tokens by {report['tokenizer']}; figures "
           + ("held out (parameters chosen on the other half of the conversations)" if view == "held_out"
              else "in sample (parameters chosen on the same questions)")
           + ", 95% bootstrap over questions",
           "", table(["method", *(f"R@{c.split('@')[1]}" for c in budgets), "R@10", "all@10",
                      f"p50 ms (top_k {FETCH_K})", "p95 ms", f"p50 ms (top_k {LATENCY_K})", "p95 ms"], rows)]
    out += ["", "95% intervals resampling whole conversations:",
            table(["method", *(f"R@{c.split('@')[1]}" for c in budgets[:3]), "R@10"],
                  [[name, *(f"[{m['intervals'][c]['by_conversation']['low']:.3f}, "
                            f"{m['intervals'][c]['by_conversation']['high']:.3f}]" for c in (*budgets[:3], "recall@10"))]
                   for name, m in methods.items() if m["intervals"]])]
    out += ["", "chosen parameters (objective " + report["objective"] + "; in sample | per fold tuned on → chosen):"]
    for name, m in methods.items():
        folds = "; ".join(f"{','.join(f['tuned_on'])} → {json.dumps(f['chosen'], sort_keys=True)}"
                          for f in m["params"]["folds"])
        out.append(f"  {name}: {json.dumps(m['params']['in_sample'], sort_keys=True)} | {folds or '-'}")
    paired = report.get("paired")
    if paired:
        out += ["", f"{paired['method']} − {paired['baseline']} (best baseline by {paired['chosen_by']}), paired:"]
        out.append(table(["metric", "difference", "95% by question", "95% by conversation"],
                         [[k, d["by_question"]["mean"], f"[{d['by_question']['low']:.3f}, {d['by_question']['high']:.3f}]",
                           f"[{d['by_conversation']['low']:.3f}, {d['by_conversation']['high']:.3f}]"]
                          for k, d in paired["difference"].items()]))
    out += ["", "legacy (parameters as chosen; R@1000tok = 1.3 x words), in-sample figures:",
            table(["method", "R@1", "R@5", "R@10", "R@20", "R@1000tok", "R@1000hf"],
                  [[name, *(m["in_sample"].get(c, 0.0) for c in ("recall@1", "recall@5", "recall@10", "recall@20",
                                                                   f"recall@{BUDGET}tok", OBJECTIVE))]
                   for name, m in methods.items()])]
    if report.get("answers"):
        out += ["", format_answers(report["answers"])]
    out += ["", "by category, held out (R@10 / R@1000hf):"]
    cats = sorted({c for m in methods.values() for c in m["by_category"]}, key=int)
    first = next(iter(methods.values()))
    out.append(table(["method", *(f"{c} {CATEGORY_NAMES.get(int(c), '')} (n={first['by_category'][c]['questions']})"
                                  for c in cats)],
                     [[name, *(f"{m['by_category'][c]['recall@10']:.3f} / {m['by_category'][c][OBJECTIVE]:.3f}"
                               if c in m["by_category"] else "-" for c in cats)] for name, m in methods.items()]))
    return "\n".join(out)


def format_answers(setup: dict[str, Any]) -> str:
    methods = setup["methods"]
    out = [f"answer quality ({setup['answer_model']}, judge {setup['judge_model'] or 'none'}; "
           f"context {setup['budget_tokens']} tokens, from {', '.join(setup['from'])}; categories 1-4):",
           table(["method", "judge accuracy", "F1", "context tokens", "answer p50 ms", "answer p95 ms", "judge p50 ms"],
                 [[name, "-" if m["judge_accuracy"] is None else f"{m['judge_accuracy']:.3f}", f"{m['f1']:.3f}",
                   m["context_tokens_mean"], m["answer_ms"]["p50"], m["answer_ms"]["p95"], m["judge_ms"]["p50"]]
                  for name, m in methods.items()])]
    cats = sorted({c for m in methods.values() for c in m["by_category"]}, key=int)
    out += ["", "answers by category (judge accuracy / F1):",
            table(["method", *(f"{c} {CATEGORY_NAMES.get(int(c), '')}" for c in cats)],
                  [[name, *(f"{'-' if (x := m['by_category'][c])['judge_accuracy'] is None else format(x['judge_accuracy'], '.3f')}"
                            f" / {x['f1']:.3f}" if c in m["by_category"] else "-" for c in cats)]
                   for name, m in methods.items()])]
    return "\n".join(out)


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    origin = provenance.collect(seed=args.seed)  # at the start: the tree as it was when the run began
    convs = load(args.data, args.limit_conversations)
    embedder = minilm()
    if args.embed_cache:
        embedder = CachedEmbedder(embedder, Path(args.embed_cache))
    embedder.embed(["warm up"])  # load the model before anything is timed
    counter = TokenCounter()
    tmp = tempfile.TemporaryDirectory(prefix="memlane-bench-") if not args.data_dir else None
    data_dir = Path(args.data_dir) if args.data_dir else Path(tmp.name)  # type: ignore[union-attr]
    bm25, vector = BM25Turns(), VectorTurns(embedder)
    recipe = _candidates_recipe(args.candidates)
    ours = [Memlane(embedder, data_dir / ("memlane" if mode == "session" else f"memlane-{mode}"),
                    backend=args.backend, ingest=mode, recipe=recipe)
            for mode in _ingests(args.ingest)]
    wanted = set(args.methods.split(",")) if args.methods else None
    methods: list[Method] = [m for m in (*ours, bm25, vector) if wanted is None or m.name in wanted]
    if wanted and "mem0" in wanted:  # a peer, only when asked: an optional extra
        from .peers import Mem0Turns

        methods.append(Mem0Turns(embedder, data_dir / "mem0"))
    with_rrf = wanted is None or "rrf" in wanted
    grader = answers.grader_from_args(args, lambda text: counter.counts([text])[0])
    # One unit per ingested turn and per question (and per answered question): a rough but steady ETA.
    graded = sum(1 for c in convs for q in c.questions if q.category in HEADLINE and q.answer is not None)
    progress = Progress(sum(len(c.questions) + len(c.turns) for c in convs) + (graded if grader else 0), "starting")
    quality: dict[str, Any] = {}
    try:
        collected = evaluate(convs, methods, progress, rrf=(bm25, vector) if with_rrf else None)
        chosen = choose(collected, counter)
        if grader:  # before the services close: a card is built from memlane's store
            quality = {**answers.setup(args), "results_at": "each method's held-out parameters",
                       "methods": answer_quality(grader, collected, chosen, convs,
                                                 [m for m in ours if m in methods],
                                                 answers.sources(args.answer_from) or [], progress)}
    finally:
        progress.close()
        for m in ours:
            m.close()
        if tmp:
            tmp.cleanup()
    summary = summarize(collected, seed=args.seed, counter=counter, chosen=chosen)
    counts: dict[int, int] = defaultdict(int)
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
        "token_counting": {"hf": counter.name, "tok": f"ceil({metrics.TOKENS_PER_WORD} x whitespace words)"},
        "fetch_k": FETCH_K,
        "recipe": recipe or "shipped",
        "rows": {"baselines index": "Speaker (D Month YYYY): text", "baselines return": "Speaker: text",
                 "memlane returns": "the memory's text (speaker, date and context words in hidden keywords)"},
        **summary,
        **({"answers": quality} if quality else {}),
        # per memlane method (ingest mode): "memlane" (whole sessions), "memlane-exchange"
        **{m.name: {"ingest": m.ingest, "adds": m.adds, "memories": m.memories, "failed_tasks": m.failed_tasks}
           for m in ours},
        "machine": {**machine(), "loadavg_1m_end": round(os.getloadavg()[0], 2)},
        "provenance": origin,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    return report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=Path(os.environ.get("MEMLANE_LOCOMO", "locomo-dev.json")),
                   help="LoCoMo JSON file (original format)")
    p.add_argument("--json", dest="json_out", type=Path, help="write the full report here")
    p.add_argument("--backend", choices=["embedded", "opensearch"], default="embedded")
    p.add_argument("--limit-conversations", type=int, default=None)
    p.add_argument("--methods", help="comma-separated subset of memlane,memlane-exchange,bm25,vector,rrf, and "
                        "mem0 (a peer: pip install 'memlane[peers]')")
    p.add_argument("--ingest", default="session",
                   help="comma-separated: session (one add per session), exchange (one add per turn and its "
                        "reply, method memlane-exchange); 'session,exchange' measures both in one run")
    p.add_argument("--data-dir", help="keep memlane's data here instead of a temporary directory")
    p.add_argument("--seed", type=int, default=SEED, help="bootstrap seed (recorded in the JSON)")
    p.add_argument("--candidates", type=int, default=None,
                   help="the recipe's hits per signal into fusion instead of the shipped one")
    p.add_argument("--embed-cache", help=argparse.SUPPRESS)  # development aid; never for published latency
    answers.add_arguments(p)


def _candidates_recipe(candidates: int | None) -> str | None:
    """The shipped recipe with another number of candidates per signal (what a smaller k costs),
    registered for this process only; None: the shipped recipe as it is."""
    from ..policies.ranking import DEFAULT_RECIPE, RECIPES

    if candidates is None:
        return None
    base = RECIPES[DEFAULT_RECIPE]
    name = f"{base.name}-bench-candidates{candidates}"
    RECIPES.setdefault(name, replace(base, name=name, candidates=candidates))
    return name


def _ingests(value: str) -> list[str]:
    modes = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not modes or any(m not in INGESTS for m in modes):
        raise SystemExit(f"error: --ingest takes a comma-separated list of {', '.join(INGESTS)}")
    return modes


def main(args: argparse.Namespace) -> int:
    if not Path(args.data).is_file():
        print(f"error: no LoCoMo data at {args.data} (pass --data PATH)", file=sys.stderr)
        return 2
    wrong = answers.check_arguments(args)
    if wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return 2
    report = run(args)
    if args.json_out:  # first: an hour's run is not lost to a printing error
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    print(format_report(report))
    made = ", ".join(f"{name}: {report[name]['memories']} memories from {report[name]['adds']} adds"
                     for name in report["methods"] if name.startswith("memlane"))
    print(f"\n{report['turns']} turns{f' ({made})' if made else ''}, "
          f"{report['question_counts']['malformed_evidence_ids']} malformed evidence ids skipped, "
          f"{report['question_counts']['skipped_no_evidence']} questions without usable evidence; "
          f"{report['elapsed_s']} s")
    return 0
