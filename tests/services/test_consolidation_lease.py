"""A tenant's write-time consolidation runs one job at a time (services/consolidate.one_at_a_time).

An AWS-path trial (session 31): Lambda ran two extraction jobs of one tenant side by side; each read its neighbours
before the other wrote, so a fact said twice was stored twice and "moved to Denver" left "lives in Boston" current
too (4 of 4 concurrent rounds). The local queue runs a tenant's jobs one at a time, so the test runs two jobs in two
threads directly, as Lambda does, and holds each at its neighbours' read until the other reaches it (or a second
passes: with the lease the other never does before the first is done)."""

import dataclasses
import threading

import pytest

from memlane.domain.errors import Retryable
from memlane.domain.models import Candidate, ExtractAction, MemoryStatus
from memlane.services import consolidate, extract, stores
from tests.services.test_extract_retries import SC, Scripted, say, table_mems


class ByTurn:
    """The statement each turn says (two jobs extract at once: an answer by call order would be either's)."""

    said = {"I live in Boston.": "User lives in Boston.", "I'm allergic to penicillin.": "User is allergic to penicillin.",
            "I moved to Denver last month.": "User moved to Denver last month.",
            "I love hiking in the mountains.": "User loves hiking in the mountains."}

    def extract(self, messages, **kw):
        return [Candidate(text=self.said[m.content], evidence=[m.message_id]) for m in messages]


def _side_by_side(deps, monkeypatch, tasks):
    met = threading.Barrier(len(tasks), timeout=1.0)
    original = consolidate._neighbours

    def neighbours(*args, **kwargs):
        try:
            met.wait()
        except threading.BrokenBarrierError:
            pass  # the other job is not consolidating now
        return original(*args, **kwargs)

    monkeypatch.setattr(consolidate, "_neighbours", neighbours)
    done, failed = [], []

    def run(task):
        try:
            done.append(extract.run(deps, "demo", task.request_id))
        except Exception as error:  # noqa: BLE001 — reported below
            failed.append(error)
    threads = [threading.Thread(target=run, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed
    return done


@pytest.mark.parametrize("shared", [False, True], ids=["own-table", "shared-table"])
def test_two_jobs_of_a_tenant_at_once_store_a_fact_once_and_a_change_over_the_old_value(deps, monkeypatch, shared):
    deps.settings = dataclasses.replace(deps.settings, shared_table=shared)  # a lock of the process, or a lease
    stores.create(deps, name="demo")
    deps.extractor = ByTurn()
    say(deps, "I live in Boston.", day=0, request_id="req-0")
    first = say(deps, "I'm allergic to penicillin.", day=1, request_id="req-1", sync=False)
    again = say(deps, "I'm allergic to penicillin.", day=1, request_id="req-2", scope={**SC, "run_id": "r2"},
                sync=False)
    _side_by_side(deps, monkeypatch, [first, again])
    moved = say(deps, "I moved to Denver last month.", day=30, request_id="req-3", sync=False)
    other = say(deps, "I love hiking in the mountains.", day=30, request_id="req-4", scope={**SC, "run_id": "r2"},
                sync=False)
    _side_by_side(deps, monkeypatch, [moved, other])
    active = sorted(m.text for m in table_mems(deps).values() if m.status == MemoryStatus.ACTIVE)
    assert active == ["User is allergic to penicillin.", "User loves hiking in the mountains.",
                      "User moved to Denver last month."]
    outcomes = [o.action for r in ("req-1", "req-2") for o in deps.repo.locate_task("demo", r).outcomes]
    assert sorted(outcomes) == [ExtractAction.ADD, ExtractAction.NOOP]


def test_a_job_that_waits_too_long_for_the_lease_is_tried_again_later(deps, monkeypatch):
    deps.settings = dataclasses.replace(deps.settings, shared_table=True)
    stores.create(deps, name="demo")
    deps.extractor = Scripted(["User is allergic to penicillin."])
    task = say(deps, "I'm allergic to penicillin.", day=0, request_id="req-1", sync=False)
    monkeypatch.setattr(consolidate, "LEASE_WAIT_SECONDS", 0.1)
    pk, sk = deps.repo.consolidation_lease("demo", SC["app_id"], SC["tenant_id"])
    assert deps.repo.take_lease(pk, sk, "another job", deps.clock.now(), consolidate.LEASE_HOLD)
    with pytest.raises(Retryable):
        extract.run(deps, "demo", task.request_id)
    deps.repo.release_lease(pk, sk, "another job")
    assert extract.run(deps, "demo", task.request_id).outcomes[0].action == ExtractAction.ADD


def test_a_lease_held_past_its_hold_is_renewed_and_a_dead_holders_lets_go(deps, monkeypatch):
    """The scale-out test (two servers, two workers, one killed mid-job): a two-minute lease held the killed worker's
    tenant for two minutes. It is short now, renewed while its job runs, and another takes it once it lapses."""
    from datetime import timedelta
    import time

    deps.settings = dataclasses.replace(deps.settings, shared_table=True)
    monkeypatch.setattr(consolidate, "LEASE_HOLD", timedelta(seconds=0.3))
    monkeypatch.setattr(consolidate, "LEASE_RENEW_SECONDS", 0.1)
    scope = type("S", (), {"app_id": SC["app_id"], "tenant_id": SC["tenant_id"]})()
    pk, sk = deps.repo.consolidation_lease("demo", SC["app_id"], SC["tenant_id"])
    with consolidate.one_at_a_time(deps, "demo", scope):
        time.sleep(0.8)  # past the hold: still ours
        assert not deps.repo.take_lease(pk, sk, "another job", deps.clock.now(), consolidate.LEASE_HOLD)
    assert deps.repo.take_lease(pk, sk, "a job that died", deps.clock.now(), consolidate.LEASE_HOLD)
    time.sleep(0.4)  # its holder renews nothing
    assert deps.repo.take_lease(pk, sk, "the next job", deps.clock.now(), consolidate.LEASE_HOLD)


@pytest.mark.parametrize("shared", [False, True], ids=["own-table", "shared-table"])
def test_a_sync_add_whose_deadline_passes_while_it_waits_goes_on_as_its_job(deps, shared):
    """It answered 503 `busy` although its messages and job were committed (session 31's note): a sync add past its
    deadline answers 202 and its job finishes the work, whatever step the deadline passed in."""
    from memlane.domain.deadline import Deadline
    from memlane.domain.models import TaskStatus
    from memlane.services import ingest

    deps.settings = dataclasses.replace(deps.settings, shared_table=shared)
    stores.create(deps, name="demo")
    deps.extractor = Scripted(["User is allergic to penicillin."])
    scope = type("S", (), {"app_id": SC["app_id"], "tenant_id": SC["tenant_id"]})()
    held, release = threading.Event(), threading.Event()

    def another_job():
        with consolidate.one_at_a_time(deps, "demo", scope):
            held.set()
            release.wait(10)
    holder = threading.Thread(target=another_job)
    holder.start()
    try:
        assert held.wait(5)
        task = ingest.add(deps, "demo", scope=SC, sync=True, request_id="req-1", deadline=Deadline.after(0.3),
                          messages=[{"role": "user", "content": "I'm allergic to penicillin."}])
    finally:
        release.set()
        holder.join()
    assert task.status != TaskStatus.SUCCEEDED  # 202: the job goes on
    assert extract.run(deps, "demo", "req-1").outcomes[0].action == ExtractAction.ADD
