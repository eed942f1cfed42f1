"""The `index` fixture: every implementation of the Index port, for the same contract tests.

- ``embedded``: EmbeddedIndex over a SQLite file in tmp_path. Always runs.
- ``opensearch``: OpenSearchIndex against ``MEMLANE_OPENSEARCH_URL`` (integration suite only),
  under a unique index prefix so parallel runs never share indices.

Import the fixture into a test module with ``from tests.contract.index_backends import index``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from memlane.ports import Index

# Every store name the contract tests use: the OpenSearch backend drops them afterwards.
STORES = ("s1", "s2", "s3", "s1x")


def _embedded(tmp_path: Path) -> Iterator[Index]:
    from memlane.adapters.local.embedded_index import EmbeddedIndex

    idx = EmbeddedIndex(tmp_path / "index.sqlite3")
    yield idx
    idx.close()


def _opensearch() -> Iterator[Index]:
    url = os.environ.get("MEMLANE_OPENSEARCH_URL")
    if not url:
        pytest.skip("MEMLANE_OPENSEARCH_URL is not set; the OpenSearch index runs in the integration suite")
    from memlane.adapters.opensearch.index import OpenSearchIndex
    from memlane.adapters.opensearch.tenant_auth import TokenClients

    key = os.environ.get("MEMLANE_OPENSEARCH_TENANT_KEY")  # tenants with their own, engine-confined tokens
    idx: Any = OpenSearchIndex.from_url(url, index_prefix=f"contract-{uuid.uuid4().hex[:10]}",
                                        tenant_clients=TokenClients(url, key) if key else None)
    try:
        yield idx
    finally:
        for store in STORES:
            idx.drop_store(store)
        close = getattr(idx, "close", None)
        if close is not None:
            close()


@pytest.fixture(params=["embedded", pytest.param("opensearch", marks=pytest.mark.integration)])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Index]:
    if request.param == "embedded":
        yield from _embedded(tmp_path)
    else:
        yield from _opensearch()
