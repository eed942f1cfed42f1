"""Issue 15: an accepted add is extracted exactly once in effect, whatever fails; the worker cannot be
stopped by one tenant; a backlog is refused with a clear 429 instead of growing without bound."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest

from memlane.api.app import build_api
from memlane.domain.errors import Overloaded
from memlane.domain.models import TaskStatus
from memlane.repository import tenant_pk
from memlane.server import _LambdaContext, http_event
from memlane.services import erase, ingest, jobs, stores, sweep, task_jobs
from memlane.ports import Job

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
TEXT = "My sister Clara lives in Lisbon and teaches piano."


def items(deps, pk, prefix):
    return deps.table.query(pk, prefix=prefix, limit=1000).items


# -- finding 2: one tenant can stop extraction for everyone ------------------------------------------


def test_a_dead_job_whose_tenant_was_erased_is_tolerated(svc):
    deps = svc.deps
    task = ingest.add(deps, "demo", scope=SCOPE, text=TEXT)
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="u1", principal="admin")
    erase.run_erasure(deps, erasure.erasure_id)
    job = Job(kind="extract", store="demo", request_id=task.request_id)
    jobs.give_up(deps, job, "poison")  # raised NotFound: the queue's failure handler killed the worker
    assert jobs.handle(deps, job) is None  # nothing left to do: dropped, not retried five times


def test_a_job_of_a_deleted_store_is_dropped(svc):
    task = ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    stores.delete(svc.deps, "demo")
    assert jobs.handle(svc.deps, Job(kind="extract", store="demo", request_id=task.request_id)) is None


def test_a_delivery_that_finishes_after_a_later_one_gave_its_job_up_leaves_the_task_succeeded(svc, monkeypatch):
    """A trial of the AWS path (3 of 3): the queue's last delivery gave the job up (FAILED) while the one before it
    still worked; that one then wrote its memories, found the task FAILED and left it so — "failed", with its
    memories current and searchable."""
    deps = svc.deps
    task = ingest.add(deps, "demo", scope=SCOPE, text=TEXT)
    job = Job(kind="extract", store="demo", request_id=task.request_id, app_id="app", tenant_id="u1")
    real = deps.extractor.extract

    def given_up_meanwhile(*args, **kwargs):
        jobs.give_up(deps, job, "gave up after 5 deliveries")
        return real(*args, **kwargs)

    monkeypatch.setattr(deps.extractor, "extract", given_up_meanwhile)
    done = jobs.handle(deps, job)
    stored = deps.repo.get_task("demo", "app", "u1", task.request_id)
    assert done.status == stored.status == TaskStatus.SUCCEEDED and stored.error is None
    assert stored.memory_ids and all(m.status == "active" for m in
                                     deps.repo.get_memories("demo", "app", "u1", stored.memory_ids))


# -- finding 4: accepted but never extracted ----------------------------------------------------------


def test_a_crash_at_the_job_write_leaves_no_task_without_its_job(svc, monkeypatch):
    """The task used to commit first and the job to follow: a crash in between stranded it PENDING."""
    def crash(*args, **kwargs):
        raise RuntimeError("process died here")

    monkeypatch.setattr(svc.queue, "enqueue", crash)
    monkeypatch.setattr(svc.queue, "_insert", crash, raising=False)
    with pytest.raises(RuntimeError):
        ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT, request_id="req-1")
    monkeypatch.undo()
    tasks = items(svc.deps, tenant_pk("demo", "app", "u1"), "TASK#")
    assert [t["request_id"] for t in tasks] == [] or svc.queue.depth() == 1


def test_the_sweeper_requeues_a_task_whose_job_was_lost(svc, monkeypatch):
    """On SQS the job is sent after the commit; a crash in between is repaired by the sweeper."""
    task = ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    svc.queue.db.conn.execute("DELETE FROM jobs")  # the send that never happened
    assert sweep.sweep(svc.deps).requeued == 0  # within the deadline: the add may still be running
    later = svc.deps.clock.now() + timedelta(seconds=svc.deps.settings.task_deadline_seconds + 1)
    monkeypatch.setattr(svc.deps.clock, "now", lambda: later)
    report = sweep.sweep(svc.deps)
    assert (report.requeued, svc.queue.depth()) == (1, 1)
    assert sweep.sweep(svc.deps).requeued == 0  # swept: not again before another deadline
    svc.drain()
    assert svc.deps.repo.locate_task("demo", task.request_id).status == TaskStatus.SUCCEEDED
    assert list(svc.deps.repo.open_tasks("demo")) == []  # finished: off the sweeper's list


def test_a_sweep_that_stops_short_is_carried_on_by_the_next_not_begun_again(svc, monkeypatch):
    """A review: each pass began at the first open entry and checked `limit` of them, so with more open tasks than
    that the later ones were never checked, and their lost jobs never sent again. The next pass starts where the
    last one stopped, round every store."""
    stores.create(svc.deps, name="zeta")
    for store, n in (("demo", 3), ("zeta", 2)):
        for i in range(n):
            ingest.add(svc.deps, store, scope=SCOPE, text=f"{TEXT} ({i})", request_id=f"r-{i}")
    svc.queue.db.conn.execute("DELETE FROM jobs")  # five sends that never happened
    later = svc.deps.clock.now() + timedelta(seconds=svc.deps.settings.task_deadline_seconds + 1)
    monkeypatch.setattr(svc.deps.clock, "now", lambda: later)
    sent = [sweep.sweep(svc.deps, limit=2).requeued for _ in range(3)]
    assert sent == [2, 2, 1] and svc.queue.depth() == 5
    assert sweep.sweep(svc.deps, limit=2).requeued == 0  # each swept once: not again before another deadline


def test_a_task_never_started_is_sent_again_once_its_queue_holds_nothing(svc, monkeypatch):
    """A shared-engines trial: a server killed between an add's commit and its send, the client's retry on another
    server a replay (it re-sends only a task pending 60 s): the add waited 15 minutes for the sweeper's deadline.
    A task not started after a minute while the queue holds no job has lost its own; with jobs queued (a backlog),
    it waits for the deadline."""
    first = ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT, request_id="busy")
    task = ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT + " Again.", request_id="lost")
    svc.queue.db.conn.execute("DELETE FROM jobs WHERE request_id = ?", (task.request_id,))  # never sent
    start = svc.deps.clock.now()
    monkeypatch.setattr(svc.deps.clock, "now", lambda: start + timedelta(seconds=61))
    assert sweep.sweep(svc.deps).requeued == 0  # another job waits: this one may be behind it
    svc.drain()
    assert svc.deps.repo.locate_task("demo", first.request_id).status == TaskStatus.SUCCEEDED
    assert svc.deps.repo.locate_task("demo", task.request_id).status == TaskStatus.PENDING
    assert sweep.sweep(svc.deps).requeued == 1  # the queue is empty: its job was lost
    svc.queue.db.conn.execute("DELETE FROM jobs WHERE request_id = ?", (task.request_id,))  # to its dead letters
    monkeypatch.setattr(svc.deps.clock, "now", lambda: start + timedelta(seconds=180))
    assert sweep.sweep(svc.deps).requeued == 0  # once only: then at the deadline, as any task
    svc.queue.enqueue(task_jobs.task_job("demo", svc.deps.repo.locate_task("demo", task.request_id)))
    svc.drain()
    assert svc.deps.repo.locate_task("demo", task.request_id).status == TaskStatus.SUCCEEDED


def test_the_sweeper_fails_a_task_that_never_finishes(svc, monkeypatch):
    task = ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    stuck = svc.deps.repo.locate_task("demo", task.request_id).model_copy(
        update={"status": TaskStatus.RUNNING, "attempts": svc.deps.settings.max_extract_attempts})
    svc.deps.repo.save_task(stuck)  # e.g. a Lambda timed out on its last receive: no give_up ran
    later = svc.deps.clock.now() + timedelta(seconds=svc.deps.settings.task_deadline_seconds + 1)
    monkeypatch.setattr(svc.deps.clock, "now", lambda: later)
    assert sweep.sweep(svc.deps).failed == 1
    done = svc.deps.repo.locate_task("demo", task.request_id)
    assert done.status == TaskStatus.FAILED and "gave up" in done.error


# -- finding 5: a failing sync add left its task RUNNING forever ---------------------------------------


class Flaky:
    def __init__(self, real, failures):
        self.real, self.failures = real, failures

    def extract(self, *args, **kwargs):
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the LLM timed out")
        return self.real.extract(*args, **kwargs)


def test_a_failing_sync_add_is_retried_and_ends_succeeded(svc):
    svc.deps.extractor = Flaky(svc.deps.extractor, failures=1)
    with pytest.raises(RuntimeError):
        ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT, sync=True, request_id="sync-1")
    svc.queue.take_ownership()  # as after a restart: the safety-net job is due now
    svc.drain()
    assert svc.deps.repo.locate_task("demo", "sync-1").status == TaskStatus.SUCCEEDED


def test_a_successful_sync_add_leaves_no_job_behind(svc):
    task = ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT, sync=True)
    assert task.status == TaskStatus.SUCCEEDED and svc.queue.depth() == 0


def test_a_sync_add_that_keeps_failing_ends_failed_with_its_reason(svc):
    svc.deps.extractor = Flaky(svc.deps.extractor, failures=100)
    svc.queue.base_delay = 0.0
    with pytest.raises(RuntimeError):
        ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT, sync=True, request_id="sync-2")
    svc.queue.take_ownership()
    svc.drain()
    task = svc.deps.repo.locate_task("demo", "sync-2")
    assert task.status == TaskStatus.FAILED and "LLM timed out" in task.error


# -- finding 12: back-pressure instead of unbounded lag ------------------------------------------------


def call(api, method, path, body=None):
    raw = json.dumps(body).encode() if body is not None else b""
    result = api.resolve(http_event(method, path, {"content-type": "application/json"}, raw, "127.0.0.1"),
                         _LambdaContext())
    return result["statusCode"], json.loads(result["body"]), result.get("headers") or {}


def test_an_add_past_the_queue_limit_gets_429_and_writes_nothing(svc):
    svc.deps.settings = dataclasses.replace(svc.deps.settings, queue_limit=2)
    api = build_api(svc.deps)
    for n in range(2):
        assert call(api, "POST", "/v1/stores/demo/memories", {"scope": SCOPE, "text": f"{TEXT} {n}"})[0] == 202
    status, body, headers = call(api, "POST", "/v1/stores/demo/memories",
                                 {"scope": SCOPE, "text": "refused", "request_id": "late"})
    assert (status, body["error"]["code"], headers.get("Retry-After")) == (429, "queue_full", "5")
    assert svc.deps.repo.find_task("demo", "app", "u1", "late") is None and svc.deps.repo.task_owners("demo", "late") == []
    assert len(items(svc.deps, tenant_pk("demo", "app", "u1"), "MSG#")) == 2
    svc.drain()
    assert call(api, "POST", "/v1/stores/demo/memories",
                {"scope": SCOPE, "text": "accepted now", "request_id": "late"})[0] == 202


def test_overloaded_is_a_retryable_domain_error():
    assert Overloaded("busy", retry_after=3).code == "queue_full"


# -- /health reports the worker ------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_health_reports_the_worker_and_503_when_it_is_dead(svc):
    api = build_api(svc.deps)
    ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    status, body, _ = call(api, "GET", "/health")
    assert status == 200 and body["worker"]["queue_depth"] == 1 and body["worker"]["dead_letters"] == 0
    assert body["worker"]["oldest_pending_seconds"] >= 0

    def fatal(job):
        raise SystemExit("a worker thread dies of what it cannot catch")

    svc.queue.workers = 1
    svc.queue.start(fatal, lambda job, why: None, poll=0.01)
    for thread in svc.queue._threads:
        thread.join(20)
    status, body, _ = call(api, "GET", "/health")
    assert (status, body["status"], body["worker"]["alive"]) == (503, "worker_dead", False)


def test_a_supersede_whose_index_write_died_is_indexed_by_the_redelivery(service, deps, monkeypatch):
    """Killed between the UPDATE's table transaction and its index write: the action is APPLIED, the old
    memory superseded in the table and still `active` in the index. The job's redelivery meets the applied
    action and writes its index documents again: table and index agree (fsck), for good."""
    from memlane.services import dream_actions, extract, fsck, ingest, stores

    stores.create(deps, name="s")
    scope = {"app_id": "app", "tenant_id": "t", "agent_id": "bot", "run_id": "r"}
    ingest.add(deps, "s", scope=scope, sync=True, messages=[{"role": "user", "content": "My apartment is in Brooklyn."}])
    ingest.add(deps, "s", scope=scope, request_id="move",
               messages=[{"role": "user", "content": "My apartment is in Queens now."}])
    real = dream_actions._index

    def killed(*args, **kwargs):
        raise SystemExit("killed")

    monkeypatch.setattr(dream_actions, "_index", killed)
    with pytest.raises(SystemExit):
        extract.run(deps, "s", "move", app_id="app", tenant_id="t")
    monkeypatch.setattr(dream_actions, "_index", real)
    assert fsck.fsck(deps, "s").stale == 1  # what the crash leaves
    extract.run(deps, "s", "move", app_id="app", tenant_id="t")  # the redelivery
    assert fsck.fsck(deps, "s").stale == 0


# -- a full disk: a clear 503, reads still answered ----------------------------------------------------


def test_a_full_disk_refuses_writes_with_503_storage_full_and_still_answers_reads(svc):
    """A faults trial (a 6 MB tmpfs): with the disk full every request, searches included, was a generic 500 — the
    audit record of a read could not be written. SQLite's own limit on a file's pages gives the same SQLITE_FULL."""
    api = build_api(svc.deps)
    assert call(api, "POST", "/v1/stores/demo/memories", {"scope": SCOPE, "text": TEXT, "sync": True})[0] == 200
    conn = svc.queue.db.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # not one page more: the next write that needs one is refused
    try:
        refused = [call(api, "POST", "/v1/stores/demo/memories",
                        {"scope": SCOPE, "text": f"{TEXT} {'word ' * 400} {n}", "request_id": f"full-{n}"})
                   for n in range(20)]
        assert {(status, body["error"]["code"]) for status, body, _ in refused} == {(503, "storage_full")}
        status, body, _ = call(api, "POST", "/v1/stores/demo/search", {"scope": SCOPE, "query": "peanuts"})
        assert status == 200
    finally:
        conn.execute("PRAGMA max_page_count = 1073741823")
    assert svc.deps.repo.find_task("demo", "app", "u1", "full-0") is None  # nothing half-written


def test_an_extraction_a_full_disk_keeps_refusing_waits_for_space_instead_of_failing_its_task(svc):
    """A faults trial: an add accepted before the disk filled had its extraction refused on every attempt, and after
    `worker_max_attempts` quick retries its task said FAILED, although nothing was wrong with it. A full disk does not
    count as an attempt: the task waits, and is extracted once space is freed."""
    text = " ".join(f"My sister Clara{n} lives in Lisbon{n} and teaches piano to {n} kids." for n in range(40))
    task = ingest.add(svc.deps, "demo", scope=SCOPE, text=text, request_id="before-full")  # its memories need pages
    svc.queue.max_delay = 0.0  # retry at once: the test does not wait out FULL_DISK_RETRY
    conn = svc.queue.db.conn
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        for _ in range(3 * svc.queue.max_attempts):
            svc.queue.process_one(svc._run, svc._dead)
        assert svc.deps.repo.locate_task("demo", task.request_id).status != TaskStatus.FAILED
    finally:
        conn.execute("PRAGMA max_page_count = 1073741823")
    svc.drain()
    done = svc.deps.repo.locate_task("demo", task.request_id)
    assert done.status == TaskStatus.SUCCEEDED and done.memory_ids


def test_on_a_full_disk_concurrent_tenants_get_503_or_their_own_answers_and_nothing_half_written(svc):
    """The full-disk translation sits in the transaction every request shares: three tenants adding and searching at
    once each get 503 `storage_full` or their own answer — never another's words, never a 500 — and a refused add
    leaves no task."""
    from concurrent.futures import ThreadPoolExecutor

    api = build_api(svc.deps)
    tenants = {f"t{n}": f"marker{n}word" for n in range(3)}
    for tenant, marker in tenants.items():
        scope = {**SCOPE, "tenant_id": tenant}
        assert call(api, "POST", "/v1/stores/demo/memories", {"scope": scope, "text": f"{marker} {TEXT}",
                                                              "sync": True})[0] == 200
    conn = svc.queue.db.conn
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")

    def client(tenant):
        scope, seen = {**SCOPE, "tenant_id": tenant}, []
        for n in range(8):
            seen.append(("add", f"{tenant}-{n}", *call(api, "POST", "/v1/stores/demo/memories",
                                                        {"scope": scope, "request_id": f"{tenant}-{n}",
                                                         "text": f"{tenants[tenant]} {'word ' * 300}"})[:2]))
            seen.append(("search", "", *call(api, "POST", "/v1/stores/demo/search",
                                             {"scope": scope, "query": "sister Lisbon piano"})[:2]))
        return tenant, seen

    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(client, tenants))
    finally:
        conn.execute("PRAGMA max_page_count = 1073741823")
    for tenant, seen in results:
        others = [m for t, m in tenants.items() if t != tenant]
        for kind, request_id, status, body in seen:
            assert status in (200, 202, 503), (kind, status, body)
            assert not any(m in json.dumps(body) for m in others)
            if kind == "add" and status == 503:
                assert body["error"]["code"] == "storage_full"
                assert svc.deps.repo.find_task("demo", "app", tenant, request_id) is None
            if kind == "search":
                assert status == 200 and tenants[tenant] in json.dumps(body)
