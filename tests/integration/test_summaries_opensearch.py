"""A thread summary's document on a real OpenSearch: written by the refresh (mapping, routing, the
tenant's own credentials), found under the thread's scope only, and gone with its run."""

from __future__ import annotations

import dataclasses

import pytest

from memlane.adapters.tokenizers.hf import HFTokenizer
from memlane.domain.models import RecordType
from memlane.domain.scope import Scope, ScopeFilter
from memlane.ports import IndexQuery
from memlane.services import erase, ingest, stores, summaries

pytestmark = pytest.mark.integration

THREAD = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "t1"}


def test_a_summary_document_is_indexed_for_its_tenant_and_deleted_with_its_run(os_deps) -> None:  # type: ignore[no-untyped-def]
    deps = dataclasses.replace(os_deps, tokenizer=HFTokenizer())
    stores.create(deps, name="demo", summary_keep_recent=0)
    ingest.add(deps, "demo", scope=THREAD, messages=[
        {"role": "user", "name": "Ann", "content": "I booked the Porto riverside hotel for 12 June."},
        {"role": "assistant", "content": "Great, the riverside hotel in Porto is confirmed for June 12."}])
    tenant = deps.for_tenant("demo", "app", "u1")
    found = summaries.refresh(tenant, "demo", Scope(**THREAD), force=True)
    assert found is not None and "Porto" in found.text

    def hits(app_tenant) -> list[str]:  # type: ignore[no-untyped-def]
        result = deps.for_tenant("demo", *app_tenant).index.search("demo", IndexQuery(
            scope=ScopeFilter(app_id=app_tenant[0], tenant_id=app_tenant[1]), text="Porto riverside hotel",
            record_types=(RecordType.SUMMARY,)))
        return [h.memory_id for h in result.keyword]

    assert summaries.doc_id(Scope(**THREAD)) in hits(("app", "u1"))  # a summary record, asked for as one
    assert summaries.doc_id(Scope(**THREAD)) not in hits(("app", "u2"))
    assert erase.delete_run(deps, "demo", scope=THREAD)["summaries"] == 1
    assert summaries.doc_id(Scope(**THREAD)) not in hits(("app", "u1"))
