"""Deletion that leaves nothing: after deleting a memory, a run or a whole tenant, no route returns
its text, and no file of the data dir holds it (WAL files, free pages and FTS segments included).

Each test writes a unique marker into the tenant's data, reads it back through every route that
could show it, deletes, then checks the routes and the bytes of every file under the data dir.
"""

import json
from dataclasses import replace
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlane.api.app import build_app
from memlane.server import _LambdaContext, http_event
from memlane.domain.scope import Scope
from memlane.services import ingest, stores, summaries

MARKER = "Zqxmarker7731"
# FTS5 stores terms lower case and prefix-compressed against the term before: look for a tail of it.
ON_DISK = re.compile(rb"(?i)marker7731")
APP = "app"
R1 = {"app_id": APP, "tenant_id": "alice", "agent_id": "bot", "run_id": "r1"}
R2 = {**R1, "run_id": "r2"}
BOB = {**R1, "tenant_id": "bob"}
T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)


@pytest.fixture()
def call(deps):
    app = build_app(deps)

    def send(method, path, body=None):
        raw = json.dumps(body).encode() if body is not None else b""
        result = app.resolve(http_event(method, path, {"content-type": "application/json"}, raw, "127.0.0.1"),
                             _LambdaContext())
        return result["statusCode"], json.loads(result["body"]) if result.get("body") else None

    return send


def _add(deps, scope, day, text):
    ingest.add(deps, "demo", scope=scope, sync=True, messages=[
        {"role": "user", "name": "Ann", "content": text, "created_at": T0 + timedelta(days=day)}])


def _dream_and_apply_profile(call, tenant="alice"):
    status, task = call("POST", "/v1/stores/demo/dream", {"scope": {"app_id": APP, "tenant_id": tenant},
                                                          "sync": True})
    assert status == 200, task
    for action in task["actions"]:
        if action["kind"] == "EMIT_PROFILE" and action["profile"]["agent_id"] is None:
            assert call("POST", f"/v1/stores/demo/dream-actions/{action['action_id']}/apply")[0] == 200
    return task


def _everything(call, tenant="alice"):
    """Every route's answer about the tenant, as one text (what a caller could read)."""
    q = f"app_id={APP}&tenant_id={tenant}"
    seen = []
    seen.append(call("POST", "/v1/stores/demo/search", {"query": f"{MARKER} work", "top_k": 50,
                                                       "scope": {"app_id": APP, "tenant_id": tenant}})[1])
    # Messages are searchable records too, from the moment they are added.
    seen.append(call("POST", "/v1/stores/demo/search", {"query": f"{MARKER} work", "top_k": 50,
                                                       "record_types": ["memory", "message", "summary"],
                                                       "scope": {"app_id": APP, "tenant_id": tenant}})[1])
    listed = call("GET", f"/v1/stores/demo/memories?{q}&limit=100")[1]
    seen.append(listed)
    seen += [call("GET", f"/v1/stores/demo/memories/{m['memory_id']}?{q}")[1] for m in listed.get("memories", [])]
    tasks = call("GET", f"/v1/stores/demo/tasks?{q}&limit=100")[1]
    seen.append(tasks)
    seen += [call("GET", f"/v1/stores/demo/tasks/{t['request_id']}")[1] for t in tasks.get("tasks", [])]
    dreams = call("GET", f"/v1/stores/demo/dream-tasks?{q}")[1]
    seen.append(dreams)
    for d in dreams.get("tasks", []):
        seen.append(call("GET", f"/v1/stores/demo/dream-tasks/{d['task_id']}")[1])
        actions = call("GET", f"/v1/stores/demo/dream-tasks/{d['task_id']}/actions")[1]
        seen.append(actions)
        seen += [call("GET", f"/v1/stores/demo/dream-actions/{a['action_id']}")[1]
                 for a in actions.get("actions", [])]
    seen.append(call("GET", f"/v1/stores/demo/profiles/{tenant}?app_id={APP}")[1])
    for run in ("r1", "r2"):
        seen.append(call("GET", f"/v1/stores/demo/messages?{q}&agent_id=bot&run_id={run}")[1])
        seen.append(call("GET", f"/v1/stores/demo/threads/{run}/summary?{q}&agent_id=bot")[1])
    threads = call("GET", f"/v1/stores/demo/threads?{q}")[1]
    seen.append(threads)
    seen += [call("GET", f"/v1/stores/demo/threads/{t['thread_id']}?{q}")[1] for t in threads.get("threads", [])]
    seen.append(call("GET", f"/v1/stores/demo/agents/bot/profile?{q}")[1])
    return json.dumps(seen)


def _copies(call, tenant="alice"):
    """Where the marker was copied before the delete: task outcomes, dream actions, the profile."""
    q = f"app_id={APP}&tenant_id={tenant}"
    tasks = json.dumps(call("GET", f"/v1/stores/demo/tasks?{q}&limit=100")[1])
    dreams = call("GET", f"/v1/stores/demo/dream-tasks?{q}")[1]["tasks"]
    actions = json.dumps([call("GET", f"/v1/stores/demo/dream-tasks/{d['task_id']}/actions")[1] for d in dreams])
    profile = json.dumps(call("GET", f"/v1/stores/demo/profiles/{tenant}?app_id={APP}")[1])
    return {"tasks": MARKER in tasks, "dream_actions": MARKER in actions, "profile": MARKER in profile}


def _files_holding_marker(data_dir: Path) -> list[str]:
    return [str(p.relative_to(data_dir)) for p in sorted(data_dir.rglob("*"))
            if p.is_file() and ON_DISK.search(p.read_bytes())]


@pytest.fixture()
def data_dir(service):
    return Path(service.deps.table.path).parent


def _seed(deps, job):
    stores.create(deps, name="demo")
    _add(deps, R1, 0, f"I work at {job} now.")
    _add(deps, R2, 5, "I live in Denver with my two cats.")
    _add(deps, BOB, 0, "I work at the harbour as a crane operator.")
    return deps


@pytest.fixture()
def seeded(deps):
    return _seed(deps, MARKER)


def test_deleting_a_memory_leaves_no_trace_of_its_text(deps, call, data_dir):
    _seed(deps, "the bakery")
    q = f"app_id={APP}&tenant_id=alice"
    # The marker reaches the memory by an edit: it never was in a message.
    listed = call("GET", f"/v1/stores/demo/memories?{q}")[1]["memories"]
    job = next(m for m in listed if "work" in m["text"])
    status, edited = call("PATCH", f"/v1/stores/demo/memories/{job['memory_id']}",
                          {"app_id": APP, "tenant_id": "alice", "text": f"Ann works at {MARKER}."})
    assert status == 200
    _dream_and_apply_profile(call)
    assert _copies(call) == {"tasks": False, "dream_actions": True, "profile": True}  # the edit's copies
    assert MARKER in _everything(call)
    assert _files_holding_marker(data_dir)

    status, gone = call("DELETE", f"/v1/stores/demo/memories/{job['memory_id']}?{q}")
    assert status == 200 and gone["status"] == "deleted" and "text" not in gone
    assert call("GET", f"/v1/stores/demo/memories/{job['memory_id']}?{q}")[0] == 404
    assert MARKER not in _everything(call)
    assert [m["memory_id"] for m in call("GET", f"/v1/stores/demo/memories?{q}")[1]["memories"]
            if m["memory_id"] == job["memory_id"]] == []
    profile = call("GET", f"/v1/stores/demo/profiles/alice?app_id={APP}")[1]
    assert "employer" not in {a["name"] for a in profile["attributes"]}  # its only evidence is gone
    assert "Denver" in json.dumps(profile["attributes"])  # the rest of the profile stays
    assert _files_holding_marker(data_dir) == []


def test_a_reader_of_the_files_stops_no_one_and_the_deleted_text_leaves_once_it_lets_go(deps, call, data_dir,
                                                                                          monkeypatch):
    """A deletion trial: with an `sqlite3` shell reading table.db, a memory delete held off every writer for ten
    minutes (other tenants' searches and adds timed out), answered 503 although committed, and left the text in the
    write-ahead logs for good. Now the delete and another tenant's requests are answered at once, and the text leaves
    the files in the background once the reader lets go."""
    import sqlite3
    import threading
    import time

    from memlane.adapters.local import compaction

    monkeypatch.setattr(compaction, "RETRY_SECONDS", 0.1, raising=False)  # absent before the fix
    _seed(deps, "the bakery")
    q = f"app_id={APP}&tenant_id=alice"
    status, written = call("POST", "/v1/stores/demo/memories", {"scope": {"app_id": APP, "tenant_id": "alice"},
                                                                "infer": False, "memories": [
                                                                    {"text": f"Ann's PIN is {MARKER}.",
                                                                     "memory_id": "pin"}]})
    assert status in (200, 201), written
    reader = sqlite3.connect(f"file:{data_dir / 'table.db'}?mode=ro", uri=True, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM items").fetchone()  # a snapshot held, as a backup tool holds one
    answered = {}

    def bob():
        started = time.monotonic()
        status, _ = call("POST", "/v1/stores/demo/memories", {"scope": BOB, "text": "Bob likes tea.", "sync": True})
        found = call("POST", "/v1/stores/demo/search", {"query": "crane", "scope": {"app_id": APP,
                                                                                  "tenant_id": "bob"}})
        answered["bob"] = (status, found[0], time.monotonic() - started)

    other = threading.Thread(target=bob)
    started = time.monotonic()
    other.start()
    status, gone = call("DELETE", f"/v1/stores/demo/memories/pin?{q}")
    took = time.monotonic() - started
    other.join(60)
    assert status == 200 and gone["status"] == "deleted" and took < 10
    assert answered["bob"][:2] == (200, 200) and answered["bob"][2] < 10
    reader.execute("COMMIT")
    reader.close()
    deadline = time.monotonic() + 10
    while _files_holding_marker(data_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _files_holding_marker(data_dir) == []


def test_deleting_a_run_leaves_no_trace_of_it(seeded, call, data_dir):
    _dream_and_apply_profile(call)
    assert _copies(call) == {"tasks": True, "dream_actions": True, "profile": True}
    assert MARKER in _everything(call)
    assert _files_holding_marker(data_dir)

    status, deleted = call("DELETE", f"/v1/stores/demo/runs/r1?app_id={APP}&tenant_id=alice&agent_id=bot")
    assert status == 200 and deleted["messages"] == 1 and deleted["memories"] == 1
    assert deleted["tasks_redacted"] == 1 and deleted["profiles_recomputed"] == 1
    assert deleted["dream_actions_redacted"] >= 1
    seen = _everything(call)
    assert MARKER not in seen and "Denver" in seen  # the other run of the tenant stays
    profile = call("GET", f"/v1/stores/demo/profiles/alice?app_id={APP}")[1]
    assert "employer" not in {a["name"] for a in profile["attributes"]}
    assert _files_holding_marker(data_dir) == []


def test_deleting_a_thread_leaves_no_trace_of_it(deps, call, data_dir):
    _seed(deps, "the bakery")
    q = f"app_id={APP}&tenant_id=alice"
    assert call("POST", "/v1/stores/demo/threads", {"thread_id": "t-9", "scope": {"app_id": APP, "tenant_id": "alice",
                                                    "agent_id": "bot"}, "metadata": {"topic": MARKER}})[0] == 201
    _add(deps, {**R1, "run_id": "t-9"}, 7, f"My locker code is {MARKER}.")
    assert call("POST", "/v1/stores/demo/memories", {"scope": {**R1, "run_id": "t-9"}, "infer": False,
                                                     "memories": [{"text": f"Ann's badge says {MARKER}."}]})[0] == 201
    assert MARKER in _everything(call) and _files_holding_marker(data_dir)

    status, deleted = call("DELETE", f"/v1/stores/demo/threads/t-9?{q}")
    assert status == 200 and deleted["messages"] == 1 and deleted["memories"] == 2
    seen = _everything(call)
    assert MARKER not in seen and "Denver" in seen  # the tenant's other threads stay
    assert call("GET", f"/v1/stores/demo/threads/t-9?{q}")[0] == 404
    assert _files_holding_marker(data_dir) == []


def test_deleting_the_only_thread_of_a_speaker_leaves_not_even_their_name_in_a_dream_action(deps, call, data_dir):
    """A deletion trial: the profile a dream emitted lost the deleted statements in its action's copy, but kept its
    subject — the speaker's name, read off those statements."""
    name = "Zqxannika"
    stores.create(deps, name="demo")
    ingest.add(deps, "demo", scope=R1, sync=True, messages=[
        {"role": "user", "name": name, "content": "I work at the harbour bakery.", "created_at": T0}])
    _dream_and_apply_profile(call)
    assert name in _everything(call)

    assert call("DELETE", f"/v1/stores/demo/threads/r1?app_id={APP}&tenant_id=alice&agent_id=bot")[0] == 200

    assert name not in _everything(call)
    assert [p.name for p in data_dir.rglob("*")
            if p.is_file() and name.lower().encode() in p.read_bytes().lower()] == []


def test_deleting_the_statements_that_named_a_speaker_leaves_not_their_name_beside_an_entry_that_does_not(deps, call):
    """A regression trial of the test above: one entry left (a preference that names no one) kept the name."""
    name = "Zqxannika"
    stores.create(deps, name="demo")
    status, written = call("POST", "/v1/stores/demo/memories", {"scope": R1, "infer": False, "memories": [
        {"text": f"{name} works at the harbour bakery."}, {"text": f"{name} lives in Denver."},
        {"text": "Window seats on long flights.", "memory_type": "preference"}]})
    assert status == 201
    _dream_and_apply_profile(call)

    for memory in written["memories"][:2]:
        assert call("DELETE", f"/v1/stores/demo/memories/{memory['memory_id']}?app_id={APP}&tenant_id=alice")[0] == 200

    assert name not in _everything(call)


def test_deleting_the_memory_a_dream_merged_copies_into_deletes_the_copies(deps, call, data_dir):
    """A deletion trial: two memories of one fact, merged by a dream; deleting the one it kept left the other,
    superseded, with the same words — readable by id, by a search with history and in the merge's copy."""
    q = f"app_id={APP}&tenant_id=alice"
    stores.create(deps, name="demo")
    _add(deps, R1, 0, "I live in Denver with my two cats.")
    said = f"Ann's locker code is {MARKER}."
    assert call("POST", "/v1/stores/demo/memories", {"scope": {"app_id": APP, "tenant_id": "alice"}, "infer": False,
                                                     "memories": [{"text": said}, {"text": said}]})[0] == 201
    task = call("POST", "/v1/stores/demo/dream", {"scope": {"app_id": APP, "tenant_id": "alice"}, "sync": True,
                                                  "mode": "safe_auto", "kinds": ["MERGE"]})[1]
    (merge,) = [a for a in task["actions"] if a["kind"] == "MERGE"]
    assert merge["status"] == "applied"
    kept, (copy,) = merge["keep_id"], merge["target_ids"]

    status, gone = call("DELETE", f"/v1/stores/demo/memories/{kept}?{q}")

    assert status == 200 and gone["merged"] == [copy]
    assert call("GET", f"/v1/stores/demo/memories/{copy}?{q}")[0] == 404
    history = call("POST", "/v1/stores/demo/search", {"query": "locker code", "include_superseded": True,
                                                      "scope": {"app_id": APP, "tenant_id": "alice"}})[1]
    assert MARKER not in json.dumps(history)
    seen = _everything(call)
    assert MARKER not in seen and "Denver" in seen
    assert _files_holding_marker(data_dir) == []


def test_a_memory_merged_once_then_superseded_by_an_update_stays_when_its_successor_is_deleted(deps, call):
    """A regression trial of the test above: T merged into x1, x1's thread deleted (T current again), x1 written again
    under its client id and a dream's UPDATE supersedes T by it. Deleting x1 deleted T too, as if still merged —
    but what an update superseded stays superseded (the delete says x1 was wrong)."""
    q = f"app_id={APP}&tenant_id=alice"
    stores.create(deps, name="demo")

    def write(run: str, text: str, memory_id: str | None = None) -> str:
        status, body = call("POST", "/v1/stores/demo/memories", {"scope": {**R1, "run_id": run}, "infer": False,
                            "memories": [{"text": text, **({"memory_id": memory_id} if memory_id else {})}]})
        assert status == 201, body
        return body["memories"][0]["memory_id"]

    def dream(*kinds: str) -> list[dict]:
        task = call("POST", "/v1/stores/demo/dream", {"scope": {"app_id": APP, "tenant_id": "alice"}, "sync": True,
                                                      "mode": "safe_auto", "kinds": list(kinds)})[1]
        return [a for a in task["actions"] if a["kind"] in kinds]

    older = write("r1", "I live in Denver.")
    write("r2", "I live in Denver.", "x1")
    assert [(a["keep_id"], a["target_ids"]) for a in dream("MERGE")] == [("x1", [older])]
    assert call("DELETE", f"/v1/stores/demo/threads/r2?{q}&agent_id=bot")[0] == 200
    write("r3", "I moved to Boston and now live in Boston.", "x1")
    assert [a["target_ids"] for a in dream("UPDATE") if a["status"] == "applied"] == [[older]]

    status, gone = call("DELETE", f"/v1/stores/demo/memories/x1?{q}")

    assert status == 200 and gone["merged"] == []
    status, kept = call("GET", f"/v1/stores/demo/memories/{older}?{q}")
    assert status == 200 and kept["status"] == "superseded"


def test_erasing_a_tenant_leaves_no_trace_of_it(service, seeded, call, data_dir):
    # what the tenant stated of itself and of its agent goes too
    assert call("PUT", "/v1/stores/demo/profiles/alice", {"app_id": APP, "text": f"Ann's alias is {MARKER}."})[0] == 200
    assert call("PUT", "/v1/stores/demo/agents/bot/profile", {"app_id": APP, "tenant_id": "alice",
                                                              "attributes": {"alias": MARKER}})[0] == 200
    _dream_and_apply_profile(call)
    assert MARKER in _everything(call)
    status, erasure = call("POST", "/v1/tenants/erase", {"app_id": APP, "tenant_id": "alice"})
    assert status == 202
    service.drain()
    status, done = call("GET", f"/v1/erasures/{erasure['erasure_id']}")
    assert done["status"] == "SUCCEEDED"
    counts = done["deleted"]["demo"]
    assert counts["messages"] == 2 and counts["memories"] == 2 and counts["tasks"] == 2
    # The index held the tenant's two memories and its two messages.
    assert counts["profiles"] == 3 and counts["dream_tasks"] == 1 and counts["index_documents"] == 4
    assert MARKER not in _everything(call)
    assert "crane" in _everything(call, "bob")  # another tenant untouched
    assert _files_holding_marker(data_dir) == []


def _seed_with_summaries(deps):
    """The seed on a store that summarises every message (none kept out), each run summarised."""
    stores.create(deps, name="demo", summary_keep_recent=0)
    _add(deps, R1, 0, f"I work at {MARKER} now.")
    _add(deps, R2, 5, "I live in Denver with my two cats.")
    _add(deps, BOB, 0, "I work at the harbour as a crane operator.")
    for scope in (R1, R2, BOB):
        tenant = deps.for_tenant("demo", APP, scope["tenant_id"])
        assert summaries.refresh(tenant, "demo", Scope(**scope), force=True).sentences
    return deps


def test_deleting_a_run_deletes_its_summary_from_table_index_and_files(deps, call, data_dir):
    _seed_with_summaries(deps)
    q = f"app_id={APP}&tenant_id=alice&agent_id=bot"
    status, found = call("GET", f"/v1/stores/demo/threads/r1/summary?{q}")
    assert status == 200 and MARKER in found["text"]
    assert summaries.doc_id(Scope(**R1)) in {d.memory_id for d in deps.index.documents("demo")}

    status, deleted = call("DELETE", f"/v1/stores/demo/runs/r1?{q}")
    assert status == 200 and deleted["summaries"] == 1
    status, gone = call("GET", f"/v1/stores/demo/threads/r1/summary?{q}")
    assert status == 404 and gone["error"]["code"] == "thread_not_found"
    assert call("GET", f"/v1/stores/demo/threads/r2/summary?{q}")[0] == 200  # the tenant's other thread stays
    docs = {d.memory_id for d in deps.index.documents("demo")}
    assert summaries.doc_id(Scope(**R1)) not in docs and summaries.doc_id(Scope(**R2)) in docs
    assert MARKER not in _everything(call)
    assert _files_holding_marker(data_dir) == []


def test_erasing_a_tenant_deletes_its_summaries_from_table_index_and_files(service, call, data_dir):
    _seed_with_summaries(service.deps)
    status, erasure = call("POST", "/v1/tenants/erase", {"app_id": APP, "tenant_id": "alice"})
    assert status == 202
    service.drain()
    done = call("GET", f"/v1/erasures/{erasure['erasure_id']}")[1]
    counts = done["deleted"]["demo"]
    # its memories, its messages (searchable records) and its two summaries
    assert counts["summaries"] == 2
    assert counts["index_documents"] == counts["memories"] + counts["messages"] + 2
    docs = {d.memory_id for d in service.deps.index.documents("demo")}
    assert not {summaries.doc_id(Scope(**R1)), summaries.doc_id(Scope(**R2))} & docs
    assert summaries.doc_id(Scope(**BOB)) in docs  # another tenant untouched
    assert call("GET", f"/v1/stores/demo/threads/r1/summary?app_id={APP}&tenant_id=bob&agent_id=bot")[0] == 200
    assert MARKER not in _everything(call)
    assert _files_holding_marker(data_dir) == []


def test_a_memory_delete_that_dies_half_way_can_be_retried_to_the_end(deps, call, monkeypatch):
    from memlane.services import memories, redaction

    _seed(deps, MARKER)
    _dream_and_apply_profile(call)
    job = next(m for m in memories.list_(deps, "demo", scope={"app_id": APP, "tenant_id": "alice"}, limit=50,
                                         cursor=None)[0] if MARKER in m.text)
    real = redaction._rewrite_all

    def dies_at_profiles(deps_, store, app_id, tenant_id, prefix, change):
        if prefix == "PROFILE#":
            raise RuntimeError("crash")
        return real(deps_, store, app_id, tenant_id, prefix, change)

    monkeypatch.setattr(redaction, "_rewrite_all", dies_at_profiles)
    with pytest.raises(RuntimeError):
        memories.delete(deps, "demo", app_id=APP, tenant_id="alice", memory_id=job.memory_id)
    monkeypatch.setattr(redaction, "_rewrite_all", real)
    memories.delete(deps, "demo", app_id=APP, tenant_id="alice", memory_id=job.memory_id)  # the retry
    profile = call("GET", f"/v1/stores/demo/profiles/alice?app_id={APP}")[1]
    assert MARKER not in json.dumps(profile) and "Denver" in json.dumps(profile)


def test_deleting_the_memory_an_update_replaced_clears_the_reason_that_quoted_it(deps, call, data_dir):
    """An UPDATE's outcome says why, quoting both values ('Zqx…' → 'the harbour'): the reason went on
    showing the deleted memory's words after the delete."""
    stores.create(deps, name="demo")
    _add(deps, R1, 0, "I work at the bakery now.")
    q = f"app_id={APP}&tenant_id=alice"
    job = call("GET", f"/v1/stores/demo/memories?{q}")[1]["memories"][0]
    # The marker reaches the memory by an edit, so that no message holds it (messages outlive a memory).
    assert call("PATCH", f"/v1/stores/demo/memories/{job['memory_id']}",
                {"app_id": APP, "tenant_id": "alice", "text": f"Ann works at {MARKER}."})[0] == 200
    _add(deps, R2, 5, "I work at the harbour now.")
    tasks = call("GET", f"/v1/stores/demo/tasks?{q}&limit=100")[1]["tasks"]
    update = next(o for t in tasks for o in t["outcomes"] if o["action"] == "UPDATE")
    assert MARKER in update["reason"] and "harbour" in update["text"]

    assert call("DELETE", f"/v1/stores/demo/memories/{update['target_id']}?{q}")[0] == 200
    assert MARKER not in _everything(call)
    assert _files_holding_marker(data_dir) == []


def test_deleting_a_run_clears_the_metadata_of_its_adds(deps, call, data_dir):
    stores.create(deps, name="demo")
    ingest.add(deps, "demo", scope=R1, sync=True, metadata={"patient": MARKER},
               messages=[{"role": "user", "content": "I am allergic to penicillin.", "created_at": T0}])
    assert _files_holding_marker(data_dir)

    assert call("DELETE", f"/v1/stores/demo/runs/r1?app_id={APP}&tenant_id=alice&agent_id=bot")[0] == 200
    assert MARKER not in _everything(call)
    assert _files_holding_marker(data_dir) == []  # the task item kept the add's metadata


def test_deleting_memories_clears_the_metadata_of_the_dream_actions_copies(deps, call, data_dir):
    """A LangGraph item's value is its memory's metadata: the copies a dream action keeps (before, after,
    undo images) lost their text on delete, not their metadata."""
    stores.create(deps, name="demo")
    q = f"app_id={APP}&tenant_id=alice"
    for key in ("home-1", "home-2"):
        status, _ = call("POST", "/v1/stores/demo/memories", {
            "scope": {"app_id": APP, "tenant_id": "alice"}, "infer": False,
            "memories": [{"text": "Ann lives in Denver.", "memory_id": key, "metadata": {"secret": MARKER}}]})
        assert status == 201
    task = call("POST", "/v1/stores/demo/dream", {"scope": {"app_id": APP, "tenant_id": "alice"}, "sync": True})[1]
    assert any(a["kind"] == "MERGE" for a in task["actions"])
    assert MARKER in json.dumps(call("GET", f"/v1/stores/demo/dream-tasks/{task['task_id']}/actions")[1])

    def readings():  # the copies' readings of their texts (hashes of its words: they go with the words)
        actions = deps.repo.list_actions("demo", APP, "alice", task["task_id"])[0]
        return [m.reading for a in actions for m in a.before] + [e.before.get("reading") for a in actions
                                                                 for e in a.undo if e.memory_id and e.before]
    assert all(readings())
    for key in ("home-1", "home-2"):
        assert call("DELETE", f"/v1/stores/demo/memories/{key}?{q}")[0] == 200
    assert MARKER not in _everything(call)
    assert _files_holding_marker(data_dir) == []
    assert readings() and not any(readings())


def test_deleting_a_store_leaves_nothing_that_a_store_of_its_name_would_show(service, call, data_dir):
    """The purge found a store's tenants in the activity registry, which only adds and memory writes
    filled: a tenant known only by a profile, a created thread or an access policy kept its items, and a
    new store of the same name showed them. And the index's segments kept the dropped documents' words."""
    stores.create(service.deps, name="demo")
    assert call("PUT", "/v1/stores/demo/profiles/carol", {"app_id": APP, "text": f"Carol's alias is {MARKER}.",
                                                          "attributes": {"alias": MARKER}})[0] == 200
    assert call("PUT", "/v1/stores/demo/agents/bot/profile", {"app_id": APP, "tenant_id": "erin",
                                                              "text": f"Call her {MARKER}."})[0] == 200
    assert call("POST", "/v1/stores/demo/threads", {"thread_id": "t1", "metadata": {"topic": MARKER},
                                                    "scope": {"app_id": APP, "tenant_id": "dave", "agent_id": "bot"}})[0] == 201
    assert call("PUT", "/v1/stores/demo/access-policy", {"access_policy": "recall_only", "scope": {
        "app_id": APP, "tenant_id": "frank", "agent_id": "bot", "run_id": f"run-{MARKER}"}})[0] == 200
    _add(service.deps, R1, 0, f"My locker code is {MARKER}.")
    assert _files_holding_marker(data_dir)

    assert call("DELETE", "/v1/stores/demo")[0] in (200, 202, 204)
    service.drain()
    assert call("POST", "/v1/stores", {"name": "demo"})[0] == 201
    assert call("GET", f"/v1/stores/demo/profiles/carol?app_id={APP}")[0] == 404
    assert call("GET", f"/v1/stores/demo/agents/bot/profile?app_id={APP}&tenant_id=erin")[0] == 404
    assert call("GET", f"/v1/stores/demo/threads/t1?app_id={APP}&tenant_id=dave")[0] == 404
    assert call("GET", f"/v1/stores/demo/scopes?app_id={APP}&tenant_id=frank")[1].get("scopes", []) == []
    for tenant in ("alice", "carol", "dave", "erin", "frank"):
        assert MARKER not in _everything(call, tenant)
    assert _files_holding_marker(data_dir) == []


def test_deleting_the_run_of_a_profiles_earlier_value_takes_that_value_out(deps, call, data_dir):
    """A distilled attribute keeps its earlier values ('previous'), but its evidence named only the memory
    of the newest: deleting the older memory neither rebuilt the profile nor redacted the action's copy."""
    deps.settings = replace(deps.settings, consolidate_on_write=False)  # both statements stay active
    town = "Zqxville"  # a place name, which a profile reads as one (the marker's digits are not)
    stores.create(deps, name="demo")
    _add(deps, R1, 0, f"I live in {town}.")
    _add(deps, R2, 30, "I live in Denver.")
    status, task = call("POST", "/v1/stores/demo/dream", {"scope": {"app_id": APP, "tenant_id": "alice"},
                                                          "kinds": ["EMIT_PROFILE"], "sync": True})
    for action in task["actions"]:  # a profile only: both statements stay active, the older one earlier
        assert call("POST", f"/v1/stores/demo/dream-actions/{action['action_id']}/apply")[0] == 200
    profile = deps.repo.get_profile("demo", APP, "alice", None)
    assert [(e.value, e.previous) for e in profile.attributes] == [("Denver", [town])]

    status, deleted = call("DELETE", f"/v1/stores/demo/runs/r1?app_id={APP}&tenant_id=alice&agent_id=bot")
    assert status == 200 and deleted["profiles_recomputed"] >= 1
    assert town not in _everything(call)
    assert [p.name for p in data_dir.rglob("*") if p.is_file() and town.lower().encode() in p.read_bytes().lower()] == []
    assert "Denver" in json.dumps(call("GET", f"/v1/stores/demo/profiles/alice?app_id={APP}")[1])


def test_deleting_a_run_leaves_none_of_its_words_in_a_skill_another_run_holds(deps, call, data_dir):
    """A skill distilled from one request asked in two runs lives in the latest run; its hidden keywords
    were the requests of both: deleting the first run left its words findable in the second's skill."""
    brand = "Zqxrouter8842"  # a model name, close enough in meaning for the two requests to be one skill
    stores.create(deps, name="demo")
    for run, day, ask in (("r1", 1, f"How do I reset my {brand} wifi router?"), ("r2", 3, "How do I reset my wifi router?")):
        ingest.add(deps, "demo", scope={**R1, "run_id": run}, sync=True, messages=[
            {"role": "user", "content": ask, "created_at": T0 + timedelta(days=day)},
            {"role": "assistant", "content": "1. Unplug the router.\n2. Wait thirty seconds.\n3. Plug it back in and "
                                             "wait for the light.",
             "created_at": T0 + timedelta(days=day, seconds=5)},
            {"role": "user", "content": "That worked, thanks!", "created_at": T0 + timedelta(days=day, minutes=1)}])
    task = call("POST", "/v1/stores/demo/dream", {"scope": {"app_id": APP, "tenant_id": "alice"}, "sync": True,
                                                  "kinds": ["EMIT_SKILL"]})[1]
    skills = [a for a in task["actions"] if a["kind"] == "EMIT_SKILL"]
    assert [a["scope"]["run_id"] for a in skills] == ["r2"]
    assert call("POST", f"/v1/stores/demo/dream-actions/{skills[0]['action_id']}/apply")[0] == 200

    assert call("DELETE", f"/v1/stores/demo/runs/r1?app_id={APP}&tenant_id=alice&agent_id=bot")[0] == 200
    found = call("POST", "/v1/stores/demo/search", {"query": brand, "recipe": "keyword",
                                                    "scope": {"app_id": APP, "tenant_id": "alice"}})[1]["results"]
    assert found == []
    assert brand not in _everything(call)
    assert [p.name for p in data_dir.rglob("*") if p.is_file() and b"router8842" in p.read_bytes().lower()] == []


def test_an_edit_indexed_after_a_racing_delete_leaves_no_trace_of_its_text(deps, data_dir, monkeypatch):
    """A trial found a PATCH's new text in the index's files after a DELETE that raced it: the edit indexed after
    the delete had compacted, found its memory gone and took its document back — the bytes stayed in the WAL."""
    from memlane.services import explicit, memories

    stores.create(deps, name="demo")
    explicit.write(deps, "demo", scope={"app_id": APP, "tenant_id": "alice"},
                   memories=[{"text": "I keep bees on my roof.", "memory_id": "bees"}])
    real, fired = deps.index.upsert, []

    def deleted_first(*args, **kwargs):  # the edit is in the table; the delete runs before its index write
        if not fired:
            fired.append(True)
            memories.delete(deps, "demo", app_id=APP, tenant_id="alice", memory_id="bees")
        return real(*args, **kwargs)

    monkeypatch.setattr(deps.index, "upsert", deleted_first)
    memories.update(deps, "demo", app_id=APP, tenant_id="alice", memory_id="bees", text=f"I keep {MARKER} wasps.")
    assert fired
    assert _files_holding_marker(data_dir) == []


def test_an_erasure_and_a_deletion_finished_after_a_crash_rewrite_the_files(service, seeded, call, monkeypatch):
    """A deletion trial (session 30): a thread deletion or an erasure cut short by kill -9 and finished by its job left
    earlier copies of deleted rows in the unused space of live pages, which zeroing freed cells misses. The job that
    finishes a deletion, and every erasure, rewrite the files (tests/unit/test_compaction.py shows what a rewrite
    clears); so does a thread deletion answered in one go (trial A, session 38)."""
    from memlane.services import erase

    asked: list[bool] = []
    for compactor in service.deps.compactors:
        real = compactor.compact
        monkeypatch.setattr(compactor, "compact", lambda *, rewrite=False, real=real: asked.append(rewrite) or
                            real(rewrite=rewrite))
    assert call("DELETE", f"/v1/stores/demo/runs/r2?app_id={APP}&tenant_id=alice&agent_id=bot")[0] == 200
    assert asked and all(asked)  # a thread's deletion answered in one go is rewritten too (trial A, session 38)

    asked.clear()

    def dies(*args, **kwargs):
        raise RuntimeError("killed after the registry entry went")

    monkeypatch.setattr(erase, "clear_run", dies)
    soon = replace(seeded, settings=replace(seeded.settings, sync_retry_delay=0.2))
    with pytest.raises(RuntimeError):
        erase.delete_run(soon, "demo", scope=R1)
    monkeypatch.undo()
    for compactor in service.deps.compactors:  # undone with the rest: spy again
        real = compactor.compact
        monkeypatch.setattr(compactor, "compact", lambda *, rewrite=False, real=real: asked.append(rewrite) or
                            real(rewrite=rewrite))
    service.drain()  # the clear_run job finishes it
    assert asked and all(asked)

    asked.clear()
    status, erasure = call("POST", "/v1/tenants/erase", {"app_id": APP, "tenant_id": "alice"})
    assert status == 202
    service.drain()
    assert call("GET", f"/v1/erasures/{erasure['erasure_id']}")[1]["status"] == "SUCCEEDED"
    assert asked and all(asked)

