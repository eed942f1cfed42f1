"""Fixtures of the integration suite: real engines started by scripts/engines.sh, nothing mocked.
Each test module marks itself ``pytestmark = pytest.mark.integration``.

Every test gets its own index prefix, so runs (and xdist workers) never share an index; the
indices a test created are deleted after it by name.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

from memlane.ports import Index

if TYPE_CHECKING:
    from memlane.adapters.opensearch.index import OpenSearchIndex


@pytest.fixture(scope="session")
def opensearch_url() -> str:
    url = os.environ.get("MEMLANE_OPENSEARCH_URL")
    if not url:
        pytest.skip("MEMLANE_OPENSEARCH_URL is not set: eval \"$(scripts/engines.sh env)\" first")
    return url


@pytest.fixture()
def index_prefix() -> str:
    return f"it-{uuid.uuid4().hex[:10]}"


@pytest.fixture()
def os_index(opensearch_url: str, index_prefix: str) -> Iterator[OpenSearchIndex]:
    from memlane.adapters.opensearch.index import OpenSearchIndex

    idx = OpenSearchIndex.from_url(opensearch_url, index_prefix=index_prefix, tenant_clients=tenant_clients(opensearch_url))
    yield idx
    drop_prefix(idx.client, index_prefix)
    idx.close()


def tenant_clients(url: str):  # type: ignore[no-untyped-def]
    """Tenants' own tokens when the engine has the security plugin (scripts/engines.sh installs it):
    every tenant-bound call of the integration suite then goes through the engine's confinement."""
    from memlane.adapters.opensearch.tenant_auth import TokenClients

    key = os.environ.get("MEMLANE_OPENSEARCH_TENANT_KEY")
    return TokenClients(url, key) if key else None


def drop_prefix(client, prefix: str) -> None:  # type: ignore[no-untyped-def]
    """Delete the indices of one test's prefix, each by its name (never a wildcard delete)."""
    names = list(client.indices.get(index=f"{prefix}-*", ignore=404, expand_wildcards="all"))
    names = [n for n in names if n.startswith(f"{prefix}-")]
    if names:
        client.indices.delete(index=",".join(names), ignore_unavailable=True)


@pytest.fixture()
def os_deps(tmp_path: Path, minilm, os_index: Index):  # type: ignore[no-untyped-def]
    """The core's dependencies on the embedded table and the real OpenSearch index."""
    from memlane.adapters.clock import SystemClock
    from memlane.adapters.local.durable_queue import DurableQueue
    from memlane.adapters.local.sqlite_table import SqliteTable
    from memlane.extractors.rules import RuleExtractor
    from memlane.services.deps import Deps

    table = SqliteTable(tmp_path / "table.db")
    queue = DurableQueue(tmp_path / "queue.db")
    from memlane.adapters.tokenizers.hf import HFTokenizer

    yield Deps(table=table, queue=queue, index=os_index, embedder=minilm, extractor=RuleExtractor(),
               clock=SystemClock(), tokenizer=HFTokenizer())
    queue.stop()
    table.close()
