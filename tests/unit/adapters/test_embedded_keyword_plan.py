"""The embedded index's keyword half: when the FTS5 scan is narrowed by the tenant token
(adapters/local/embedded_index.py `_narrows`). BM25 counts every row holding each phrase of the MATCH,
the token too, so narrowing costs a pass over the tenant's rows: worth it for a tenant among many, a
loss for a tenant that is most of the file. Either plan must give the same hits, and only the tenant's."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memlane.adapters.local import embedded_index
from memlane.adapters.local.embedded_index import EmbeddedIndex
from memlane.domain.models import Memory
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery

DIM = 16
T0 = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = "apple river garden violin harbour lantern meadow copper".split()


def store(tmp_path: Path, big: int = 300, small: int = 30) -> EmbeddedIndex:
    """Tenant `big` holds most of the file, tenant `small` the rest; both use the same words."""
    idx = EmbeddedIndex(tmp_path / "index.db", ann=False)
    idx.ensure_store("s", DIM)
    rng = np.random.default_rng(3)
    for tenant, n in (("big", big), ("small", small)):
        x = rng.standard_normal((n, DIM)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        docs = []
        for i in range(n):
            text = " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 2 + i % 5))
            m = Memory(memory_id=f"{tenant}-{i:04d}", scope=Scope(app_id="app", tenant_id=tenant), text=text,
                       created_at=T0, updated_at=T0)
            docs.append((m, x[i].tolist()))
        idx.upsert("s", docs)
    return idx


def search(idx: EmbeddedIndex, tenant: str, text: str = "apple violin meadow") -> tuple[list, list[str]]:
    """The keyword hits of a hybrid search, and the MATCH statements it ran."""
    statements: list[str] = []
    idx._db.set_trace_callback(statements.append)
    try:
        q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id=tenant), text=text, vector=[1.0] + [0.0] * (DIM - 1),
                       k=20)
        hits = idx.search("s", q).keyword
    finally:
        idx._db.set_trace_callback(None)
    return [(h.memory_id, round(h.score, 9)) for h in hits], [s for s in statements if "MATCH" in s]


def test_a_tenant_that_is_most_of_the_file_is_matched_without_its_token(tmp_path: Path) -> None:
    idx = store(tmp_path)
    search(idx, "big")  # the first search loads the tenant's matrix: its size is known from then on
    _, statements = search(idx, "big")
    assert statements and not any("tkey :" in s for s in statements), statements


def test_a_tenant_among_others_is_matched_with_its_token(tmp_path: Path) -> None:
    idx = store(tmp_path)
    search(idx, "small")
    _, statements = search(idx, "small")
    assert statements and all("tkey :" in s for s in statements), statements


@pytest.mark.parametrize("tenant", ["big", "small"])
def test_both_plans_give_the_same_hits_and_only_the_tenants(tmp_path: Path, tenant: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    idx = store(tmp_path)
    search(idx, tenant)
    plans = {}
    for share, token in ((0.0, False), (2.0, True)):  # 0: never narrow; 2: always narrow
        monkeypatch.setattr(embedded_index, "TOKEN_MAX_SHARE", share)
        hits, statements = search(idx, tenant)
        assert statements and all(("tkey :" in s) is token for s in statements)
        plans[token] = hits
    assert plans[True] == plans[False] and len(plans[True]) == 20
    assert all(mid.startswith(f"{tenant}-") for mid, _ in plans[True])


def test_concurrent_searches_of_both_plans_each_get_only_their_tenants_hits(tmp_path: Path) -> None:
    """The plan is chosen per search from shared state (the tenant's cached matrix): two tenants searched at
    once from several threads, one on each plan, each gets exactly its own hits, as when searched alone."""
    from concurrent.futures import ThreadPoolExecutor

    idx = store(tmp_path)
    alone = {t: search(idx, t)[0] for t in ("big", "small")}  # also loads each tenant's matrix

    def one(tenant: str) -> tuple[str, list]:
        q = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id=tenant), text="apple violin meadow",
                       vector=[1.0] + [0.0] * (DIM - 1), k=20)
        return tenant, [(h.memory_id, round(h.score, 9)) for h in idx.search("s", q).keyword]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, ["big", "small"] * 40))
    assert all(hits == alone[tenant] for tenant, hits in results)
