"""Thread summaries (services/summaries.py): triggered by adds through the queue, incremental, the recent
turns left out, one summary per thread whatever races, indexed as a summary document; the LLM path with
its repair turn and extractive fallback."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.domain.errors import Conflict, DependencyFailed, NotFound
from memlane.domain.models import TaskStatus
from memlane.domain.scope import Scope
from memlane.ports import IndexInventory
from memlane.repository import tenant_pk
from memlane.services import erase, ingest, jobs, stores, summaries, sweep, tasks

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "t1"}
THREAD = Scope(**SCOPE)
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
TRIGGER, KEEP = 120, 6


@pytest.fixture()
def svc(tmp_path):
    service = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", reranker="none"),
                          embedder=HashingEmbedder())
    stores.create(service.deps, name="demo", summary_trigger_tokens=TRIGGER, summary_keep_recent=KEEP)
    yield service
    service.close()


def turn(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "created_at": T0 + timedelta(minutes=i),
            "content": f"On day {i} we talked about the Lisbon trip budget item {i} and the hotel near Alfama."}


def add_turns(deps, start: int, n: int, scope=SCOPE, **kwargs) -> None:
    for i in range(start, start + n):
        ingest.add(deps, "demo", scope=scope, messages=[turn(i)], request_id=f"turn-{scope['run_id']}-{i}", **kwargs)


def thread_ids(deps, scope=THREAD) -> list[str]:
    items = deps.table.query(tenant_pk("demo", scope.app_id, scope.tenant_id),
                             prefix=f"MSG#{scope.agent_id}#{scope.run_id}#", limit=1000).items
    return [i["message_id"] for i in items]


def queued(svc, kind: str) -> int:
    return svc.queue.db.conn.execute("SELECT COUNT(*) FROM jobs WHERE kind = ? AND state != 'dead'",
                                     (kind,)).fetchone()[0]


def bound(svc):
    return svc.deps.for_tenant("demo", "app", "u1")


class Recording:
    """The table, noting every message item a read returns."""

    def __init__(self, inner):
        self.inner, self.read = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def query(self, pk, **kwargs):
        page = self.inner.query(pk, **kwargs)
        self.read += [i["message_id"] for i in page.items if i["sk"].startswith("MSG#")]
        return page

    def batch_get(self, keys):
        found = self.inner.batch_get(keys)
        self.read += [i["message_id"] for i in found if i["sk"].startswith("MSG#")]
        return found


class MeetAtWrite:
    """The table, holding each thread's first summary write until `parties` threads are there."""

    def __init__(self, inner, barrier: threading.Barrier):
        self.inner, self.barrier, self.passed = inner, barrier, set()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _meet(self, sks):
        if any(sk.startswith("SUM#") for sk in sks) and threading.get_ident() not in self.passed:
            self.passed.add(threading.get_ident())
            self.barrier.wait(timeout=30)

    def put(self, item, **kwargs):
        self._meet([item["sk"]])
        return self.inner.put(item, **kwargs)

    def transact(self, writes):
        self._meet([w.item["sk"] if hasattr(w, "item") else w.sk for w in writes])
        return self.inner.transact(writes)


# -- the trigger, through the queue -------------------------------------------------------------


def test_below_the_trigger_no_refresh_is_queued(svc):
    add_turns(svc.deps, 0, KEEP + 1)  # one message beyond the recent ones: far below the trigger
    assert queued(svc, "summarize") == 0
    svc.drain()
    assert summaries.get_summary(bound(svc), "demo", THREAD) is None


def test_the_summary_refreshes_by_itself_past_the_trigger_leaving_the_recent_turns_out(svc):
    add_turns(svc.deps, 0, 16)
    assert queued(svc, "summarize") >= 1
    svc.drain()
    found = summaries.get_summary(bound(svc), "demo", THREAD)
    ids = thread_ids(svc.deps)
    assert found is not None and found.version >= 1
    assert found.covered_until == ids[-KEEP - 1]  # everything but the last KEEP messages
    assert found.covered_messages == len(ids) - KEEP
    assert not set(found.evidence) & set(ids[-KEEP:])  # no recent turn is cited
    assert found.sentences and all(s.evidence for s in found.sentences)
    assert found.tokens <= svc.deps.settings.summary_max_tokens
    assert found.origin == "extractive"


def test_a_thread_whose_policy_extracts_nothing_gets_no_summary(svc):
    add_turns(svc.deps, 0, 16, access_policy="recall_only")
    assert queued(svc, "summarize") == 0
    assert summaries.refresh(bound(svc), "demo", THREAD, force=True) is None
    # Asked for one, it says why there is none (a trial: a forced refresh SUCCEEDED writing nothing, and the 404
    # said a summary would come "once a refresh is asked for").
    with pytest.raises(Conflict) as refused:
        summaries.request_refresh(bound(svc), "demo", THREAD)
    assert refused.value.code == "summary_not_kept" and "recall_only" in refused.value.message
    with pytest.raises(NotFound) as missing:
        summaries.read(bound(svc), "demo", THREAD)
    assert "keeps no summary" in missing.value.message


def test_a_thread_of_no_more_than_its_recent_turns_says_a_refresh_has_nothing_to_cover(svc):
    """A trial (session 30): a forced refresh of a one-message thread SUCCEEDED, and the 404 that followed said a
    summary would come once a refresh is asked for. It says the thread holds only the turns a summary leaves out."""
    add_turns(svc.deps, 0, KEEP)
    assert summaries.refresh(bound(svc), "demo", THREAD, force=True) is None
    with pytest.raises(NotFound) as missing:
        summaries.read(bound(svc), "demo", THREAD)
    assert f"it has {KEEP} messages, none before its last {KEEP}" in missing.value.message


# -- incremental -----------------------------------------------------------------------------------


def test_the_second_refresh_reads_only_messages_after_covered_until(svc):
    add_turns(svc.deps, 0, 16)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    assert first is not None
    add_turns(svc.deps, 16, 10)
    recording = Recording(bound(svc).table)
    second = summaries.refresh(dataclasses.replace(bound(svc), table=recording), "demo", THREAD)
    assert second is not None and second.version == first.version + 1
    assert recording.read, "the refresh read the new messages"
    assert all(mid > first.covered_until for mid in recording.read), "it read what the summary already covers"
    ids = thread_ids(svc.deps)
    assert second.covered_until == ids[-KEEP - 1]
    assert second.covered_messages == len(ids) - KEEP
    # built on the previous summary (its statements, which cite covered messages, are merged in: the oldest
    # give way first under the cap) without reading those messages again
    carried = [s for s in second.sentences if s.evidence[0] <= first.covered_until]
    assert carried and all(s in first.sentences for s in carried)
    assert second.tokens <= svc.deps.settings.summary_max_tokens


def test_a_refresh_with_nothing_new_past_the_trigger_writes_nothing(svc):
    add_turns(svc.deps, 0, 16)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    add_turns(svc.deps, 16, 1)  # one more eligible message: below the trigger
    again = summaries.refresh(bound(svc), "demo", THREAD)
    assert again is not None and again.version == first.version and again.covered_until == first.covered_until


# -- one summary per thread, whatever races ---------------------------------------------------------


def test_two_concurrent_refreshes_write_one_summary(svc):
    add_turns(svc.deps, 0, 16)
    barrier = threading.Barrier(2)
    table = MeetAtWrite(bound(svc).table, barrier)
    deps = dataclasses.replace(bound(svc), table=table)
    results: list[Any] = []
    workers = [threading.Thread(target=lambda: results.append(summaries.refresh(deps, "demo", THREAD)))
               for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    items = svc.deps.table.query(tenant_pk("demo", "app", "u1"), prefix="SUM#", limit=10).items
    assert len(items) == 1
    assert items[0]["version"] == 1  # one write won; the other read it and found nothing left to do
    assert [r.version for r in results] == [1, 1]
    assert len(table.passed) == 2 and not barrier.broken  # both really met at the write


def test_a_refresh_that_loses_the_race_continues_from_the_winner_so_no_coverage_is_lost(svc):
    add_turns(svc.deps, 0, 16)
    barrier = threading.Barrier(2)
    table = MeetAtWrite(bound(svc).table, barrier)
    deps = dataclasses.replace(bound(svc), table=table)
    results: list[Any] = []

    def refresh() -> None:
        results.append(summaries.refresh(deps, "demo", THREAD, force=True))

    early = threading.Thread(target=refresh)
    early.start()
    for _ in range(3000):  # the early refresh has read its batch and waits to write
        if barrier.n_waiting == 1:
            break
        threading.Event().wait(0.01)
    assert barrier.n_waiting == 1, "the early refresh never reached its write"
    add_turns(svc.deps, 16, 4)  # the late refresh sees four more messages
    late = threading.Thread(target=refresh)
    late.start()
    early.join(timeout=60)
    late.join(timeout=60)
    final = summaries.get_summary(bound(svc), "demo", THREAD)
    ids = thread_ids(svc.deps)
    assert final.covered_until == ids[-KEEP - 1] and final.covered_messages == len(ids) - KEEP
    assert len(svc.deps.table.query(tenant_pk("demo", "app", "u1"), prefix="SUM#", limit=10).items) == 1


def test_a_redelivered_job_changes_nothing(svc):
    add_turns(svc.deps, 0, 16)
    job = summaries.job("demo", "sum-job-1", THREAD)
    jobs.handle(svc.deps, job)
    first = summaries.get_summary(bound(svc), "demo", THREAD)
    jobs.handle(svc.deps, job)  # the same job delivered again
    again = summaries.get_summary(bound(svc), "demo", THREAD)
    assert first is not None and again == first
    assert len(svc.deps.table.query(tenant_pk("demo", "app", "u1"), prefix="SUM#", limit=10).items) == 1


# -- messages stored below the coverage are not skipped --------------------------------------------


def test_a_message_stored_later_but_said_before_the_coverage_is_summarised_by_the_next_refresh(svc):
    """Coverage is an id, and ids sort by when a message was said: an add stamped earlier (an import, a
    client's lagging clock) landed below `covered_until` and no refresh ever read it."""
    add_turns(svc.deps, 0, 16)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    before = set(thread_ids(svc.deps))
    ingest.add(svc.deps, "demo", scope=SCOPE, request_id="late", messages=[
        {"role": "user", "content": "Decision: the venue is the harbour warehouse, booked by Marta.",
         "created_at": T0 + timedelta(minutes=2, seconds=30)}])
    (late,) = set(thread_ids(svc.deps)) - before
    assert late < first.covered_until
    assert summaries.get_summary(bound(svc), "demo", THREAD).late == [late]  # noted by the add
    add_turns(svc.deps, 16, 10)
    second = summaries.refresh(bound(svc), "demo", THREAD)
    ids = thread_ids(svc.deps)
    assert second.covered_messages == len(ids) - KEEP and second.late == []
    assert second.covered_until == ids[-KEEP - 1]


def test_an_add_committed_inside_the_range_a_refresh_covers_is_summarised_too(svc):
    """A refresh read its batch; an add stamped inside that range committed before the refresh wrote:
    the summary's coverage moved past a message it never read."""
    add_turns(svc.deps, 0, 16)
    real, fired = summaries._summarise, []

    def meanwhile(deps, store, scope, previous, batch):
        if not fired:
            fired.append(True)
            ingest.add(svc.deps, "demo", scope=SCOPE, request_id="meanwhile", messages=[
                {"role": "user", "content": "Decision: Marta books the harbour warehouse for the party.",
                 "created_at": T0 + timedelta(minutes=4, seconds=30)}])
        return real(deps, store, scope, previous, batch)

    summaries._summarise = meanwhile
    try:
        final = summaries.refresh(bound(svc), "demo", THREAD)
    finally:
        summaries._summarise = real
    assert fired
    ids = thread_ids(svc.deps)
    assert final.covered_messages == len(ids) - KEEP and final.late == []
    assert len(svc.deps.table.query(tenant_pk("demo", "app", "u1"), prefix="SUM#", limit=10).items) == 1


def test_a_backdated_add_committed_while_a_refresh_runs_below_its_coverage_is_summarised(svc, monkeypatch):
    """A working-memory trial: an add stamped below the summary's coverage (an import, a lagging client clock)
    committed after a refresh pass read the thread, and its own check ran after that pass wrote: the check took
    the summary's build time for its read time, judged the message read, and it was never summarised (15-54 of
    ~80-224 such messages lost, silently). The check now compares with when the pass read."""
    add_turns(svc.deps, 0, 16)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    add_turns(svc.deps, 16, 10)
    real_summarise, real_after_add = summaries._summarise, summaries.after_add
    checks = []

    def meanwhile(deps, store, scope, previous, batch):
        if not checks:  # the add commits between this pass's read and its write; its check runs after the write
            monkeypatch.setattr(summaries, "after_add", lambda *args: checks.append(args) or False)
            ingest.add(svc.deps, "demo", scope=SCOPE, request_id="backdated", messages=[
                {"role": "user", "content": "Decision: the venue is the harbour warehouse, booked by Marta.",
                 "created_at": T0 + timedelta(minutes=2, seconds=30)}])
            monkeypatch.setattr(summaries, "after_add", real_after_add)
        return real_summarise(deps, store, scope, previous, batch)

    monkeypatch.setattr(summaries, "_summarise", meanwhile)
    summaries.refresh(bound(svc), "demo", THREAD)
    monkeypatch.setattr(summaries, "_summarise", real_summarise)
    (check,) = checks
    backdated = check[3][0].message_id
    assert backdated < first.covered_until
    assert real_after_add(*check)  # noted late, a refresh queued
    final = summaries.refresh(bound(svc), "demo", THREAD, force=True)
    ids = thread_ids(svc.deps)
    assert final.covered_messages == len(ids) - KEEP and final.late == [] and backdated in final.folded


def test_an_add_a_refresh_read_though_it_stamped_its_read_before_is_not_taken_in_twice(svc, monkeypatch):
    """The concurrent import test, one run in five: a pass stamps its read time, an add is stored and commits, then
    the pass reads the thread, add and all. The add's check, judging by that read time, took the message for unread
    and noted it late, and the next refresh took it in a second time (covered_messages one over, its sentence
    said twice). A message a recent pass took in is never noted late."""
    add_turns(svc.deps, 0, 16)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    add_turns(svc.deps, 16, 10)
    real_eligible, real_after_add = summaries._eligible, summaries.after_add
    checks = []

    def stamped_then_read(deps, store, scope, previous):
        if not checks:  # after the pass took its read time, before it reads: the add stores and commits
            monkeypatch.setattr(summaries, "after_add", lambda *args: checks.append(args) or False)
            ingest.add(svc.deps, "demo", scope=SCOPE, request_id="meanwhile", messages=[
                {"role": "user", "content": "Decision: the venue is the harbour warehouse, booked by Marta.",
                 "created_at": T0 + timedelta(minutes=18, seconds=30)}])
            monkeypatch.setattr(summaries, "after_add", real_after_add)
        return real_eligible(deps, store, scope, previous)

    monkeypatch.setattr(summaries, "_eligible", stamped_then_read)
    read = summaries.refresh(bound(svc), "demo", THREAD)
    monkeypatch.setattr(summaries, "_eligible", real_eligible)
    (check,) = checks
    meanwhile = check[3][0].message_id
    assert first.covered_until < meanwhile <= read.covered_until  # the pass read it
    real_after_add(*check)  # the add's own check, after that pass wrote
    assert svc.deps.repo.get_summary("demo", THREAD).late == []
    final = summaries.refresh(bound(svc), "demo", THREAD, force=True)
    assert final.covered_messages == len(thread_ids(svc.deps)) - KEEP and final.late == []


def test_a_message_read_by_the_pass_before_a_lagging_servers_pass_is_not_taken_in_twice(svc, monkeypatch):
    """The second regression trial: the same interleaving, then a second pass of the refresh on a server whose clock
    is 5 s behind (a backlog of two batches): its read time is before the add was stored, and with only the latest
    pass's messages remembered the add's check noted the message late — covered_messages one over."""
    add_turns(svc.deps, 0, 16)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    add_turns(svc.deps, 16, summaries.BATCH + 30)
    real_eligible, real_after_add, real_now = summaries._eligible, summaries.after_add, svc.deps.clock.now
    checks = []

    def stamped_then_read(deps, store, scope, previous):
        if not checks:
            monkeypatch.setattr(summaries, "after_add", lambda *args: checks.append(args) or False)
            ingest.add(svc.deps, "demo", scope=SCOPE, request_id="meanwhile", messages=[
                {"role": "user", "content": "Decision: the venue is the harbour warehouse, booked by Marta.",
                 "created_at": T0 + timedelta(minutes=18, seconds=30)}])
            monkeypatch.setattr(summaries, "after_add", real_after_add)
            behind = real_now() - timedelta(seconds=5)  # the next pass runs on a server 5 s behind
            monkeypatch.setattr(svc.deps.clock, "now", lambda: behind)
        return real_eligible(deps, store, scope, previous)

    monkeypatch.setattr(summaries, "_eligible", stamped_then_read)
    summaries.refresh(bound(svc), "demo", THREAD)
    monkeypatch.setattr(summaries, "_eligible", real_eligible)
    monkeypatch.setattr(svc.deps.clock, "now", real_now)
    (check,) = checks
    assert first.covered_until < check[3][0].message_id
    real_after_add(*check)
    assert svc.deps.repo.get_summary("demo", THREAD).late == []
    final = summaries.refresh(bound(svc), "demo", THREAD, force=True)
    assert final.covered_messages == len([i for i in thread_ids(svc.deps) if i <= final.covered_until])


def test_a_backdated_add_a_refresh_reads_after_is_still_late_for_it_reads_only_above_its_coverage(svc, monkeypatch):
    """The same trial, one client adding in sequence: a refresh that read after the add was stored counted as
    having seen it — but a refresh reads only above the coverage it starts from, so a message stamped below it was
    never read, and never summarised."""
    add_turns(svc.deps, 0, 16)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    add_turns(svc.deps, 16, 10)
    real_after_add, checks = summaries.after_add, []
    monkeypatch.setattr(summaries, "after_add", lambda *args: checks.append(args) or False)
    ingest.add(svc.deps, "demo", scope=SCOPE, request_id="backdated", messages=[
        {"role": "user", "content": "Decision: the venue is the harbour warehouse, booked by Marta.",
         "created_at": T0 + timedelta(minutes=2, seconds=30)}])
    monkeypatch.setattr(summaries, "after_add", real_after_add)
    summaries.refresh(bound(svc), "demo", THREAD)  # reads after the add was stored, above its coverage only
    (check,) = checks
    backdated = check[3][0].message_id
    assert backdated < first.covered_until
    assert real_after_add(*check)  # the add's own check, after that refresh: late all the same
    final = summaries.refresh(bound(svc), "demo", THREAD, force=True)
    ids = thread_ids(svc.deps)
    assert final.covered_messages == len(ids) - KEEP and final.late == [] and backdated in final.folded


def test_tenants_importing_backdated_turns_at_once_each_get_a_summary_of_all_and_only_their_own(svc):
    """The backdated-add fix reads the coverage in the add and notes late messages against the summary: three tenants
    importing turns in random time order at once, while the worker refreshes their threads, each end with one summary
    covering every one of their own messages below its coverage and citing none of another tenant's."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    svc.start_worker()
    tenants = [f"imp{n}" for n in range(3)]

    def client(tenant):
        rng = random.Random(tenant)
        for i in rng.sample(range(40), 40):  # said in order, stored in any order
            ingest.add(svc.deps, "demo", scope={**SCOPE, "tenant_id": tenant}, request_id=f"{tenant}-{i}",
                       messages=[{**turn(i), "content": f"{tenant} note {i}: " + turn(i)["content"]}])

    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(client, tenants))
    svc.drain()
    for tenant in tenants:
        scope = Scope(**{**SCOPE, "tenant_id": tenant})
        tenant_deps = svc.deps.for_tenant("demo", "app", tenant)
        final = summaries.refresh(tenant_deps, "demo", scope, force=True)
        ids = thread_ids(svc.deps, scope)
        below = [i for i in ids if i <= final.covered_until]
        # None lost, none taken twice (a refresh reading while an add commits read the message, and the add, judging
        # by the refresh's read_at, noted it late: one run in five counted it twice).
        assert final.covered_messages == len(below) and final.late == [], tenant
        cited = {e for sentence in final.sentences for e in sentence.evidence}
        assert cited <= set(ids), tenant
        assert not any(other in final.text for other in tenants if other != tenant)
        assert len(svc.deps.table.query(tenant_pk("demo", "app", tenant), prefix="SUM#", limit=10).items) == 1


# -- a forced refresh is a task --------------------------------------------------------------------


def test_a_forced_refresh_is_a_pollable_task_and_summarises_below_the_trigger(svc):
    add_turns(svc.deps, 0, KEEP + 2)  # below the trigger
    task = summaries.request_refresh(bound(svc), "demo", THREAD)
    assert task.status == TaskStatus.PENDING and task.kind == "summarize"
    svc.drain()
    done = tasks.get(svc.deps, "demo", task.request_id)  # found by its id alone, like an extraction
    assert done.status == TaskStatus.SUCCEEDED and done.kind == "summarize"
    found = summaries.get_summary(bound(svc), "demo", THREAD)
    assert found is not None and found.covered_messages == 2
    jobs.handle(svc.deps, summaries.job("demo", task.request_id, THREAD))  # redelivered: still one summary
    assert summaries.get_summary(bound(svc), "demo", THREAD).version == found.version


def test_the_sweeper_requeues_a_forced_refresh_whose_job_was_lost(svc):
    add_turns(svc.deps, 0, KEEP + 2)
    svc.drain()
    task = summaries.request_refresh(bound(svc), "demo", THREAD)
    svc.queue.db.conn.execute("DELETE FROM jobs")  # the SQS send that never happened
    later = dataclasses.replace(svc.deps, clock=_Later(svc.deps.clock, svc.deps.settings.task_deadline_seconds + 1))
    assert sweep.sweep(later).requeued == 1
    assert queued(svc, "summarize") == 1  # as a summarize job, not an extraction
    svc.drain()
    assert tasks.get(svc.deps, "demo", task.request_id).status == TaskStatus.SUCCEEDED


class _Later:
    def __init__(self, clock, seconds):
        self.clock, self.seconds = clock, seconds

    def now(self):
        return self.clock.now() + timedelta(seconds=self.seconds)


# -- the index document ----------------------------------------------------------------------------


def test_the_summary_is_indexed_as_a_summary_document_of_the_thread(svc):
    add_turns(svc.deps, 0, 16)
    found = summaries.refresh(bound(svc), "demo", THREAD)
    assert isinstance(svc.deps.index, IndexInventory)
    docs = {d.memory_id: d for d in svc.deps.index.documents("demo")}
    doc = docs[summaries.doc_id(THREAD)]
    assert (doc.app_id, doc.tenant_id, doc.agent_id, doc.run_id) == ("app", "u1", "bot", "t1")
    assert doc.text == found.text
    other = Scope(**{**SCOPE, "tenant_id": "u2"})
    assert summaries.doc_id(other) != summaries.doc_id(THREAD)  # one document per thread and tenant


# -- with an LLM -----------------------------------------------------------------------------------


class ScriptedLLM:
    name = "scripted"

    def __init__(self, *answers):
        self.answers, self.prompts = list(answers), []

    def generate(self, *, system, prompt, response_model):
        self.prompts.append(prompt)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return response_model.model_validate(answer)


GOOD = {"sentences": [{"text": "The user plans a Lisbon trip near Alfama.", "messages": [1, 2]},
                      {"text": "Budget items were listed day by day.", "messages": [3]}],
        "open_items": [{"text": "book the hotel", "messages": [2]}],
        "decisions": [{"text": "stay near Alfama", "messages": [1, 2]}]}
BAD_NUMBERS = {"sentences": [{"text": "The user plans a Lisbon trip.", "messages": [1, 99]}]}


def with_llm(svc, llm):
    return dataclasses.replace(bound(svc), llm=llm)


def test_the_llm_summary_maps_its_numbers_to_message_ids(svc):
    add_turns(svc.deps, 0, 16)
    llm = ScriptedLLM(GOOD)
    found = summaries.refresh(with_llm(svc, llm), "demo", THREAD)
    ids = thread_ids(svc.deps)
    assert found.origin == "llm"
    assert found.sentences[0].evidence == ids[:2] and found.sentences[1].evidence == [ids[2]]
    assert found.open_items == ["book the hotel"] and found.decisions == ["stay near Alfama"]
    assert found.cited == {"book the hotel": [ids[1]], "stay near Alfama": ids[:2]}
    assert "[1] 2024-03-01 User: On day 0" in llm.prompts[0]
    assert ids[-1] not in llm.prompts[0] and "day 15" not in llm.prompts[0]  # recent turns are not shown


def test_numbers_not_shown_get_one_repair_turn(svc):
    add_turns(svc.deps, 0, 16)
    llm = ScriptedLLM(BAD_NUMBERS, GOOD)
    found = summaries.refresh(with_llm(svc, llm), "demo", THREAD)
    assert found.origin == "llm" and len(llm.prompts) == 2
    assert "[99]" in llm.prompts[1] and "not shown" in llm.prompts[1]


def test_an_answer_still_unusable_after_the_repair_falls_back_to_the_extractive_summary(svc):
    add_turns(svc.deps, 0, 16)
    llm = ScriptedLLM(BAD_NUMBERS, BAD_NUMBERS)
    found = summaries.refresh(with_llm(svc, llm), "demo", THREAD)
    assert found.origin == "extractive" and len(llm.prompts) == 2
    assert found.sentences and found.covered_messages == 10


def test_a_model_that_cannot_answer_falls_back_to_the_extractive_summary(svc):
    add_turns(svc.deps, 0, 16)
    found = summaries.refresh(with_llm(svc, ScriptedLLM(DependencyFailed("no schema"))), "demo", THREAD)
    assert found.origin == "extractive" and found.covered_messages == 10


def test_the_second_llm_refresh_shows_the_previous_summary_not_the_old_messages(svc):
    add_turns(svc.deps, 0, 16)
    summaries.refresh(with_llm(svc, ScriptedLLM(GOOD)), "demo", THREAD)
    add_turns(svc.deps, 16, 10)
    keep = {"sentences": [{"text": "The user plans a Lisbon trip near Alfama.", "previous": [1]},
                          {"text": "More budget items followed.", "messages": [1]}]}
    llm = ScriptedLLM(keep)
    found = summaries.refresh(with_llm(svc, llm), "demo", THREAD)
    ids = thread_ids(svc.deps)
    assert "[p1] The user plans a Lisbon trip near Alfama." in llm.prompts[0]
    assert "day 0 " not in llm.prompts[0] and "day 9 " not in llm.prompts[0]  # covered messages are not re-read
    assert "[1] 2024-03-01 User: On day 10 " in llm.prompts[0]
    assert found.sentences[0].evidence == ids[:2]  # kept sentence keeps its citations
    assert found.sentences[1].evidence == [ids[10]]


def test_the_second_llm_refresh_shows_the_open_items_and_decisions_and_what_it_keeps_keeps_its_citations(svc):
    # The model keeps an open item only if it sees it: before, a second refresh lost every earlier one.
    add_turns(svc.deps, 0, 16)
    summaries.refresh(with_llm(svc, ScriptedLLM(GOOD)), "demo", THREAD)
    add_turns(svc.deps, 16, 10)
    keep = {"sentences": [{"text": "The user plans a Lisbon trip near Alfama.", "previous": [1]}],
            "open_items": [{"text": "book the hotel", "previous": [1]},
                           {"text": "ask about airport transfers", "messages": [2]}],
            "decisions": [{"text": "stay near Alfama", "previous": [1], "messages": [1]}]}
    llm = ScriptedLLM(keep)
    found = summaries.refresh(with_llm(svc, llm), "demo", THREAD)
    ids = thread_ids(svc.deps)
    assert "[o1] book the hotel" in llm.prompts[0] and "[d1] stay near Alfama" in llm.prompts[0]
    assert found.open_items == ["book the hotel", "ask about airport transfers"]
    assert found.cited == {"book the hotel": [ids[1]], "ask about airport transfers": [ids[11]],
                           "stay near Alfama": [ids[10], ids[0], ids[1]]}


def test_an_llm_item_of_blanks_is_left_out_and_one_text_as_item_and_decision_cites_both(svc):
    add_turns(svc.deps, 0, 16)
    answer = {**GOOD, "open_items": [{"text": "   ", "messages": [1]}, {"text": "book the hotel", "messages": [2]}],
              "decisions": [{"text": "book the hotel", "messages": [3]}]}
    found = summaries.refresh(with_llm(svc, ScriptedLLM(answer)), "demo", THREAD)
    ids = thread_ids(svc.deps)
    assert found.open_items == ["book the hotel"] and found.decisions == ["book the hotel"]
    assert found.cited == {"book the hotel": [ids[1], ids[2]]}


def test_an_llm_sentence_or_item_that_says_nothing_is_left_out(svc):
    """A trial of the model boundary: a sentence of blanks was stored as "", and an item of a zero-width space kept."""
    add_turns(svc.deps, 0, 16)
    answer = {**GOOD, "sentences": [{"text": "   ", "messages": [1]}, *GOOD["sentences"]],
              "open_items": [{"text": "\u200b", "messages": [1]}, *GOOD["open_items"]]}
    found = summaries.refresh(with_llm(svc, ScriptedLLM(answer)), "demo", THREAD)
    assert [s.text for s in found.sentences] == [s["text"] for s in GOOD["sentences"]]
    assert found.open_items == ["book the hotel"]


@pytest.mark.parametrize("item,error", [
    ({"text": "book the hotel"}, "open item 1 cites nothing"),
    ({"text": "book the hotel", "previous": [2]}, "open item 1 cites [o2], which were not shown"),
])
def test_an_open_item_citing_nothing_or_what_was_not_shown_gets_the_repair_turn(svc, item, error):
    add_turns(svc.deps, 0, 16)
    llm = ScriptedLLM({**GOOD, "open_items": [item]}, GOOD)
    found = summaries.refresh(with_llm(svc, llm), "demo", THREAD)
    assert found.origin == "llm" and error in llm.prompts[1]
    assert found.open_items == ["book the hotel"]


# -- fsck and reindex know summary documents -----------------------------------------------------------


def test_fsck_counts_a_summary_document_as_expected_and_repair_keeps_it(svc):
    from memlane.services.fsck import fsck

    add_turns(svc.deps, 0, 16)
    summaries.refresh(bound(svc), "demo", THREAD)
    report = fsck(svc.deps, "demo", repair=True)
    assert (report.orphans, report.missing, report.stale) == (0, 0, 0)
    assert summaries.doc_id(THREAD) in {d.memory_id for d in svc.deps.index.documents("demo")}


def test_fsck_repairs_a_lost_or_stale_summary_document(svc):
    from memlane.services.fsck import fsck

    add_turns(svc.deps, 0, 16)
    found = summaries.refresh(bound(svc), "demo", THREAD)
    # a crash between the table write and the index
    svc.deps.index.delete("demo", [summaries.doc_id(THREAD)], app_id=THREAD.app_id, tenant_id=THREAD.tenant_id)
    report = fsck(svc.deps, "demo", repair=True)
    assert report.missing == 1 and report.repaired == 1
    doc = {d.memory_id: d for d in svc.deps.index.documents("demo")}[summaries.doc_id(THREAD)]
    assert doc.text == found.text
    assert fsck(svc.deps, "demo").missing == 0


def test_reindex_rebuilds_summary_documents(svc):
    from memlane.services.reindex import reindex

    add_turns(svc.deps, 0, 16)
    found = summaries.refresh(bound(svc), "demo", THREAD)
    reindex(svc.deps, "demo")
    doc = {d.memory_id: d for d in svc.deps.index.documents("demo")}.get(summaries.doc_id(THREAD))
    assert doc is not None and doc.text == found.text


# -- the command line ----------------------------------------------------------------------------------


def test_the_cli_refreshes_and_shows_a_thread_summary(tmp_path):
    import json
    import os
    import subprocess
    import sys

    def memlane(*args):
        # one process per command, as a user runs it (--local owns the data dir until the process ends)
        done = subprocess.run([sys.executable, "-m", "memlane.cli", "--local", "--data-dir", str(tmp_path / "cli"),
                               *args], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "MEMLANE_EMBEDDER": "hashing", "MEMLANE_LOG_LEVEL": "ERROR"})
        return done.returncode, done.stdout, done.stderr

    assert memlane("stores", "create", "demo", "--summary-keep-recent", "2")[0] == 0
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps([{**turn(i), "created_at": turn(i)["created_at"].isoformat()} for i in range(5)]))
    who = ("--app", "app", "--tenant", "u1", "--agent", "bot")
    assert memlane("add", "demo", *who, "--run", "t1", "--messages", str(turns))[0] == 0
    code, out, _ = memlane("--json", "summary", "refresh", "demo", "t1", *who, "--wait")
    assert code == 0 and json.loads(out)["status"] == "SUCCEEDED"
    code, out, _ = memlane("--json", "summary", "get", "demo", "t1", *who)
    shown = json.loads(out)
    assert code == 0 and shown["covered_messages"] == 3 and shown["sentences"]
    code, out, _ = memlane("summary", "get", "demo", "t1", *who)
    assert code == 0 and "3 messages" in out and "On day 0" in out
    code, _, err = memlane("summary", "get", "demo", "nope", "--app", "app", "--tenant", "u1")
    assert code == 2 and "thread_not_found" in err


# -- a refresh racing the thread's deletion leaves nothing behind ------------------------------------------


class DeleteBefore:
    """Runs `deletion` once, just before the first call of one of `methods` that concerns a summary."""

    def __init__(self, inner, methods, deletion):
        self.inner, self.methods, self.deletion, self.done = inner, methods, deletion, False

    def __getattr__(self, name):
        real = getattr(self.inner, name)
        if name not in self.methods:
            return real

        def wrapped(*args, **kwargs):
            about_summary = "SUM#" in repr(args) or summaries.DOC_PREFIX in repr(args)
            if about_summary and not self.done:
                self.done = True
                self.deletion()
            return real(*args, **kwargs)
        return wrapped


def _leftovers(svc):
    items = svc.deps.table.query(tenant_pk("demo", "app", "u1"), prefix="SUM#", limit=10).items
    docs = [d for d in svc.deps.index.documents("demo") if d.memory_id == summaries.doc_id(THREAD)]
    return items, docs


def test_a_refresh_that_writes_after_its_thread_was_deleted_leaves_no_summary(svc):
    add_turns(svc.deps, 0, 16)
    delete = lambda: erase.delete_run(svc.deps, "demo", scope=SCOPE)  # noqa: E731
    racing = dataclasses.replace(bound(svc), table=DeleteBefore(bound(svc).table, ("put", "transact"), delete))
    summaries.refresh(racing, "demo", THREAD)
    assert racing.table.done, "the deletion ran between the refresh's read and its write"
    assert _leftovers(svc) == ([], [])


def test_a_refresh_that_indexes_after_its_thread_was_deleted_leaves_no_document(svc):
    add_turns(svc.deps, 0, 16)
    delete = lambda: erase.delete_run(svc.deps, "demo", scope=SCOPE)  # noqa: E731
    racing = dataclasses.replace(bound(svc), index=DeleteBefore(bound(svc).index, ("upsert",), delete))
    summaries.refresh(racing, "demo", THREAD)
    assert racing.index.done
    assert _leftovers(svc) == ([], [])


def test_a_refresh_that_indexes_while_the_tenant_is_erased_leaves_no_document(svc):
    add_turns(svc.deps, 0, 16)

    def erase_tenant():
        erase.run_erasure(svc.deps, erase.request_erasure(svc.deps, app_id="app", tenant_id="u1",
                                                          principal="ops").erasure_id)

    racing = dataclasses.replace(bound(svc), index=DeleteBefore(bound(svc).index, ("upsert",), erase_tenant))
    summaries.refresh(racing, "demo", THREAD)
    assert racing.index.done
    assert _leftovers(svc) == ([], [])


class FailOnce:
    """The index, failing the first summary upsert (a crash between the table write and the index write)."""

    def __init__(self, inner):
        self.inner, self.failed = inner, False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def upsert(self, store, docs):
        if not self.failed and any(d.memory_id.startswith(summaries.DOC_PREFIX) for d, _ in docs):
            self.failed = True
            raise RuntimeError("the process died here")
        return self.inner.upsert(store, docs)


def test_a_refresh_that_died_before_indexing_is_indexed_by_the_redelivered_job(svc):
    add_turns(svc.deps, 0, 16)
    dying = dataclasses.replace(bound(svc), index=FailOnce(bound(svc).index))
    with pytest.raises(RuntimeError):
        summaries.refresh(dying, "demo", THREAD)
    written = summaries.get_summary(bound(svc), "demo", THREAD)
    assert written is not None and _leftovers(svc)[1] == []  # in the table, not findable
    summaries.refresh(bound(svc), "demo", THREAD)  # the job again: nothing new to summarise
    [doc] = _leftovers(svc)[1]
    assert doc.text == written.text
    assert summaries.get_summary(bound(svc), "demo", THREAD).version == written.version  # not rewritten


def test_a_message_a_refresh_has_read_is_not_noted_late_by_its_own_add(svc):
    """Under concurrent adds an add's check came after a refresh that had already read its message: the
    add noted it as late, and the next refresh summarised it a second time (counted twice)."""
    add_turns(svc.deps, 0, 15)
    before = svc.deps.clock.now()  # when the last add stores its message: before the refresh reads it
    add_turns(svc.deps, 15, 1)
    first = summaries.refresh(bound(svc), "demo", THREAD)
    newest = svc.deps.repo.get_messages("demo", THREAD, [thread_ids(svc.deps)[-KEEP - 1]])
    store = svc.deps.repo.get_store("demo")
    summaries.after_add(bound(svc), store, THREAD, newest, before)  # the add's own check, running late
    assert summaries.get_summary(bound(svc), "demo", THREAD).late == []
    again = summaries.refresh(bound(svc), "demo", THREAD, force=True)
    assert again.covered_messages == first.covered_messages == len(thread_ids(svc.deps)) - KEEP


def test_a_refresh_of_a_thread_deleted_and_taken_again_meanwhile_leaves_no_summary_of_the_old_messages(svc):
    """The write needs the thread's registry entry, and a new add to the same thread id had made it again:
    a summary of the deleted messages was written into the new thread."""
    add_turns(svc.deps, 0, 16)
    real, fired = summaries._summarise, []

    def deleted_and_taken_again(deps, store, scope, previous, batch):
        if not fired:
            fired.append(True)
            erase.delete_run(svc.deps, "demo", scope=SCOPE)
            ingest.add(svc.deps, "demo", scope=SCOPE, request_id="again",
                       messages=[{"role": "user", "content": "A new conversation about gardening."}])
        return real(deps, store, scope, previous, batch)

    summaries._summarise = deleted_and_taken_again
    try:
        summaries.refresh(bound(svc), "demo", THREAD, force=True)
    finally:
        summaries._summarise = real
    assert fired
    left = summaries.get_summary(bound(svc), "demo", THREAD)
    assert left is None or "Lisbon" not in left.text
    assert summaries.doc_id(THREAD) not in {d.memory_id for d in svc.deps.index.documents("demo")
                                            if "Lisbon" in d.text}


def test_an_add_under_a_forced_refreshs_request_id_is_refused_not_swallowed(svc):
    """A refresh's task holds its request id in the tenant's request-id space: an add sent under it is another
    request, refused (409) — not a replay answered SUCCEEDED whose message is never stored."""
    from memlane.domain.errors import Conflict

    add_turns(svc.deps, 0, 2)
    task = summaries.request_refresh(bound(svc), "demo", THREAD)
    before = thread_ids(svc.deps)
    with pytest.raises(Conflict) as refused:
        ingest.add(svc.deps, "demo", scope=SCOPE, request_id=task.request_id,
                   messages=[{"role": "user", "content": "My new door code is 4417."}])
    assert refused.value.code == "request_id_reused"
    assert thread_ids(svc.deps) == before


def test_a_forced_refresh_of_a_thread_that_does_not_exist_is_404_and_writes_no_task(svc):
    from memlane.domain.errors import NotFound

    with pytest.raises(NotFound) as missing:
        summaries.request_refresh(bound(svc), "demo", Scope(**{**SCOPE, "run_id": "never-made"}))
    assert missing.value.code == "thread_not_found"
    # Its agent named only when one was (a trial read "thread 'x' of agent '__default__' not found").
    assert missing.value.message == "thread 'never-made' of agent 'bot' not found"
    with pytest.raises(NotFound) as unnamed:
        summaries.request_refresh(bound(svc), "demo", Scope(app_id="app", tenant_id="u1", run_id="never-made"))
    assert unnamed.value.message == "thread 'never-made' not found"
    assert svc.deps.table.query(tenant_pk("demo", "app", "u1"), limit=10).items == []
    assert queued(svc, "summarize") == 0


def test_a_forced_refresh_whose_thread_was_deleted_before_it_ran_fails_and_its_summary_is_no_thread(svc):
    """A trial: the thread deleted between POST .../summary and its job, the task said SUCCEEDED (an extraction's
    says FAILED), and GET .../summary said "no summary yet ... or a refresh is asked for" of a thread that no
    longer exists, where GET .../threads/{id} and POST .../summary say thread_not_found."""
    add_turns(svc.deps, 0, KEEP + 2)
    task = summaries.request_refresh(bound(svc), "demo", THREAD)
    erase.delete_run(svc.deps, "demo", scope=SCOPE)
    svc.drain()
    done = tasks.get(svc.deps, "demo", task.request_id)
    assert done.status == TaskStatus.FAILED and "deleted" in done.error
    assert summaries.get_summary(bound(svc), "demo", THREAD) is None
    for gone in (THREAD, Scope(**{**SCOPE, "run_id": "never-made"})):
        with pytest.raises(NotFound) as missing:
            summaries.read(bound(svc), "demo", gone)
        assert missing.value.code == "thread_not_found"


def test_a_forced_refresh_given_up_on_while_it_ran_ends_succeeded_with_its_summary(svc, monkeypatch):
    """The queue's last delivery gave the job up (FAILED) while an earlier one still summarised: the summary is
    written, so the task says SUCCEEDED — as an extraction's does — not FAILED beside it (a regression trial)."""
    add_turns(svc.deps, 0, KEEP + 2)
    svc.drain()
    task = summaries.request_refresh(bound(svc), "demo", THREAD)
    refresh = summaries.refresh

    def given_up_meanwhile(deps, store, scope, **kwargs):
        jobs.give_up(svc.deps, summaries.job("demo", task.request_id, THREAD), "gave up after 5 deliveries")
        assert tasks.get(svc.deps, "demo", task.request_id).status == TaskStatus.FAILED
        return refresh(deps, store, scope, **kwargs)

    monkeypatch.setattr(summaries, "refresh", given_up_meanwhile)
    done = summaries.run_job(bound(svc), summaries.job("demo", task.request_id, THREAD))
    stored = tasks.get(svc.deps, "demo", task.request_id)
    assert done is not None and done.status == stored.status == TaskStatus.SUCCEEDED and stored.error is None
    assert summaries.get_summary(bound(svc), "demo", THREAD).covered_messages == 2
