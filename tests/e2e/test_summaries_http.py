"""Thread summaries over HTTP, against a running `memlane serve`: the summary refreshes by itself as a
thread grows, leaves the recent turns out, can be forced (a task), and its settings are validated."""

import time

import pytest

from memlane.client import ApiError, MemlaneClient

from .test_http import raw

pytestmark = pytest.mark.e2e

THREAD = {"app_id": "travel-app", "tenant_id": "alice", "agent_id": "planner", "run_id": "trip-1"}
WHO = {"app_id": "travel-app", "tenant_id": "alice", "agent_id": "planner"}
KEEP = 4


def until(probe, timeout=90.0):
    """Poll `probe` until it returns something truthy (the background worker runs on its own)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def summary_or_none(c):
    try:
        return c.get_summary("demo", "trip-1", **WHO)
    except ApiError as e:
        assert (e.status, e.code) == (404, "summary_not_found")
        assert f"last {KEEP} messages (summary_keep_recent)" in e.message  # why there is none yet
        return None


def test_a_thread_summary_refreshes_by_itself_and_can_be_forced(server):
    c = MemlaneClient(server.url)
    store = c.create_store("demo", summary_trigger_tokens=150, summary_keep_recent=KEEP)
    assert (store["summary_trigger_tokens"], store["summary_keep_recent"]) == (150, KEEP)
    with pytest.raises(ApiError) as before:  # no thread yet: nothing to wait for
        c.get_summary("demo", "trip-1", **WHO)
    assert (before.value.status, before.value.code) == (404, "thread_not_found")
    for i in range(20):
        role = "user" if i % 2 == 0 else "assistant"
        c.add("demo", THREAD, messages=[{"role": role, "content": f"Turn {i}: we compared hotel {i} in Porto "
                                                                  f"at {100 + i} euros a night near the river."}])
    found = until(lambda: summary_or_none(c))
    assert found is not None, "no summary appeared on its own past the trigger"
    ids = [m["message_id"] for m in c.messages("demo", THREAD, limit=50)["messages"]]
    assert len(ids) == 20
    assert found["covered_until"] in ids[:-KEEP] and not set(found["evidence"]) & set(ids[-KEEP:])
    assert found["thread_id"] == "trip-1" and found["origin"] == "extractive"
    assert found["tokens"] > 0 and found["tokenizer"] and found["age_seconds"] >= 0
    assert all(s["evidence"] for s in found["sentences"])

    task = c.refresh_summary("demo", "trip-1", wait=True, **WHO)
    assert (task["status"], task["kind"]) == ("SUCCEEDED", "summarize")
    forced = c.get_summary("demo", "trip-1", **WHO)
    assert forced["covered_until"] == ids[-KEEP - 1] and forced["covered_messages"] == 20 - KEEP
    assert forced["version"] >= found["version"]


def test_summary_errors_are_machine_readable(server):
    c = MemlaneClient(server.url)
    c.create_store("demo")
    status, body = raw(server, "GET", "/v1/stores/demo/threads/nothing-here/summary?app_id=a&tenant_id=t")
    assert status == 404 and body["error"]["code"] == "thread_not_found"
    status, body = raw(server, "GET", "/v1/stores/demo/threads/t1/summary?app_id=a")
    assert status == 400 and body["error"]["field"] == "tenant_id"
    status, body = raw(server, "POST", "/v1/stores/nostore/threads/t1/summary?app_id=a&tenant_id=t")
    assert status == 404 and body["error"]["code"] == "store_not_found"
    for bad in (5, 10**9, "2000", True):
        status, body = raw(server, "POST", "/v1/stores", {"name": "other", "summary_trigger_tokens": bad})
        assert status == 400 and body["error"]["field"].endswith("summary_trigger_tokens"), (bad, body)
    status, body = raw(server, "POST", "/v1/stores", {"name": "other", "summary_keep_recent": -1})
    assert status == 400 and body["error"]["field"].endswith("summary_keep_recent")
