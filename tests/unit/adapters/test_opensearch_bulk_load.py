"""The OpenSearch bulk loader without an engine: a fake client that throttles (429), holds requests
open to count how many are in flight, and records the index settings it is told to change.
(tests/integration/test_opensearch_bulk_load.py runs it against the real engine.)"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from memlane.adapters.opensearch.documents import document_id
from memlane.adapters.opensearch.index import OpenSearchIndex
from memlane.domain.errors import Conflict, DependencyFailed, Forbidden, Retryable
from memlane.domain.models import Memory
from memlane.domain.scope import Scope

NOW = datetime(2024, 1, 1, tzinfo=UTC)


class FakeIndices:
    def __init__(self, log: list[tuple[str, Any]]):
        self.log = log
        self.refresh_interval = "1s"

    def get_mapping(self, index: str, ignore: int | None = None) -> dict[str, Any]:
        return {"mem-s1_v1": {"mappings": {"_meta": {"memlane_prefix": "mem"},  # made by this deployment
                                           "properties": {"embedding": {"dimension": 2}, "record_type": {}}}}}

    def get_settings(self, index: str, name: str | None = None, **_: Any) -> dict[str, Any]:
        return {"mem-s1_v1": {"settings": {"index": {"refresh_interval": self.refresh_interval}}}}

    def put_settings(self, index: str, body: dict[str, Any]) -> None:
        self.refresh_interval = body["index"]["refresh_interval"]
        self.log.append(("put_settings", self.refresh_interval))

    def refresh(self, index: str) -> None:
        self.log.append(("refresh", index))


class FakeClient:
    """Answers each bulk item 201, except the ids listed in `throttle` (429 that many times first)
    and `exists` (409: a create of a document that is there). `hold` keeps every request open until
    `release` is set, so a test can see how many the loader has in flight at once."""

    def __init__(self, *, throttle: dict[str, int] | None = None, exists: set[str] = frozenset(),
                 hold: bool = False):
        self.log: list[tuple[str, Any]] = []
        self.indices = FakeIndices(self.log)
        self.throttle = dict(throttle or {})
        self.exists = exists
        self.hold = hold
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrived = threading.Semaphore(0)
        self.requests: list[tuple[list[str], dict[str, Any]]] = []
        self.ops: set[str] = set()
        self.routings: set[str | None] = set()

    def bulk(self, body: bytes, params: dict[str, Any]) -> dict[str, Any]:
        lines = [json.loads(x) for x in body.decode().splitlines()]
        headers, mids = lines[0::2], [source["memory_id"] for source in lines[1::2]]
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests.append((mids, params))
            self.ops.update(next(iter(h)) for h in headers)
            self.routings.update(next(iter(h.values())).get("routing") for h in headers)
        self.arrived.release()
        if self.hold:
            assert self.release.wait(10), "the test never released the held requests"
        items = []
        with self.lock:
            for h, mid in zip(headers, mids):
                op, meta = next(iter(h.items()))
                assert meta["_id"] == document_id("app", meta["routing"].split("#")[1], mid)
                if self.throttle.get(mid, 0) > 0:
                    self.throttle[mid] -= 1
                    items.append({op: {"_id": meta["_id"], "status": 429, "error": {"type": "es_rejected_execution_exception"}}})
                elif mid in self.exists:
                    items.append({op: {"_id": meta["_id"], "status": 409, "error": {"type": "version_conflict_engine_exception"}}})
                else:
                    items.append({op: {"_id": meta["_id"], "status": 201}})
            self.in_flight -= 1
        return {"errors": any(next(iter(i.values()))["status"] >= 300 for i in items), "items": items}


def docs(n: int, tenant: str = "t1") -> list[tuple[Memory, list[float]]]:
    scope = Scope(app_id="app", tenant_id=tenant, run_id="r1")
    return [(Memory(memory_id=f"m{i:05d}", scope=scope, text=f"memory {i}", created_at=NOW, updated_at=NOW),
             [1.0, float(i % 7)]) for i in range(n)]


def index(client: FakeClient, sleeps: list[float] | None = None) -> OpenSearchIndex:
    return OpenSearchIndex(client, index_prefix="mem", sleep=(sleeps if sleeps is not None else []).append)  # type: ignore[arg-type]


def test_throttled_items_are_sent_again_after_a_backoff_and_nothing_is_lost():
    client = FakeClient(throttle={"m00003": 2, "m00007": 1})
    sleeps: list[float] = []
    assert index(client, sleeps).bulk_load("s1", docs(10)) == 10
    sent = [mid for ids, _ in client.requests for mid in ids]
    assert sorted(set(sent)) == [f"m{i:05d}" for i in range(10)]
    assert client.requests[1][0] == ["m00003", "m00007"] and client.requests[2][0] == ["m00003"]  # only the 429s again
    assert len(sleeps) == 2  # one backoff before each retry


def test_documents_are_created_routed_by_tenant_and_never_wait_for_a_refresh():
    client = FakeClient()
    index(client).bulk_load("s1", docs(3, tenant="t9"))
    (ids, params), = client.requests
    assert params["refresh"] == "false"
    assert ids == ["m00000", "m00001", "m00002"]
    assert client.routings == {"app#t9"}


def test_the_refresh_interval_is_paused_during_the_load_and_restored_after_with_one_refresh():
    client = FakeClient()
    index(client).bulk_load("s1", docs(1200))
    assert client.log == [("put_settings", "-1"), ("put_settings", "1s"), ("refresh", "mem-s1")]


def test_the_refresh_interval_is_restored_when_the_load_fails():
    client = FakeClient(throttle={"m00001": 99})
    with pytest.raises(Retryable):
        index(client).bulk_load("s1", docs(3))
    assert client.log[0] == ("put_settings", "-1") and ("put_settings", "1s") in client.log
    assert client.indices.refresh_interval == "1s"


def test_no_more_than_in_flight_requests_are_outstanding():
    client = FakeClient(hold=True)
    loader = index(client)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(loader.bulk_load("s1", docs(2500), in_flight=2,
                                                                            batch_docs=500)))
    worker.start()
    for _ in range(2):  # both permitted requests arrive ...
        assert client.arrived.acquire(timeout=10)
    assert not client.arrived.acquire(timeout=0.3)  # ... and a third is not sent while they are open
    client.release.set()
    worker.join(10)
    assert result == [2500]
    assert client.max_in_flight == 2 and len(client.requests) == 5


def test_a_document_that_already_exists_is_not_overwritten_and_is_reported():
    client = FakeClient(exists={"m00001"})
    with pytest.raises(Conflict) as caught:
        index(client).bulk_load("s1", docs(3))
    assert caught.value.code == "index_id_conflict"
    assert caught.value.details["conflict_ids"] == [document_id("app", "t1", "m00001")]  # whose, not just which id
    assert client.ops == {"create"}  # never "index": an existing document is never replaced


def test_a_refused_document_fails_the_load_by_name():
    client = FakeClient()
    original = client.bulk

    def refuse(body: bytes, params: dict[str, Any]) -> dict[str, Any]:
        resp = original(body, params)
        resp["items"][0] = {"create": {"_id": "m00000", "status": 400, "error": {"type": "mapper_parsing_exception"}}}
        resp["errors"] = True
        return resp

    client.bulk = refuse  # type: ignore[method-assign]
    with pytest.raises(DependencyFailed) as caught:
        index(client).bulk_load("s1", docs(2))
    assert caught.value.code == "index_partial_failure"
    assert caught.value.details["failed_ids"] == [document_id("app", "t1", "m00000")]


def test_a_tenant_bound_index_may_not_bulk_load():
    with pytest.raises(Forbidden):
        index(FakeClient()).for_tenant("s1", "app", "t1").bulk_load("s1", docs(1))


def test_the_store_index_layout_comes_from_the_settings():
    """MEMLANE_OPENSEARCH_SHARDS / _REPLICAS reach the index body (one node at 10⁶: 1 shard, 0 replicas)."""
    from memlane.bootstrap import _index
    from memlane.config import Settings

    settings = Settings.from_env(env={"MEMLANE_OPENSEARCH_URL": "http://127.0.0.1:9", "MEMLANE_INDEX": "opensearch",
                                      "MEMLANE_OPENSEARCH_SHARDS": "1", "MEMLANE_OPENSEARCH_REPLICAS": "0",
                                      "MEMLANE_OPENSEARCH_SIGV4": "false"})
    idx = _index(settings)
    try:
        assert (idx.shards, idx.replicas) == (1, 0)
    finally:
        idx.close()


def test_the_knn_engine_comes_from_the_settings():
    """MEMLANE_OPENSEARCH_KNN_ENGINE reaches the adapter and the mapping it creates and checks stores against
    (scripts/engines.sh writes it for the install it started: lucene where faiss's native library is missing)."""
    from memlane.bootstrap import _index
    from memlane.config import Settings

    settings = Settings.from_env(env={"MEMLANE_OPENSEARCH_URL": "http://127.0.0.1:9", "MEMLANE_INDEX": "opensearch",
                                      "MEMLANE_OPENSEARCH_KNN_ENGINE": "faiss", "MEMLANE_OPENSEARCH_SIGV4": "false"})
    idx = _index(settings)
    real, idx.client = idx.client, FakeClient()  # type: ignore[assignment]
    try:
        described = idx.describe()  # what `memlane schema validate` holds every store index to
        assert described.expected.mappings["properties"]["embedding"]["method"]["engine"] == "faiss"
    finally:
        real.close()


def test_an_unknown_knn_engine_is_refused_at_start_up():
    from memlane.config import Misconfigured, Settings

    with pytest.raises(Misconfigured, match="MEMLANE_OPENSEARCH_KNN_ENGINE='nmslib'"):
        Settings.from_env(env={"MEMLANE_OPENSEARCH_KNN_ENGINE": "nmslib"})
