"""Deletion: a run (its messages and run-scoped memories), or a whole tenant in every store.

Both remove table items and index documents, then compact the local files (SQLite keeps deleted
bytes in free pages, WAL frames and FTS segments until then). Run deletion also redacts the copies
of the run's content that other records of the tenant keep (services/redaction.py). Tenant erasure
runs as an asynchronous task: it is idempotent (re-running finds less and less to delete) and safe
to retry after a failure; its report counts what it deleted per store and record kind.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Callable, Sequence

from ..domain.errors import ConditionFailed, Conflict, MemlaneError, Retryable
from ..domain.ids import sortable_id
from ..domain.models import Erasure, Memory, TaskStatus
from ..domain.scope import Scope, exact_scope, validate_id, write_scope
from ..ports import IndexInventory, Job
from ..repository import activity_pk, tenant_pk
from . import redaction, stores, summaries
from .deps import Deps
from .reinstate import reinstate
from .rehome import rehome

_RACE_RETRIES = 20  # each retry means an add to the run committed first


def delete_run(deps: Deps, store: str, *, scope: dict[str, Any]) -> dict[str, int]:
    """Delete a run's messages, its memories and its registry entry, redact every copy of them kept
    elsewhere in the tenant (task outcomes, dream actions, profiles), then compact the local files.
    Returns what was deleted and rewritten."""
    deps.repo.get_store(store)
    run = exact_scope(scope)
    deps = deps.for_tenant(store, run.app_id, run.tenant_id)
    # The registry entry first: a job of this run that finds it gone after its writes withdraws them itself
    # (clear_run); one that still found it wrote before the listing below, which therefore finds its writes.
    # With the entry goes a job that clears the run if this request dies before it has (a crash, a kill -9:
    # the client unanswered may never retry); due later, it is dropped once the run is cleared here.
    job = clear_run_job(store, run, sortable_id(deps.clock.now()))
    for _ in range(_RACE_RETRIES):
        info = deps.repo.get_scope(store, run)
        if info is None:
            # No entry (deleted before, being deleted, or a run of explicit writes alone): the job all the same,
            # or a deletion killed now would be finished only by a retry, which a client may never send.
            deps.queue.enqueue(job, delay=deps.settings.sync_retry_delay)
            break
        try:
            deps.queue.commit(deps.table, deps.repo.run_removal(store, info), job,  # with its place in the threads list
                              delay=deps.settings.sync_retry_delay)
            break
        except ConditionFailed:
            continue  # an add moved the run's activity since: read it again
    else:
        raise Conflict("the run is too busy to delete; retry", code="busy")
    # Rewritten as an erasure is (at most once a minute): a thread's rows, moved between pages as it grew, leave earlier
    # copies in pages' unused space that zeroing freed cells misses (trial A, session 38: 6 of 6 thread deletions).
    cleared = clear_run(deps, store, run, rewrite=True)
    deps.queue.discard(job)
    return cleared


CLEAR_RUN = "clear_run"


def clear_run_job(store: str, run: Scope, name: str) -> Job:
    return Job.of_tenant(CLEAR_RUN, store, name, run.app_id, run.tenant_id).model_copy(
        update={"agent_id": run.agent_id, "run_id": run.run_id})


def finish_run_deletion(deps: Deps, job: Job) -> None:
    """The `clear_run` job: a run deletion that died after removing the run's registry entry is finished.
    Not if an add has made the run again since: its messages are the new add's too, and the client that
    was not answered deletes again."""
    assert job.app_id and job.tenant_id and job.agent_id and job.run_id
    run = Scope(app_id=job.app_id, tenant_id=job.tenant_id, agent_id=job.agent_id, run_id=job.run_id)
    tenant = deps.for_tenant(job.store, run.app_id, run.tenant_id)
    if tenant.repo.get_scope(job.store, run) is not None:
        return
    left, _ = tenant.repo.newest_messages(job.store, run, limit=1)
    # Else cleared (the summary goes last, memories before messages) — unless the run held memories alone (explicit
    # writes): then its memories say whether it is.
    if left or tenant.repo.get_summary(job.store, run) is not None or any(
            _said_in(i, run) for i in tenant.repo.tenant_keys(job.store, run.app_id, run.tenant_id, prefix="MEM#")):
        # A deletion cut short leaves earlier copies of its rows in pages' unused space: the files are rewritten.
        clear_run(tenant, job.store, run, rewrite=True)
    else:  # cleared, and cut short before its compaction, perhaps (trial B: the words stayed in the logs for good)
        deps.compact(rewrite=True)


def clear_run(deps: Deps, store: str, run: Scope, *, documents: Sequence[str] = (),
              rewrite: bool = False) -> dict[str, int]:
    """What delete_run does once the run's registry entry is gone (also what a job that raced the deletion
    calls, naming the extra index `documents` it may have written back: the messages it indexed). The tenant's
    memory is left as if the run had never been said: what its memories superseded is reinstated
    (services/reinstate.py; an explicit delete of one memory does not do that)."""
    message_items = list(deps.repo.tenant_keys(store, run.app_id, run.tenant_id,
                                               prefix=f"MSG#{run.agent_id}#{run.run_id}#"))
    messages = [(i["pk"], i["sk"]) for i in message_items]
    every_memory = list(deps.repo.tenant_keys(store, run.app_id, run.tenant_id, prefix="MEM#"))
    memory_items = [i for i in every_memory if _said_in(i, run)]
    memory_ids = [i["memory_id"] for i in memory_items]
    # Index first: a memory or message must never stay findable after its table item is gone. The summary's
    # document too, though its item goes last: a job resumed after a crash between the two finds the run
    # cleared (finish_run_deletion) and never looks for the document.
    indexed = list(dict.fromkeys([*memory_ids, *(i["message_id"] for i in message_items), *documents,
                                  summaries.doc_id(run)]))
    if indexed:
        deps.index.delete(store, indexed, app_id=run.app_id, tenant_id=run.tenant_id)
    # Read again: a supersede of one of them by another run's add since the listing is planned with.
    memories = deps.repo.get_memories(store, run.app_id, run.tenant_id, memory_ids)
    # What another thread said again of them (a NOOP at write time) is written in that thread, before the
    # redaction below empties those outcomes (services/rehome.py).
    rehome(deps, store, run, memories)
    # What the run's memories superseded is current again before they go (a retry still finds them to follow),
    # and before redaction recomputes the profiles from what is current.
    reinstate(deps, store, memories, (Memory.model_validate(i) for i in every_memory if not _said_in(i, run)))
    # Copies before the items themselves: a retry after a crash still finds the memories to redact.
    redacted = redaction.redact(deps, store, run.app_id, run.tenant_id, memory_ids=set(memory_ids), run=run)
    # Memories before messages: a run with no message left has no memory left either (finish_run_deletion).
    gone = _deleted_as_read(deps, store, memories)
    # What a dream made of the run, applied after the listing and before its memories went, goes too (one applied
    # later finds them gone and fails): a merge drawing on it, or a memory of the run standing on its listed turns.
    # Not what a new add that made the run again wrote since (its own turns): that add keeps it, as in clear_memories.
    said = {i["message_id"] for i in message_items}
    late = [Memory.model_validate(i) for i in deps.repo.tenant_keys(store, run.app_id, run.tenant_id, prefix="MEM#")
            if i["memory_id"] not in memory_ids and (_drawn_from(i, run) or Scope.model_validate(i["scope"]) == run
                                                     and i.get("evidence") and said.issuperset(i["evidence"]))]
    if late:
        memory_ids += [m.memory_id for m in late]
        indexed += [m.memory_id for m in late]
        deps.index.delete(store, [m.memory_id for m in late], app_id=run.app_id, tenant_id=run.tenant_id)
        reinstate(deps, store, late)
        gone += _deleted_as_read(deps, store, late)
    deps.repo.delete_items(messages)
    # The deletion markers of its memories (their ids and its messages' ids): no job of the run is left to guard against.
    deps.repo.delete_items([(i["pk"], i["sk"]) for i in deps.repo.tenant_keys(store, run.app_id, run.tenant_id,
                                                                              prefix="GONE#")
                            if said.intersection(i.get("evidence") or ())])
    # Again, with the tenant read afresh: another deletion may have moved a supersede onto the run's memories
    # after this one read its tenant (its successor gone, it named one of these).
    reinstate(deps, store, gone)
    # And the copies again: a write of another run's job between the first redaction and the deletion (an
    # update whose undo record quotes one of these memories) found them still there and kept its copy; one
    # written from now on finds them gone (redaction.after_compare).
    again = redaction.redact(deps, store, run.app_id, run.tenant_id, memory_ids=set(memory_ids), run=run)
    if indexed:  # again: an edit or an add that wrote before the items went may have indexed after the first delete
        deps.index.delete(store, indexed, app_id=run.app_id, tenant_id=run.tenant_id)
    # After the registry entry: from then on no refresh can write the summary back (repository/summaries.py).
    summary = summaries.delete(deps, store, run)
    deps.compact(rewrite=rewrite)
    return {"messages": len(messages), "memories": len(memory_ids), "summaries": summary,
            "tasks_redacted": redacted.tasks + again.tasks,
            "dream_actions_redacted": redacted.dream_actions + again.dream_actions,
            "profiles_recomputed": redacted.profiles + again.profiles}


def _said_in(memory_item: dict[str, Any], run: Scope) -> bool:
    """A memory of the run, or one whose text carries words of the run's memories (a dream's merge of several
    runs' memories): as if the run had never been said, neither is."""
    return Scope.model_validate(memory_item["scope"]) == run or _drawn_from(memory_item, run)


def _drawn_from(memory_item: dict[str, Any], run: Scope) -> bool:
    return any(Scope.model_validate(s) == run for s in memory_item.get("drawn_from", ()))


def _deleted_as_read(deps: Deps, store: str, memories: list[Memory]) -> list[Memory]:
    """Delete the run's memories as they were read when what they superseded was reinstated: one superseded
    meanwhile (an extraction of another run updated it) is read again and reinstated past again. Returns them
    as deleted."""
    deleted: list[Memory] = []
    for _ in range(_RACE_RETRIES):
        if not memories:
            return deleted
        try:
            deps.repo.delete_memories_as_read(store, memories)
            return [*deleted, *memories]
        except ConditionFailed:
            s = memories[0].scope
            left = {m.memory_id: m for m in deps.repo.get_memories(store, s.app_id, s.tenant_id,
                                                                    [m.memory_id for m in memories])}
            deleted += [m for m in memories if m.memory_id not in left]  # a transaction before the one refused
            memories = list(left.values())
            reinstate(deps, store, [*deleted, *memories])
    raise Conflict("the run's memories are too busy to delete; retry", code="busy")


def clear_memories(deps: Deps, store: str, run: Scope, memory_ids: Sequence[str], *, evidence: Sequence[str]) -> None:
    """Take back what a job of a deleted run wrote after the run's id was taken again by a new add: the
    memories among `memory_ids` that stand only on the deleted messages (`evidence`), and those messages'
    index documents — not the run, which is the new add's now. What they superseded is reinstated, as in
    clear_run."""
    said = set(evidence)
    mine = [m for m in deps.repo.get_memories(store, run.app_id, run.tenant_id, list(memory_ids))
            if m.scope == run and m.evidence and said.issuperset(m.evidence)]
    ids = [m.memory_id for m in mine]
    deps.index.delete(store, list(dict.fromkeys([*ids, *evidence])), app_id=run.app_id, tenant_id=run.tenant_id)
    if ids:
        reinstate(deps, store, mine)  # before redaction recomputes the profiles from what is current
        redaction.redact(deps, store, run.app_id, run.tenant_id, memory_ids=set(ids))
        deps.repo.delete_items([(tenant_pk(store, run.app_id, run.tenant_id), f"MEM#{i}") for i in ids])
    deps.compact()


def request_erasure(deps: Deps, *, app_id: Any, tenant_id: Any, principal: str) -> Erasure:
    """A new erasure of the tenant, or the one asked for before that has not started yet: it erases everything the
    tenant has when it runs, so a request repeated (a retry after a lost answer) is that erasure. One already running
    is not: a store it has passed may have been written since."""
    app_id, tenant_id = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    waiting = next((e for e in deps.repo.erasures() if e.status == TaskStatus.PENDING
                    and (e.app_id, e.tenant_id) == (app_id, tenant_id)), None)
    if waiting is not None:
        return waiting
    now = deps.clock.now()
    erasure = Erasure(erasure_id=sortable_id(now), app_id=app_id, tenant_id=tenant_id, principal=principal,
                      created_at=now, updated_at=now)
    # The erasure and its job in one commit (on SQS the job is sent after the record: a job lost in between is sent
    # again by the sweeper, `sweep`).
    deps.queue.commit(deps.table, [deps.repo.erasure_put(erasure)], erasure_job(erasure.erasure_id))
    return erasure


def erasure_job(erasure_id: str) -> Job:
    return Job(kind="erase", store="~all", request_id=erasure_id)


def run_erasure(deps: Deps, erasure_id: str) -> Erasure:
    repo = deps.repo
    erasure = repo.get_erasure(erasure_id)
    if erasure.status == TaskStatus.SUCCEEDED:
        return erasure
    resumed = erasure.status == TaskStatus.RUNNING  # a crash cut an earlier run of it short
    erasure = erasure.model_copy(update={"status": TaskStatus.RUNNING, "updated_at": deps.clock.now()})
    repo.put_erasure(erasure)
    deleted = {store: dict(counts) for store, counts in erasure.deleted.items()}

    def keep(store: str, counts: dict[str, int]) -> None:
        """Kept as it goes, what is about to go before it goes: a job resumed after a crash finds gone what was
        deleted, and counts only what is left. Per kind the larger count stands (what was listed before the crash,
        or what the resumed job found)."""
        nonlocal erasure
        if not counts:
            return
        mine = deleted.setdefault(store, {})
        for kind, n in counts.items():
            mine[kind] = max(mine.get(kind, 0), n)
        erasure = erasure.model_copy(update={"deleted": deleted, "updated_at": deps.clock.now()})
        repo.put_erasure(erasure)

    cursor = None
    while True:
        stores, cursor = repo.list_stores(100, cursor)
        for store in stores:
            name = store.name
            keep(name, _erase_in_store(deps, name, erasure.app_id, erasure.tenant_id,
                                       listed=lambda counts, name=name: keep(name, counts)))
            if resumed:
                _documents_left(deps, name, erasure.app_id, erasure.tenant_id)
            deps.faults.point("erase.after_store")
        if cursor is None:
            break
    if deps.dead_letters is not None:  # refused adds of the tenant, which a redrive would write again
        erasure = erasure.model_copy(update={"dead_letters": erasure.dead_letters + _drop_dead_letters(deps, erasure)})
    deps.faults.point("erase.before_done")
    documents = sum(c.get("index_documents", 0) for c in deleted.values())
    # Nothing erased may linger in free pages, pages' unused space, WAL frames or segments; a tenant with nothing
    # rewrites nothing (a trial: erasures of an empty tenant, one after another, each rewrote every file).
    deps.compact(rewrite=any(n for counts in deleted.values() for n in counts.values()))
    done = erasure.model_copy(update={"status": TaskStatus.SUCCEEDED, "deleted": deleted,
                                      "deleted_items": sum(n for c in deleted.values() for k, n in c.items()
                                                           if k != "index_documents"),
                                      "deleted_documents": documents, "stores": sorted(deleted),
                                      "updated_at": deps.clock.now()})
    repo.put_erasure(done)
    return done


def _documents_left(deps: Deps, store: str, app_id: str, tenant_id: str) -> None:
    """After a crash: the tenant's documents with no item behind them. A job that indexed after the erasure listed the
    tenant's items takes its documents back itself when it sees them gone — unless the crash killed it first: its task
    erased, no delivery of it runs again (a fault schedule: a memory left searchable in the index). Only an index that
    lists its documents (the embedded one) is swept; a document of what the tenant wrote since stays with its item."""
    if not isinstance(deps.index, IndexInventory):
        return
    tenant = deps.for_tenant(store, app_id, tenant_id)
    docs = [d for d in deps.index.documents(store) if (d.app_id, d.tenant_id) == (app_id, tenant_id)
            and d.record_type in ("memory", "message")]
    held = {m.memory_id for m in tenant.repo.get_memories(store, app_id, tenant_id,
                                                          [d.memory_id for d in docs if d.record_type == "memory"])}
    for d in docs:
        if d.record_type == "message" and tenant.repo.get_messages(
                store, Scope(app_id=app_id, tenant_id=tenant_id, agent_id=d.agent_id, run_id=d.run_id), [d.memory_id]):
            held.add(d.memory_id)
    if left := [d.memory_id for d in docs if d.memory_id not in held]:
        tenant.index.delete(store, left, app_id=app_id, tenant_id=tenant_id)


def _drop_dead_letters(deps: Deps, erasure: Erasure) -> int:
    """The tenant's adds out of the ingestion dead letters. One scan at a time: a scan holds every message it reads
    out of sight, so an erasure reading beside it saw an empty queue and kept its tenant's adds (a regression
    trial); one that finds a scan under way is retried (its job fails, the queue delivers it again)."""
    assert deps.dead_letters is not None
    if not deps.repo.take_dead_letter_lease(erasure.erasure_id, deps.clock.now(), DEAD_LETTER_LEASE):
        raise Retryable("another erasure is reading the ingestion dead letters; this one reads them after it",
                        code="busy")
    try:
        return deps.dead_letters.drop(_queued_for(erasure.app_id, erasure.tenant_id))
    finally:
        deps.repo.release_dead_letter_lease(erasure.erasure_id)


DEAD_LETTER_LEASE = timedelta(minutes=10)  # longer than a scan: at most 10,000 messages (adapters/sqs/dead_letters)


def _queued_for(app_id: str, tenant_id: str) -> Callable[[str], bool]:
    """Whether a queued add's body (`{store, request_id, scope, ...}`) is written in the tenant's scope (its defaults
    applied: a scope without `tenant_id` is the `__default__` tenant's)."""
    def matches(body: str) -> bool:
        try:
            scope = write_scope(json.loads(body).get("scope"))
        except (ValueError, AttributeError, TypeError, RecursionError, MemlaneError):
            return False  # not an add at all (any producer can send one nested past the parser's depth)
        return scope.app_id == app_id and scope.tenant_id == tenant_id
    return matches


def fail_erasure(deps: Deps, erasure_id: str, reason: str) -> None:
    """Mark an erasure FAILED once its job is given up on (a finished one keeps its outcome and reason)."""
    erasure = deps.repo.get_erasure(erasure_id)
    if erasure.status.finished:
        return
    deps.repo.put_erasure(erasure.model_copy(update={"status": TaskStatus.FAILED, "error": reason[:1000],
                                                     "updated_at": deps.clock.now()}))


# Sort-key prefix → the record kind an erasure report counts.
_KINDS = {"MSG#": "messages", "MEM#": "memories", "TASK#": "tasks", "SCOPE#": "scopes", "DREAM#": "dream_tasks",
          "DACT#": "dream_actions", "PROFILE#": "profiles", "ACTOR#": "profiles", "THREAD#": "threads",
          "RECENT#": "thread_order", "SUM#": "summaries", "GONE#": "deletion_markers"}


def _kind(sk: str) -> str:
    return next((kind for prefix, kind in _KINDS.items() if sk.startswith(prefix)), "other")


def _erase_in_store(deps: Deps, store: str, app_id: str, tenant_id: str,
                    listed: Callable[[dict[str, int]], None]) -> dict[str, int]:
    """Delete the tenant's items of one store; the counts per record kind (empty: nothing there). `listed` is told
    the counts of what is found, before it is deleted (the report must not lose it to a crash half way)."""
    tenant = deps.for_tenant(store, app_id, tenant_id)  # the tenant's partition, with its own credentials
    # The runs' registry entries first, as delete_run does: a job racing the erasure either wrote before
    # the listing below (which then finds its writes) or finds its run gone after and withdraws them.
    gates = list(tenant.repo.tenant_keys(store, app_id, tenant_id, prefix="SCOPE#"))
    listed(_counts(gates))
    tenant.repo.delete_items([(i["pk"], i["sk"]) for i in gates])
    # Not the gates again: a run an add makes anew after this point is that add's (kept whole, below).
    items = list(tenant.repo.tenant_keys(store, app_id, tenant_id))
    # The tenant's index documents: its memories, its messages (searchable records too) and its threads' summaries.
    documents = [i["memory_id"] for i in items if i["sk"].startswith("MEM#")]
    documents += [i["message_id"] for i in items if i["sk"].startswith("MSG#")]
    summary_docs = [summaries.doc_id(Scope.model_validate(i["scope"])) for i in items if i["sk"].startswith("SUM#")]
    # Global partitions that name the tenant: each task's request-id guard and open-task entry, the activity
    # registry, the dream task and action pointers.
    requests = [i["request_id"] for i in items if i["sk"].startswith("TASK#")]
    guards = [key for r in requests for key in (deps.repo.request_pointer_key(store, app_id, tenant_id, r),
                                                deps.repo.open_task_key(store, r, app_id, tenant_id))]
    outside = deps.repo.dream_keys_outside(store, app_id, tenant_id, items)  # activity registry, dream pointers
    listed(_counts(gates + items, requests, outside, len(documents) + len(summary_docs)))
    # What is found only from the items goes before them: a job resumed after a crash lists the partition again
    # and finds nothing of what they named (a trial: request-id pointers, open-task entries and dream pointers
    # left for good). The activity registry after them: its entries are found by the tenant's prefix, and they
    # are how a store's purge finds the tenant's items (never items without an entry: know_scope).
    registry = [key for key in outside if key[0] == activity_pk(store)]
    if documents or summary_docs:
        tenant.index.delete(store, documents + summary_docs, app_id=app_id, tenant_id=tenant_id)
    deps.repo.delete_items(guards + [key for key in outside if key not in registry])
    tenant.repo.delete_items([(i["pk"], i["sk"]) for i in items])
    deps.faults.point("erase.mid_store")
    # Thread summaries' documents again after their items (as run deletion deletes them): a refresh indexing
    # meanwhile finds its item gone and removes its own document; one that indexed before is removed here. The
    # memories' and messages' again: an edit, or an add, that wrote before the items went may have indexed
    # after the first delete (an add indexing later finds its messages gone and removes its own documents).
    again = documents + summary_docs
    if again:
        tenant.index.delete(store, again, app_id=app_id, tenant_id=tenant_id)
    deps.repo.delete_items(registry)
    late, late_docs = _written_from_what_went(deps, tenant, store, app_id, tenant_id, items)
    _runs_made_meanwhile(deps, tenant, store, app_id, tenant_id)
    return _counts(gates + items + late, requests, outside, len(documents) + len(summary_docs) + late_docs)


def _counts(items: list[dict[str, Any]], requests: Sequence[str] = (), outside: Sequence[Any] = (),
            documents: int = 0) -> dict[str, int]:
    """An erasure report's counts per record kind (none of a kind that had nothing)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[_kind(item["sk"])] = counts.get(_kind(item["sk"]), 0) + 1
    if requests:
        counts["request_ids"] = len(requests)
    if outside:
        counts["registry_entries"] = len(outside)
    if documents:
        counts["index_documents"] = documents
    return counts


def _written_from_what_went(deps: Deps, tenant: Deps, store: str, app_id: str, tenant_id: str,
                            items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Delete what a job that read the tenant before the erasure wrote after its listing, now that the listed items
    are gone: memories and summaries citing an erased message, the write-time actions of an erased task. Such a
    job's own check after its writes can pass — an add made its run again, and its messages were not gone yet —
    and the listing, page by page over random ids, never saw what it wrote. What a later add wrote of its own
    messages stays. Returns the items deleted and how many index documents."""
    said = {i["message_id"] for i in items if i["sk"].startswith("MSG#")}
    tasks = {i["request_id"] for i in items if i["sk"].startswith("TASK#")}
    if not said and not tasks:
        return [], 0
    late = [i for i in tenant.repo.tenant_keys(store, app_id, tenant_id)
            if i["sk"].startswith(("MEM#", "SUM#")) and (_cited(i) & said or i.get("request_id") in tasks)
            or i["sk"].startswith("DACT#") and i.get("task_id") in tasks]
    documents = [i["memory_id"] for i in late if i["sk"].startswith("MEM#")]
    documents += [summaries.doc_id(Scope.model_validate(i["scope"])) for i in late if i["sk"].startswith("SUM#")]
    if documents:  # index first, as everywhere: nothing stays findable once its item is gone
        tenant.index.delete(store, documents, app_id=app_id, tenant_id=tenant_id)
    # The pointers of its actions (global: they name the tenant) first, as the listed ones' went before them.
    deps.repo.delete_items(deps.repo.dream_pointers(store, late))
    tenant.repo.delete_items([(i["pk"], i["sk"]) for i in late])
    if documents:  # again: the job may have indexed after the first delete
        tenant.index.delete(store, documents, app_id=app_id, tenant_id=tenant_id)
    return late, len(documents)


def forget_job(deps: Deps, store: str, task_id: str, run: Scope) -> None:
    """What a job that ran beside its run's deletion (or its tenant's erasure) wrote outside the run's items, taken
    back with them: its write-time actions and their pointers, and — the run still gone — the run's activity registry
    entry, which names the tenant (a trial: a scheduled dream made a task in the erased partition from it)."""
    actions = [i for i in deps.repo.tenant_keys(store, run.app_id, run.tenant_id, prefix="DACT#")
               if i.get("task_id") == task_id]
    deps.repo.delete_items(deps.repo.dream_pointers(store, actions))  # pointers first, as an erasure's
    deps.repo.delete_items([(i["pk"], i["sk"]) for i in actions])
    if deps.repo.get_scope(store, run) is None:
        deps.repo.delete_items([deps.repo.activity_key(store, run)])
        if deps.repo.get_scope(store, run) is not None:  # an add made the run again meanwhile: its entry back
            deps.repo.know_scope(store, run, deps.clock.now())


def _cited(item: dict[str, Any]) -> set[str]:
    """The messages a memory or a summary item stands on."""
    cited = set(item.get("evidence") or ())
    cited.update(e for sentence in item.get("sentences") or () for e in sentence.get("evidence", ()))
    return cited | ({item["covered_until"]} if item.get("covered_until") else set())


def _runs_made_meanwhile(deps: Deps, tenant: Deps, store: str, app_id: str, tenant_id: str) -> None:
    """Runs an add made anew while the erasure ran, after its listing: what names them outside their own items
    went with the listed ones — their thread id's claim (the add found the old one and wrote none) and their
    activity registry entry (how a store's purge finds the tenant). They get both back."""
    for item in tenant.repo.tenant_keys(store, app_id, tenant_id, prefix="SCOPE#"):
        _, agent_id, run_id = item["sk"].split("#", 2)
        run = Scope(app_id=app_id, tenant_id=tenant_id, agent_id=agent_id, run_id=run_id)
        deps.repo.know_scope(store, run, deps.clock.now())
        if tenant.repo.thread_agent(store, app_id, tenant_id, run_id) is None:
            try:
                tenant.repo.transact([tenant.repo.thread_claim(store, run)])
            except ConditionFailed:
                pass  # claimed meanwhile


def purge_store(deps: Deps, store: str) -> int:
    """Delete every table item of a deleted store (its audit log excepted: it expires by itself).
    Idempotent: a retry deletes what is left. Returns how many items it deleted. Only while the store's
    purge record holds the name: a job delivered again after the purge finished (and the name was perhaps
    taken by a new store) does nothing."""
    if deps.repo.purge_state(store) is None:
        return 0
    stores.retire(deps, store)  # again: the delete that queued this job may have died before it did
    tenants = list(deps.repo.iter_tenants(store))
    deleted = 0
    for app_id, tenant_id in tenants:
        tenant = deps.for_tenant(store, app_id, tenant_id)
        keys = [(i["pk"], i["sk"]) for i in tenant.repo.tenant_keys(store, app_id, tenant_id)]
        tenant.repo.delete_items(keys)
        deleted += len(keys)
    globals_ = list(deps.repo.store_global_keys(store))
    deps.repo.delete_items(globals_)
    deps.compact(rewrite=True)  # the store's documents (dropped at its delete) and items may linger in the files
    deps.repo.purged(store)
    return deleted + len(globals_)


def fail_purge(deps: Deps, store: str, reason: str) -> None:
    """A deleted store's purge was given up on: its record says FAILED with the reason (kept if it says so
    already). A redriven job purges again: purging is idempotent."""
    state = deps.repo.purge_state(store)
    if state is None or state["status"] == "FAILED":
        return
    deps.repo.purge_failed(store, reason, deps.clock.now())
