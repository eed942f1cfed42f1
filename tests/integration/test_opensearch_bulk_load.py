"""Bulk loads against the real node (small data): what a large fill relies on — the refresh paused and
restored, every document routed to its tenant and searchable after, nothing replaced — and the
rebuild (`memlane schema recreate`) filling its new index the same way."""

from __future__ import annotations

import pytest

from memlane.adapters.opensearch.documents import alias_name, document_id, index_name
from memlane.adapters.opensearch.index import OpenSearchIndex
from memlane.domain.errors import Conflict
from memlane.domain.schema import differences
from tests.contract.test_index_contract import DIM, embed, mem, search

pytestmark = pytest.mark.integration


def refresh_interval(idx: OpenSearchIndex, index: str) -> str | None:
    found = idx.client.indices.get_settings(index=index, name="index.refresh_interval")
    return next(iter(found.values()))["settings"].get("index", {}).get("refresh_interval")


def test_a_bulk_load_is_searchable_per_tenant_after_and_the_index_is_as_it_was(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    tenants = ["t1", "t2", "t3"]
    docs = [(m, embed(m.text)) for t in tenants
            for m in (mem(f"{t}-{j:04d}", f"zebra {t} note {j}", tenant=t) for j in range(400))]
    assert os_index.bulk_load("s1", iter(docs), in_flight=2, batch_docs=150) == 1200

    alias = alias_name(os_index.prefix, "s1")
    assert refresh_interval(os_index, alias) == "1s"  # restored as memory-index.json sets it
    assert not differences(os_index.describe())
    for t in tenants:
        assert os_index.client.count(index=alias, body={"query": {"term": {"tenant_id": t}}})["count"] == 400
        hits = search(os_index.for_tenant("s1", "app", t), "s1", f"zebra {t} note 7", tenant=t)
        assert hits.keyword and all(h.memory_id.startswith(f"{t}-") for h in hits.keyword + hits.vector)


def test_a_bulk_load_never_replaces_a_document_already_there(os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    mine = mem("m1", "the original text", tenant="t1")
    os_index.bulk_load("s1", [(mine, embed(mine.text))])
    again = mem("m1", "a later text under the same id", tenant="t1")
    with pytest.raises(Conflict) as caught:
        os_index.bulk_load("s1", [(again, embed(again.text)), (mem("m2", "new"), embed("new"))])
    assert caught.value.details["conflict_ids"] == [document_id("app", "t1", "m1")]  # whose, not only which id
    alias = alias_name(os_index.prefix, "s1")
    assert search(os_index.for_tenant("s1", "app", "t1"), "s1", "original").keyword[0].memory_id == "m1"
    assert not search(os_index.for_tenant("s1", "app", "t1"), "s1", "later").keyword  # not replaced
    assert os_index.client.count(index=alias)["count"] == 2  # the rest of the load went in
    assert refresh_interval(os_index, alias) == "1s"


def test_a_rebuild_fills_its_new_index_with_the_refresh_paused_and_restores_it_before_the_swap(
        os_index: OpenSearchIndex) -> None:
    os_index.ensure_store("s1", DIM)
    new = index_name(os_index.prefix, "s1", 2)
    with os_index.rebuilding("s1", DIM) as target:
        assert target.refresh == "false"  # no write of the fill waits for a refresh
        assert refresh_interval(os_index, new) == "-1"
        for batch in range(3):
            target.upsert("s1", [(m, embed(m.text)) for m in (mem(f"m{batch}-{j}", f"yak {batch} {j}")
                                                              for j in range(50))])
    assert refresh_interval(os_index, new) == "1s"
    assert not differences(os_index.describe())
    assert os_index.client.count(index=alias_name(os_index.prefix, "s1"))["count"] == 150
