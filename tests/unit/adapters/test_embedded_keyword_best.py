"""The embedded index's keyword half reads FTS5's best matches first and checks only those by id
(adapters/local/embedded_index.py `_keyword`): its answer must be exactly the one statement that matches,
filters and ranks every row (`_select` with `match`), whatever the filter lets through, the ties at the
cut and k — and it must not pay for that statement when it does not need it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memlane.adapters.local import embedded_index
from memlane.adapters.local.embedded_index import _KEYWORD_HIT_COLUMNS, EmbeddedIndex
from memlane.adapters.local.index_filter import Filter, match_expression
from memlane.domain.models import Memory, MemoryStatus, RecordType
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery

DIM = 8
T0 = datetime(2024, 1, 1, tzinfo=UTC)
FEW = "apple river garden violin harbour lantern".split()  # a small vocabulary: many equal scores
MANY = [f"w{i}" for i in range(400)]


def text(rng: np.random.Generator, words: list[str]) -> str:
    return " ".join(rng.choice(words, size=int(rng.integers(2, 9))))


@pytest.fixture(scope="module")
def idx(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedIndex:
    """Tenant `big` is most of the file (matched without its token), `small` the rest; each holds
    memories of both statuses, messages and two agents, in words of both vocabularies."""
    index = EmbeddedIndex(tmp_path_factory.mktemp("kw") / "index.db", ann=False)
    index.ensure_store("s", DIM)
    rng = np.random.default_rng(11)
    for tenant, n in (("big", 900), ("small", 150)):
        docs = []
        for i in range(n):
            v = rng.standard_normal(DIM)
            m = Memory(memory_id=f"{tenant}-{int(rng.integers(0, 10**6)):06d}-{i}",
                       scope=Scope(app_id="app", tenant_id=tenant, agent_id="ab"[i % 2], run_id="r"),
                       text=text(rng, FEW if i % 3 else MANY), created_at=T0, updated_at=T0,
                       status=MemoryStatus.SUPERSEDED if i % 7 == 0 else MemoryStatus.ACTIVE,
                       record_type=RecordType.MESSAGE if i % 5 == 0 else RecordType.MEMORY)
            docs.append((m, (v / np.linalg.norm(v)).tolist()))
        index.upsert("s", docs)
    return index


def query(tenant: str, words: str, k: int, **narrow: object) -> IndexQuery:
    return IndexQuery(scope=ScopeFilter(app_id="app", tenant_id=tenant, **narrow.pop("scope", {})), text=words,
                      vector=[1.0] + [0.0] * (DIM - 1), k=k, **narrow)


def one_statement(idx: EmbeddedIndex, q: IndexQuery) -> list[tuple[str, float]]:
    f = Filter.of(q)
    rows = idx._select("s", f, _KEYWORD_HIT_COLUMNS, match=idx._words("s", f, match_expression(q.text) or ""),
                       limit=q.k)
    return [(mid, round(score, 9)) for mid, score, *_ in rows]


def keyword(idx: EmbeddedIndex, q: IndexQuery) -> list[tuple[str, float]]:
    return [(h.memory_id, round(h.score, 9)) for h in idx.search("s", q).keyword]


EVERY_ROW = {"statuses": tuple(MemoryStatus), "record_types": (RecordType.MEMORY, RecordType.MESSAGE)}
FILTERS = [
    {},
    {"statuses": (MemoryStatus.ACTIVE,), "record_types": (RecordType.MEMORY,)},
    {"record_types": (RecordType.MESSAGE,)},
    {"scope": {"agent_ids": ("b",)}, "statuses": (MemoryStatus.SUPERSEDED,)},
]


@pytest.mark.parametrize("tenant", ["big", "small"])
@pytest.mark.parametrize("k", [1, 7, 40, 500])
@pytest.mark.parametrize("narrow", range(len(FILTERS)))
def test_the_best_matches_checked_by_id_are_the_one_statements_answer(idx: EmbeddedIndex, tenant: str, k: int,
                                                                      narrow: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever share the filter lets through (the plan is forced here), and whether it widens or falls back."""
    monkeypatch.setattr(embedded_index, "BEST_FIRST_SHARE", 0.0)
    idx.search("s", query(tenant, "apple", 1, **FILTERS[narrow]))  # the vector half learns the filter's share
    rng = np.random.default_rng(k * 10 + narrow)
    for _ in range(6):
        words = " ".join(rng.choice(FEW + MANY[:30], size=int(rng.integers(1, 4))))
        q = query(tenant, words, k, **FILTERS[narrow])
        assert any("ORDER BY rank LIMIT" in s for s in statements_of(idx, q))
        assert keyword(idx, q) == one_statement(idx, q), words


def statements_of(idx: EmbeddedIndex, q: IndexQuery) -> list[str]:
    seen: list[str] = []
    idx._db.set_trace_callback(seen.append)
    try:
        idx.search("s", q)
    finally:
        idx._db.set_trace_callback(None)
    return seen


def keyword_statements(idx: EmbeddedIndex, q: IndexQuery) -> list[str]:
    # (the vector half's own check reads d.id alone)
    return [s for s in statements_of(idx, q) if "MATCH" in s or s.startswith("SELECT d.id, d.memory_id")]


def test_an_open_filter_reads_the_best_matches_and_checks_them_once(idx: EmbeddedIndex) -> None:
    """Words with few equal scores, a filter every row of the tenant passes: FTS5's best few and one check
    by id — not the statement that joins every match to its row (the cost of a keyword search at 10⁵)."""
    q = query("big", " ".join(MANY[:12]), 5, **EVERY_ROW)
    seen = keyword_statements(idx, q)
    assert len(seen) == 2, seen
    assert "ORDER BY rank LIMIT" in seen[0] and "JOIN docs" not in seen[0]
    assert "json_each" in seen[1] and "MATCH" not in seen[1]
    assert keyword(idx, q) == one_statement(idx, q) and len(keyword(idx, q)) == 5


def test_a_filter_dropping_many_rows_matches_in_the_one_statement(idx: EmbeddedIndex) -> None:
    """Memories among as many messages (LoCoMo's threads): ranking every match alone computes BM25 for the
    rows the filter drops, which cost twice the one statement there (docs/benchmarks.md §2)."""
    q = query("big", " ".join(MANY[:12]), 5, record_types=(RecordType.MESSAGE,))
    (seen,) = keyword_statements(idx, q)
    assert "JOIN docs" in seen and "ORDER BY rank LIMIT" not in seen


def test_a_tie_at_the_cut_is_broken_by_memory_id(idx: EmbeddedIndex) -> None:
    """One word of the small vocabulary: many documents score alike; the k kept are those of the
    smallest memory ids among the equal scores, as the one statement orders them."""
    q = query("big", "apple", 10, **EVERY_ROW)
    got = keyword(idx, q)
    assert got == one_statement(idx, q)
    scores = [s for _, s in got]
    assert len(set(scores)) < len(scores)  # the cut falls among equal scores
