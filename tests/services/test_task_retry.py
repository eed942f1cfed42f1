"""Retrying a failed task (POST .../tasks/{request_id}/retry): an extraction given up on while the model was down
runs again once it is back and ends SUCCEEDED with its memories; a task that is not FAILED, that runs nothing, or
whose content was deleted is refused with nothing changed; two retries at once queue one job; another tenant's
task is not found (an AWS-path trial: a FAILED task could only be sent again under a new request id)."""

from __future__ import annotations

import json
import threading
from datetime import datetime

import pytest

from memlane.domain.errors import Conflict, DependencyFailed, NotFound
from memlane.domain.models import AccessPolicy, TaskStatus
from memlane.domain.scope import write_scope
from memlane.repository import tenant_pk
from memlane.services import erase, explicit, ingest, jobs, scopes, stores, summaries, tasks, threads

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
OTHER = {**SCOPE, "tenant_id": "u2"}
CONVO = [
    {"role": "user", "name": "Ann", "content": "I adopted a beagle named Max last Saturday.",
     "created_at": datetime.fromisoformat("2024-03-11T10:00:00+00:00")},
    {"role": "user", "name": "Ann", "content": "I work as a nurse at St. Mary's hospital in Denver."},
]


class ModelDown:
    def extract(self, messages, **_):
        raise DependencyFailed("the model endpoint is unavailable", code="model_unavailable")


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def task_item(deps, store, request_id, scope=SCOPE):
    return deps.table.get(tenant_pk(store, scope["app_id"], scope["tenant_id"]), f"TASK#{request_id}")


def open_entries(deps, store):
    return {(e.request_id, e.app_id, e.tenant_id) for e in deps.repo.open_tasks(store)}


def failed_add(service, deps, store, scope=SCOPE, request_id="req-1"):
    """An add whose job failed on every attempt (the model down): the queue gave it up (jobs.give_up)."""
    working = deps.extractor
    deps.extractor = ModelDown()
    service.queue.base_delay = 0.0
    task = ingest.add(deps, store, scope=scope, messages=CONVO, request_id=request_id)
    service.drain(timeout=30)
    deps.extractor = working
    failed = tasks.get(deps, store, task.request_id, app_id=scope["app_id"], tenant_id=scope["tenant_id"])
    assert failed.status == TaskStatus.FAILED and "model endpoint is unavailable" in failed.error
    assert task.request_id in [j.request_id for j, _ in service.queue.dead()]
    return failed


def test_an_extraction_failed_while_the_model_was_down_runs_again_and_succeeds(service, deps, store):
    failed = failed_add(service, deps, store)
    assert failed.attempts == service.queue.max_attempts and failed.outcomes == []

    pending = tasks.retry(deps, store, failed.request_id, app_id="app", tenant_id="u1")

    assert (pending.status, pending.attempts, pending.error) == (TaskStatus.PENDING, 0, None)
    assert pending.updated_at > failed.updated_at
    stored = tasks.get(deps, store, failed.request_id)
    assert (stored.status, stored.attempts, stored.error) == (TaskStatus.PENDING, 0, None)
    assert (failed.request_id, "app", "u1") in open_entries(deps, store)  # the sweeper's net, as an add's
    assert service.queue.pending() == 1

    service.drain()

    done = tasks.get(deps, store, failed.request_id)
    assert done.status == TaskStatus.SUCCEEDED and done.error is None and done.attempts == 1
    memories = deps.repo.get_memories(store, "app", "u1", done.memory_ids)
    assert len(memories) == 2 and any("beagle" in m.text for m in memories)
    assert all(set(m.evidence) & set(done.message_ids) for m in memories)
    assert open_entries(deps, store) == set()


def test_a_forced_summary_refresh_given_up_on_runs_again(service, deps, store):
    stores.update(deps, store, summary_keep_recent=0)  # the two turns are summarised, none kept as recent
    threads.create(deps, store, scope={k: v for k, v in SCOPE.items() if k != "run_id"}, thread_id="r1")
    ingest.add(deps, store, scope=SCOPE, messages=CONVO, request_id="req-1")
    service.drain()
    scope = write_scope(SCOPE)
    task = summaries.request_refresh(deps, store, scope)
    job = summaries.job(store, task.request_id, scope)
    service.queue.discard(job)  # its deliveries all failed: the last one gives it up
    jobs.give_up(deps, job, "model_unavailable: the model endpoint is unavailable")
    assert tasks.get(deps, store, task.request_id).status == TaskStatus.FAILED

    pending = tasks.retry(deps, store, task.request_id, app_id="app", tenant_id="u1")
    assert (pending.kind, pending.status) == (summaries.KIND, TaskStatus.PENDING)
    service.drain()

    done = tasks.get(deps, store, task.request_id)
    assert done.status == TaskStatus.SUCCEEDED and done.error is None
    assert summaries.get_summary(deps, store, scope) is not None


@pytest.mark.parametrize("state", ["SUCCEEDED", "PENDING"])
def test_a_task_that_is_not_failed_is_refused_and_nothing_changes(service, deps, store, state):
    task = ingest.add(deps, store, scope=SCOPE, messages=CONVO, request_id="req-1")
    if state == "SUCCEEDED":
        service.drain()
    before, queued, entries = task_item(deps, store, "req-1"), service.queue.pending(), open_entries(deps, store)
    assert before["status"] == state

    with pytest.raises(Conflict) as refused:
        tasks.retry(deps, store, task.request_id, app_id="app", tenant_id="u1")

    assert refused.value.code == "task_not_failed" and state in refused.value.message
    assert task_item(deps, store, "req-1") == before
    assert (service.queue.pending(), open_entries(deps, store)) == (queued, entries)


def test_two_retries_at_once_queue_one_job(service, deps, store, monkeypatch):
    failed = failed_add(service, deps, store)
    # Both read the task FAILED before either writes: the conditional write decides.
    both_read = threading.Barrier(2, timeout=10)
    open_task = type(deps.repo).open_task  # `deps.repo` is made anew on each read: the class is patched

    def after_both_reads(repo, *args, **kwargs):
        both_read.wait()
        return open_task(repo, *args, **kwargs)

    monkeypatch.setattr(type(deps.repo), "open_task", after_both_reads)
    answers: list[object] = []

    def retry() -> None:
        try:
            answers.append(tasks.retry(deps, store, failed.request_id, app_id="app", tenant_id="u1"))
        except Conflict as refused:
            answers.append(refused.code)

    runs = [threading.Thread(target=retry) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=30)

    assert sorted(a if isinstance(a, str) else "accepted" for a in answers) == ["accepted", "task_not_failed"]
    assert service.queue.pending() == 1
    service.drain()
    assert tasks.get(deps, store, failed.request_id).status == TaskStatus.SUCCEEDED


def test_another_tenants_task_is_not_found(service, deps, store):
    failed_add(service, deps, store)
    before = task_item(deps, store, "req-1")

    for app_id, tenant_id in (("app", "u2"), ("other-app", "u1")):
        with pytest.raises(NotFound) as missing:
            tasks.retry(deps, store, "req-1", app_id=app_id, tenant_id=tenant_id)
        assert missing.value.code == "task_not_found"
    assert task_item(deps, store, "req-1") == before and service.queue.pending() == 0


def test_an_explicit_write_runs_nothing_again(service, deps, store):
    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Locker 12.", "memory_id": "locker"}],
                   request_id="write-1")
    with pytest.raises(Conflict) as refused:
        tasks.retry(deps, store, "write-1", app_id="app", tenant_id="u1")
    assert refused.value.code == "task_not_retryable"


def test_a_failed_task_whose_thread_was_deleted_is_refused_and_nothing_changes(service, deps, store):
    failed_add(service, deps, store)
    erase.delete_run(deps, store, scope=SCOPE)
    service.drain()
    before, entries = task_item(deps, store, "req-1"), open_entries(deps, store)
    assert before["status"] == "FAILED"

    with pytest.raises(Conflict) as refused:
        tasks.retry(deps, store, "req-1", app_id="app", tenant_id="u1")

    assert refused.value.code == "request_content_deleted"
    assert task_item(deps, store, "req-1") == before
    assert (service.queue.pending(), open_entries(deps, store)) == (0, entries)


@pytest.mark.parametrize("policy", [AccessPolicy.NONE, AccessPolicy.RECALL_ONLY])
def test_a_failed_extraction_of_a_thread_that_now_stores_nothing_is_refused(service, deps, store, policy):
    # A trial: the retry extracted memories into a thread switched since to a policy that stores nothing (an add
    # made after the switch extracts nothing).
    failed_add(service, deps, store)
    scopes.set_access_policy(deps, store, scope=SCOPE, policy=policy)
    before, entries = task_item(deps, store, "req-1"), open_entries(deps, store)

    with pytest.raises(Conflict) as refused:
        tasks.retry(deps, store, "req-1", app_id="app", tenant_id="u1")

    assert refused.value.code == "memories_not_kept" and str(policy) in refused.value.message
    assert task_item(deps, store, "req-1") == before
    assert (service.queue.pending(), open_entries(deps, store)) == (0, entries)
    service.drain()
    assert list(deps.repo.iter_memories(store, "app", "u1")) == []


def test_a_thread_deleted_and_made_again_under_its_id_is_not_the_one_the_task_named(service, deps, store):
    failed_add(service, deps, store)
    erase.delete_run(deps, store, scope=SCOPE)
    ingest.add(deps, store, scope=SCOPE, messages=[{"role": "user", "content": "I live in Oslo."}], request_id="req-2")
    service.drain()
    with pytest.raises(Conflict) as refused:
        tasks.retry(deps, store, "req-1", app_id="app", tenant_id="u1")
    assert refused.value.code == "request_content_deleted"


# -- through the API: found and authorized as GET .../tasks/{request_id}, audited -------------------


def call(api, method, path, key):
    from memlane.server import _LambdaContext, http_event

    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    result = api.resolve(http_event(method, path, headers, b"", "127.0.0.1"), _LambdaContext())
    return result["statusCode"], json.loads(result["body"]) if result.get("body") else None


def test_the_route_answers_202_finds_the_task_as_get_does_and_is_audited(service, deps, store):
    from memlane.api.app import build_api
    from memlane.services import access

    keys = {"u1": access.create_api_key(deps, "u1-app", {"app": ["u1"]}),
            "u2": access.create_api_key(deps, "u2-app", {"app": ["u2"]})}
    failed_add(service, deps, store, request_id="req-1")
    failed_add(service, deps, store, scope=OTHER, request_id="req-9")
    api = build_api(deps, auth="api_key")

    # Another tenant's id, unnamed: as not found as an id nobody used; nothing changes.
    before = task_item(deps, store, "req-9", OTHER)
    foreign = call(api, "POST", "/v1/stores/demo/tasks/req-9/retry", keys["u1"])
    missing = call(api, "POST", "/v1/stores/demo/tasks/no-such-id/retry", keys["u1"])
    assert json.dumps(foreign).replace("req-9", "ID") == json.dumps(missing).replace("no-such-id", "ID")
    assert foreign[0] == 404 and foreign[1]["error"]["code"] == "task_not_found"
    assert task_item(deps, store, "req-9", OTHER) == before

    status, body = call(api, "POST", "/v1/stores/demo/tasks/req-1/retry", keys["u1"])
    assert status == 202, body
    assert (body["request_id"], body["status"], body["attempts"], body.get("error")) == ("req-1", "PENDING", 0, None)
    assert body == call(api, "GET", "/v1/stores/demo/tasks/req-1", keys["u1"])[1]  # the task as GET shows it
    again = call(api, "POST", "/v1/stores/demo/tasks/req-1/retry?app_id=app&tenant_id=u1", keys["u1"])
    assert again[0] == 409 and again[1]["error"]["code"] == "task_not_failed"
    assert service.queue.pending() == 1

    rows = deps.repo.list_audit(store, limit=200, cursor=None, now=int(deps.clock.now().timestamp()))[0]
    retried = [r for r in rows if r.operation == "POST /v1/stores/{store}/tasks/{id}/retry"]
    assert sorted((r.status, r.target_id, r.tenant_id) for r in retried) == [
        (202, "req-1", "u1"), (404, None, None), (404, None, None), (409, None, "u1")]
    # its own tenant's key retries it
    assert call(api, "POST", "/v1/stores/demo/tasks/req-9/retry", keys["u2"])[1]["status"] == "PENDING"


@pytest.mark.parametrize("gone", ["erasure", "store"])
def test_a_retry_whose_tenant_or_store_goes_while_it_registers_leaves_no_open_entry(service, deps, store, gone,
                                                                                    monkeypatch):
    """A trial: the tenant erased (or the store deleted and purged) between a retry's checks and its commit; the retry
    answered 404 but its open-task entry, naming the tenant and the request id, outlived the erasure (until the
    sweeper's deadline) or the store (for good: the sweeper visits only stores that exist)."""
    failed_add(service, deps, store)
    assert open_entries(deps, store) == set()
    register = type(deps.repo).open_task

    def meanwhile(repo, *args, **kwargs):
        if gone == "erasure":
            erase.run_erasure(deps, erase.request_erasure(deps, app_id="app", tenant_id="u1", principal="ops")
                              .erasure_id)
        else:
            stores.delete(deps, store)
            erase.purge_store(deps, store)
        return register(repo, *args, **kwargs)

    monkeypatch.setattr(type(deps.repo), "open_task", meanwhile)
    with pytest.raises(NotFound):
        tasks.retry(deps, store, "req-1", app_id="app", tenant_id="u1")
    assert open_entries(deps, store) == set()


def test_tenants_retrying_one_request_id_at_once_each_run_their_own_once(service, deps, store):
    """Four tenants, each with a FAILED extraction under the same request id, retry it from two threads at once: each
    tenant's task is queued once, its job extracts that tenant's own turns, and no open-task entry is left."""
    tenants = ("u1", "u2", "u3", "u4")
    working = deps.extractor
    deps.extractor = ModelDown()
    service.queue.base_delay = 0.0
    for t in tenants:
        ingest.add(deps, store, scope={**SCOPE, "tenant_id": t}, request_id="req-1",
                   messages=[{"role": "user", "name": t, "content": f"I keep the word {t}secret in my locker."}])
    service.drain(timeout=30)
    deps.extractor = working
    start = threading.Barrier(2 * len(tenants), timeout=10)
    answers: dict[str, list[str]] = {t: [] for t in tenants}

    def retry(t: str) -> None:
        start.wait()
        try:
            tasks.retry(deps, store, "req-1", app_id="app", tenant_id=t)
            answers[t].append("accepted")
        except Conflict as refused:
            answers[t].append(refused.code)

    runs = [threading.Thread(target=retry, args=(t,)) for t in tenants for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=30)

    assert {t: sorted(a) for t, a in answers.items()} == {t: ["accepted", "task_not_failed"] for t in tenants}
    assert service.queue.pending() == len(tenants)
    service.drain()
    for t in tenants:
        assert tasks.get(deps, store, "req-1", app_id="app", tenant_id=t).status == TaskStatus.SUCCEEDED
        texts = [m.text for m in deps.repo.iter_memories(store, "app", t)]
        assert texts and all(f"{t}secret" in x and not any(f"{o}secret" in x for o in tenants if o != t)
                             for x in texts)
    assert open_entries(deps, store) == set()
