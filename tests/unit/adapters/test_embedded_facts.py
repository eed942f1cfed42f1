"""The rows a search's filter lets through, answered from the tenant's term index (index_terms.TermIndex.facts):
a candidate the graph or BM25 proposes is checked there instead of by another `_select`, when the filter asks
only what the term index read of each row (scope, status, record type). It must answer as `_select` does,
through every kind of write the index follows and after another process's."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memlane.adapters.local import embedded_index as embedded
from memlane.adapters.local.embedded_index import EmbeddedIndex
from memlane.adapters.local.index_filter import Filter
from memlane.domain.models import Memory, MemoryStatus, RecordType
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery

DIM = 4
T0 = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = "apple river garden violin harbour cello".split()


def doc(rng: random.Random, tenant: str, n: int) -> tuple[Memory, list[float]]:
    m = Memory(memory_id=f"m{n}", scope=Scope(app_id="a", tenant_id=tenant, agent_id=rng.choice("gh"),
                                              run_id=rng.choice(["r1", "r2"])),
               text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))), created_at=T0, updated_at=T0,
               status=rng.choice(list(MemoryStatus)), record_type=rng.choice(list(RecordType)),
               metadata={"k": rng.choice([1, 2])})
    return m, [rng.random() + 0.1 for _ in range(DIM)]


def filters(rng: random.Random, tenant: str) -> Filter:
    def some(values: list[str]) -> tuple[str, ...] | None:
        return None if rng.random() < 0.3 else tuple(rng.sample(values, rng.randint(0, len(values))))

    return Filter(scope=ScopeFilter(app_id="a", tenant_id=tenant, agent_ids=some(["g", "h", "x"]),
                                    run_ids=some(["r1", "r2"])),
                  statuses=some([str(s) for s in MemoryStatus]), record_types=some([str(t) for t in RecordType]))


def test_a_filter_on_facts_is_answered_from_the_term_index_as_select_answers(tmp_path: Path) -> None:
    rng = random.Random(3)
    live, other = EmbeddedIndex(tmp_path / "i.db", ann=False), EmbeddedIndex(tmp_path / "i.db", ann=False)
    live.ensure_store("s", DIM)
    answered = 0
    for step in range(200):
        tenant = rng.choice(["t1", "t2"])
        writer = other if rng.random() < 0.1 else live
        if rng.random() < 0.7:  # new ids and edits (status, type, agent, run moved)
            writer.upsert("s", [doc(rng, tenant, rng.randint(0, 40)) for _ in range(rng.randint(1, 4))])
        else:
            writer.delete("s", [f"m{rng.randint(0, 40)}" for _ in range(3)], app_id="a", tenant_id=tenant)
        tenant = rng.choice(["t1", "t2"])
        # A keyword search builds the tenant's term index (or finds it), and checks for the other's writes.
        live.search("s", IndexQuery(scope=ScopeFilter(app_id="a", tenant_id=tenant), text=rng.choice(WORDS),
                                    vector=None, k=5))
        every = [r[0] for r in live._select("s", Filter(scope=ScopeFilter(app_id="a", tenant_id=tenant)), "d.id")]
        ids = np.array(sorted(set(rng.sample(every, min(len(every), 8)) + [999_999])), dtype=np.int64)
        f = filters(rng, tenant)
        with live._lock:
            got = live._allowed("s", f, ids)
            want = live._select("s", f, embedded._CHECK_COLUMNS, within=ids.tolist())
        assert got is not None, step
        assert sorted(got) == sorted(want), (step, f)
        answered += 1
    assert answered == 200
    live.close(), other.close()


@pytest.mark.parametrize("narrow", [{"memory_types": ("fact",)}, {"metadata": {"k": 1}},
                                    {"time_from": "2020-01-01T00:00:00.000000Z"}])
def test_a_filter_on_other_columns_is_left_to_select(tmp_path: Path, narrow: dict) -> None:
    rng = random.Random(1)
    index = EmbeddedIndex(tmp_path / "i.db", ann=False)
    index.ensure_store("s", DIM)
    index.upsert("s", [doc(rng, "t", n) for n in range(20)])
    index.search("s", IndexQuery(scope=ScopeFilter(app_id="a", tenant_id="t"), text="apple", vector=None, k=5))
    f = Filter(scope=ScopeFilter(app_id="a", tenant_id="t"), **narrow)
    assert index._allowed("s", f, np.arange(1, 21, dtype=np.int64)) is None
    index.close()


def test_a_search_checks_its_candidates_without_reading_them_again(tmp_path: Path, monkeypatch) -> None:
    """Both halves' candidates (about 130 each at k 100) cost ~0.3 ms each to read again at 10⁵ documents
    (docs/benchmarks.md §15); with the tenant's term index at hand, a search on scope, status and type reads none."""
    rng = random.Random(2)
    index = EmbeddedIndex(tmp_path / "i.db", ann=False)
    index.ensure_store("s", DIM)
    index.upsert("s", [doc(rng, "t", n) for n in range(60)])
    query = IndexQuery(scope=ScopeFilter(app_id="a", tenant_id="t"), text="apple river", vector=[1.0] * DIM, k=10,
                       statuses=(MemoryStatus.ACTIVE,), record_types=(RecordType.MEMORY,))
    first = index.search("s", query)  # builds the term index
    reads: list[dict] = []
    select = index._select
    monkeypatch.setattr(index, "_select", lambda *a, **kw: reads.append(kw) or select(*a, **kw))
    again = index.search("s", query)
    assert again == first and first.keyword and first.vector
    assert not [kw for kw in reads if kw.get("within") is not None], reads
    index.close()


def rival(i, status=MemoryStatus.ACTIVE) -> Memory:
    return Memory(memory_id=f"m{i}", scope=Scope(app_id="a", tenant_id="t", agent_id="g", run_id="r"),
                  text=f"apple river {i}", created_at=T0, updated_at=T0, status=status)


def test_a_row_another_process_supersedes_while_the_search_runs_is_left_out(tmp_path: Path) -> None:
    """The term index answers for the file as it was when the search began; another process's write after
    that (here, once the vector half has read its candidates) is the file's to decide, as `_select` does."""
    live, other = EmbeddedIndex(tmp_path / "i.db", ann=False), EmbeddedIndex(tmp_path / "i.db", ann=False)
    live.ensure_store("s", 4)
    live.upsert("s", [(rival(i), [1.0, 0.1 * i, 0.0, 0.0]) for i in range(5)])
    q = IndexQuery(scope=ScopeFilter(app_id="a", tenant_id="t"), text="apple", vector=[1.0, 0.0, 0.0, 0.0], k=5,
                   statuses=(MemoryStatus.ACTIVE,), record_types=(RecordType.MEMORY,))
    live.search("s", q)  # the term index is built
    vectors = live._vectors

    def then_another_process_writes(*args):
        out = vectors(*args)
        other.upsert("s", [(rival(0, MemoryStatus.SUPERSEDED), [1.0, 0.0, 0.0, 0.0])])  # m0 superseded
        other.delete("s", ["m1"], app_id="a", tenant_id="t")  # m1 deleted
        return out

    live._vectors = then_another_process_writes
    got = live.search("s", q)
    allowed = {r[0] for r in live._select("s", Filter.of(q), "d.memory_id")}
    assert {h.memory_id for h in got.vector} <= allowed, (got.vector, allowed)
    live.close(), other.close()
