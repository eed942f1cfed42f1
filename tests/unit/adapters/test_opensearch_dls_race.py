"""A tenant's read that loses the security plugin's DLS race (errors.DLS_RACE) is sent again, without an
engine: a fake client answers the race a given number of times first. The race itself, against the real
engine, is tests/integration/test_opensearch_confinement.py::test_a_tenants_reads_survive_indices_created_and_dropped_meanwhile."""

from __future__ import annotations

from typing import Any

import pytest

from memlane.adapters.opensearch.documents import document_id
from memlane.adapters.opensearch.errors import DLS_RACE
from memlane.adapters.opensearch.index import DLS_RACE_ATTEMPTS, OpenSearchIndex
from memlane.domain.errors import DependencyFailed, Retryable
from memlane.domain.models import RecordType
from memlane.domain.scope import ScopeFilter
from memlane.ports import IndexQuery

RACE = {"status": 500, "error": {"type": "security_exception", "reason": "_opendistro_security_dls_query "
                                 "does not match (SG 900D)", "root_cause": [{"type": "security_exception",
                                 "reason": "_opendistro_security_dls_query does not match (SG 900D)"}]}}
OTHER = {"status": 500, "error": {"type": "security_exception", "reason": "no permissions for [indices:data/read]"}}
HIT = {"hits": {"hits": [{"_id": document_id("app", "t1", "m1"), "_score": 1.0, "_source": {"memory_id": "m1"}}]}}


class Indices:
    def get_mapping(self, index: str, ignore: int | None = None) -> dict[str, Any]:
        return {"mem-s1_v1": {"mappings": {"properties": {"embedding": {"dimension": 2}}}}}


class Client:
    """msearch answers `failure` on every part for the first `failures` calls, then a hit."""

    def __init__(self, failures: int, failure: dict[str, Any] = RACE):
        self.indices = Indices()
        self.failures, self.failure, self.calls = failures, failure, 0

    def msearch(self, body: list[Any], params: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        answer = self.failure if self.calls <= self.failures else HIT
        return {"responses": [answer for _ in range(0, len(body), 2)]}


def _search(client: Client) -> tuple[list[str], list[float]]:
    sleeps: list[float] = []
    index = OpenSearchIndex(client, index_prefix="mem", sleep=sleeps.append)  # type: ignore[arg-type]
    query = IndexQuery(scope=ScopeFilter(app_id="app", tenant_id="t1"), text="zebra", vector=[1.0, 0.0],
                       record_types=(RecordType.MEMORY,))
    found = index.for_tenant("s1", "app", "t1").search("s1", query)
    return [h.memory_id for h in found.keyword], sleeps


def test_a_search_that_lost_the_race_is_sent_again() -> None:
    client = Client(failures=DLS_RACE_ATTEMPTS - 1)
    found, sleeps = _search(client)
    assert found == ["m1"]
    assert client.calls == DLS_RACE_ATTEMPTS and len(sleeps) == DLS_RACE_ATTEMPTS - 1
    assert all(0 <= s < 1 for s in sleeps)


def test_a_race_lost_every_time_is_a_retryable_error_naming_it() -> None:
    client = Client(failures=DLS_RACE_ATTEMPTS)
    with pytest.raises(Retryable) as caught:
        _search(client)
    assert caught.value.code == DLS_RACE and client.calls == DLS_RACE_ATTEMPTS


def test_any_other_security_error_is_not_sent_again() -> None:
    client = Client(failures=1, failure=OTHER)
    with pytest.raises(DependencyFailed) as caught:
        _search(client)
    assert caught.value.code == "index_failed" and client.calls == 1


def test_a_mapping_errors_preview_of_the_value_is_withheld() -> None:
    """A review: OpenSearch's mapping errors quote the field's value — a memory's text — and the reason went on to the
    logs (a 5xx) and to the caller (a 400)."""
    from memlane.adapters.opensearch.errors import from_status

    body = {"error": {"root_cause": [{"type": "mapper_parsing_exception", "reason": (
        "failed to parse field [text] of type [text] in document with id 'm1'. Preview of field's value: "
        "'User lives at 5 Elm St.'")}], "type": "mapper_parsing_exception", "reason": "failed to parse"}}
    for status in (400, 500):
        error = from_status(status, body, "bulk")
        assert "Elm" not in str(error) and "failed to parse field [text]" in str(error)
