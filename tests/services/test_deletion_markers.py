"""A regression trial (session 37): GONE markers now always written (services/memories.py::_gone_marker), even for a SUCCEEDED
job — so a plain user delete of an extracted memory now leaves an item in the tenant's partition."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from memlane.domain.models import TaskStatus
from memlane.repository import tenant_pk
from memlane.services import erase, memories, stores
from tests.services.test_extract_concurrent_deliveries import X, Y
from tests.services.test_extract_retries import APP, TENANT, Counted, say, table_mems


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


def _left(deps):
    return [i["sk"] for i in deps.table.query(tenant_pk("demo", APP, TENANT), limit=1000).items]


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb"])
def test_a_delete_racing_the_tenants_erasure_leaves_no_marker_in_the_erased_partition(request, monkeypatch,
                                                                                        backend):
    """The user deletes a memory of a SUCCEEDED extraction while the tenant's erasure runs: the delete reads the task
    (there), the erasure deletes every item of the tenant, then the delete's transaction deletes the (absent) memory and
    PUTS its GONE marker — unconditionally. The erasure, SUCCEEDED, leaves that item behind for good (locally: no TTL),
    naming the erased request id and message ids. Before the fix no marker was written for a finished job."""
    deps = request.getfixturevalue("demo" if backend == "sqlite" else "dynamo")
    deps.extractor = Counted([X, Y])
    say(deps, "Clara is in Lisbon; cello on Sundays.", day=0, request_id="req-1", sync=True)
    assert deps.repo.find_task("demo", APP, TENANT, "req-1").status == TaskStatus.SUCCEEDED
    clara = next(m for m in table_mems(deps).values() if m.text == X)

    read, go = threading.Event(), threading.Event()
    original = memories._gone_marker

    def gated(d, store, memory):
        marker = original(d, store, memory)
        read.set()
        assert go.wait(60)
        return marker

    monkeypatch.setattr(memories, "_gone_marker", gated)
    errors = []

    def delete():
        try:
            memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=clara.memory_id)
        except Exception as e:  # noqa: BLE001 — a NotFound is an acceptable answer
            errors.append(e)

    t = threading.Thread(target=delete, daemon=True)
    t.start()
    assert read.wait(60)
    erasure = erase.run_erasure(deps, erase.request_erasure(deps, app_id=APP, tenant_id=TENANT,
                                                            principal="ops").erasure_id)
    assert erasure.status == TaskStatus.SUCCEEDED
    go.set()
    t.join(60)
    assert _left(deps) == [], f"the erased tenant's partition still holds {_left(deps)}"


def test_a_deleted_thread_keeps_no_deletion_marker(demo):
    """A user deletes one memory of thread r1 (marker: the request id and r1's message ids), then deletes the thread:
    its messages, memories and task copies go — its markers stay (clear_run lists MSG#/MEM# only). Before the fix a
    SUCCEEDED job's memory left none."""
    from tests.services.test_extract_retries import SC

    deps = demo
    deps.extractor = Counted([X, Y])
    say(deps, "Clara is in Lisbon; cello on Sundays.", day=0, request_id="req-1", sync=True)
    clara = next(m for m in table_mems(deps).values() if m.text == X)
    memories.delete(deps, "demo", app_id=APP, tenant_id=TENANT, memory_id=clara.memory_id)
    erase.delete_run(deps, "demo", scope=SC.as_dict() if hasattr(SC, "as_dict") else dict(SC))
    left = [sk for sk in _left(deps) if sk.startswith("GONE#")]
    assert not left, f"the deleted thread's deletion markers stay: {left}"


def test_the_local_sweep_removes_a_deletion_marker_once_it_expires_as_dynamodbs_ttl_does(service, demo, monkeypatch):
    """A marker expires after memories.GONE_DAYS, when no delivery of its job can come any more. On AWS DynamoDB's TTL
    deletes it; the local table has no TTL of its own, and its markers were kept for ever — one item per memory ever
    deleted, each naming the ids of the messages it rested on (a regression trial)."""
    demo.extractor = Counted([X, Y])
    say(demo, "Clara is in Lisbon; cello on Sundays.", day=0, request_id="req-1", sync=True)
    clara = next(m for m in table_mems(demo).values() if m.text == X)
    memories.delete(demo, "demo", app_id=APP, tenant_id=TENANT, memory_id=clara.memory_id)
    marker = f"GONE#{clara.memory_id}"
    assert marker in _left(demo)
    assert service.sweep().expired == 0 and marker in _left(demo)  # within its time: kept
    later = demo.clock.now() + timedelta(days=memories.GONE_DAYS, seconds=1)
    monkeypatch.setattr(demo.clock, "now", lambda: later)
    report = service.sweep()
    assert marker not in _left(demo) and report.expired >= 1  # with the audit rows past their retention
    assert [sk for sk in _left(demo) if sk.startswith("GONE#")] == []
