"""Add: validate, write the raw messages and the task atomically, enqueue extraction, answer.

Messages are readable as short-term memory as soon as add returns. A client `request_id`
makes add idempotent: a replay of the same body returns the existing task and writes nothing new;
the same id with another body is refused (409 `request_id_reused`). Request ids are namespaced per
tenant (store, app, tenant, request_id), so one tenant's ids never collide with another's.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from ..domain import limits
from ..domain.deadline import Deadline
from ..domain.errors import (ConditionFailed, Conflict, DeadlineExceeded, InvalidInput, NotFound, Overloaded,
                             PayloadTooLarge)
from ..domain.ids import derived_id, micro_prefix, ordinal, sortable_id, time_prefix
from ..domain.models import AccessPolicy, Message, ScopeInfo, Task, TaskStatus
from ..domain.scope import Scope, write_scope
from ..domain.validation import check_metadata, check_request_id
from ..repository import Repository, message_sk, tenant_pk
from . import embedder_guard, erase, extract, message_index, redaction, stores, summaries, task_jobs
from .deps import Deps
from .index_writes import take_back

log = logging.getLogger(__name__)

_RACE_RETRIES = 20  # each retry means another writer committed first
REQUEUE_AFTER = timedelta(seconds=60)  # a replay re-sends the job of a task pending longer than this
ROLES = ("user", "assistant", "system", "tool", "document")


def _message_id(scope: Scope, created_at: datetime, arrived: datetime, request_id: str, index: int) -> str:
    # Ordered by time, then by arrival (adds whose messages carry the same time, as an import of a session
    # dated once, keep the order they came in), then by position in the request. Derived from the request
    # and its one arrival time, so a retry within the add writes the same ids; and from the tenant, whose
    # own the request id is (a message is a document of the store's index, where ids are unique).
    tail = derived_id(scope.app_id, scope.tenant_id, request_id, str(index))[:14]
    return time_prefix(created_at) + micro_prefix(arrived) + ordinal(index) + tail


_EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
# How far ahead of the server's clock a message may say it was sent: clock skew and time zones, not the future
# (a turn dated 2099 stayed the thread's newest, and made every later add refresh its summary).
MAX_AHEAD = timedelta(days=1)


def _messages(scope: Scope, request_id: str, raw: Sequence[dict[str, Any]], now: datetime) -> list[Message]:
    if len(raw) > limits.MAX_MESSAGES_PER_ADD:
        raise PayloadTooLarge(f"an add may carry at most {limits.MAX_MESSAGES_PER_ADD} messages", field="messages")
    out = []
    times = _times(raw, now)
    for i, m in enumerate(raw):
        field = f"messages[{i}]"
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise InvalidInput(f"{field}.role must be one of {', '.join(ROLES)}", field=f"{field}.role")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput(f"{field}.content must be a non-empty string", field=f"{field}.content")
        if len(content) > limits.MAX_CONTENT_CHARS:
            raise PayloadTooLarge(f"{field}.content exceeds {limits.MAX_CONTENT_CHARS} characters",
                                  field=f"{field}.content")
        created = times[i]
        if created < _EARLIEST:  # a message's id sorts by its time from 1970 on (domain/ids.py)
            raise InvalidInput(f"{field}.created_at must be 1970-01-01 or later", field=f"{field}.created_at")
        out.append(Message(message_id=_message_id(scope, created, now, request_id, i), scope=scope, role=role,
                           content=content, name=m.get("name"), created_at=created, request_id=request_id))
    return out


def _refuse_ahead(raw: Sequence[dict[str, Any]], now: datetime) -> None:
    """A message dated more than MAX_AHEAD past the server's clock would stay its thread's newest turn for good. Named
    by the message that gave the time (an untimed one takes a neighbour's); checked after the replay lookup, so an
    add accepted before this check existed still replays."""
    for i, m in enumerate(raw):
        created = _utc(m.get("created_at")) if isinstance(m, dict) else None
        if created is not None and created > now + MAX_AHEAD:
            raise InvalidInput(f"messages[{i}].created_at is more than {MAX_AHEAD.days} day ahead of the server's "
                               f"clock ({now:%Y-%m-%dT%H:%M:%SZ})", field=f"messages[{i}].created_at")


def _times(raw: Sequence[dict[str, Any]], now: datetime) -> list[datetime]:
    """Each message's time. One without created_at takes the time of the message before it (else
    the next timed one): a reply belongs to the conversation it is in, not to the server's clock.
    Only an add with no time at all is stamped now."""
    given = [_utc(m.get("created_at")) if isinstance(m, dict) else None for m in raw]
    for i, m in enumerate(raw):  # a time of another type (an ISO string from an in-process caller) is not "now"
        if isinstance(m, dict) and m.get("created_at") is not None and given[i] is None:
            raise InvalidInput(f"messages[{i}].created_at must be a date-time", field=f"messages[{i}].created_at")
    out: list[datetime] = []
    for i, t in enumerate(given):
        if t is None:
            t = out[-1] if out else next((g for g in given[i + 1:] if g is not None), now)
        out.append(t)
    return out


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


@dataclass(frozen=True)
class Added:
    """What an add came to: its task, and whether it was a replay of an add accepted before (nothing written)."""

    task: Task
    replayed: bool = False


def add(deps: Deps, store: str, *, scope: dict[str, Any] | None, messages: Sequence[dict[str, Any]] | None = None,
        text: str | None = None, metadata: dict[str, Any] | None = None, sync: bool = False,
        request_id: str | None = None, access_policy: AccessPolicy | None = None,
        deadline: Deadline | None = None) -> Task:
    """Accept an add. With `sync` its extraction runs inline under `deadline`: past it the add returns
    its task unfinished (RUNNING) and the job queued with it finishes the work."""
    return accept(deps, store, scope=scope, messages=messages, text=text, metadata=metadata, sync=sync,
                  request_id=request_id, access_policy=access_policy, deadline=deadline).task


def accept(deps: Deps, store: str, *, scope: dict[str, Any] | None, messages: Sequence[dict[str, Any]] | None = None,
           text: str | None = None, metadata: dict[str, Any] | None = None, sync: bool = False,
           request_id: str | None = None, access_policy: AccessPolicy | None = None,
           deadline: Deadline | None = None) -> Added:
    """`add`, saying whether it was a replay: a batch or an import counts replays apart from new adds."""
    deadline = deadline or Deadline.never()
    if sync:
        deps = deps.within(deadline)  # the model calls made for this request are bounded by it too
    repo = deps.repo
    store_obj = repo.get_store(store)
    write = write_scope(scope)
    check_request_id(request_id)
    metadata = check_metadata(metadata)
    if (messages is None) == (text is None):
        raise InvalidInput("give exactly one of messages or text", field="messages")
    now = deps.clock.now()
    request_id = request_id or sortable_id(now)
    # Before anything is written. The probe (model calls) only when this request extracts inline; an
    # asynchronous add checks name and dimension, and its extraction checks the probe.
    store_obj = embedder_guard.ensure(deps, store_obj, probe=sync)
    digest = body_hash(write, messages=messages, text=text, metadata=metadata, access_policy=access_policy)

    if text is not None:
        messages = [{"role": "document", "content": text}]
    if not messages:
        raise InvalidInput("messages may not be empty", field="messages")
    msgs = _messages(write, request_id, messages, now)

    replay = _replay(deps, store, request_id, write, digest)
    if replay is not None:
        return Added(replay, replayed=True)
    _refuse_ahead(messages, now)

    _refuse_when_backlogged(deps)
    # Refused for its run's policy before anything is written (the commit below checks it again).
    info = repo.get_scope(store, write)
    _run_policy(info, access_policy)
    # The request-id pointer lives in a global partition, the task and messages in the tenant's: two
    # writes, never one transaction (on AWS no single credential may write both; see split_table.py).
    # The sweeper's entry first: a pointer always has one until its task exists, so an add that dies or is
    # refused before its task leaves nothing the sweeper does not take back (`release_request`).
    own_entry = repo.open_task(store, request_id, write, now)
    repo.claim_request(store, request_id, write)
    deps.faults.point("add.after_request_claim")
    job = task_jobs.extract_job(store, request_id, write)
    task = None
    tokens = sum(deps.tokenizer.count_many([m.content for m in msgs])) if deps.tokenizer is not None else 0
    covered_before = summaries.covered_until(deps, store, write)  # what a refresh will never read again
    for attempt in range(_RACE_RETRIES):
        if attempt:  # the first uses the read above: the commit is conditioned on it, so a stale one retries
            info = repo.get_scope(store, write)
        try:
            policy = _run_policy(info, access_policy)
        except Conflict:  # the run was made, or its policy changed, since the check before the claim
            _release(repo, store, request_id, write, now, own_entry)
            raise
        task = Task(request_id=request_id, store=store, scope=write, created_at=now, updated_at=now,
                    message_ids=[m.message_id for m in msgs], metadata=metadata, extract=policy.extracts,
                    status=TaskStatus.PENDING if policy.extracts else TaskStatus.SUCCEEDED, body_hash=digest,
                    messages_indexed=False)
        new_info = _run_entry(info, write, policy, now, messages=len(msgs), tokens=tokens)
        # The run's entry (counts, activity) with its place in the threads list, and for a new run its
        # thread id's claim when free: 96 messages + task + at most 3 stay within one transaction's 100.
        writes = [repo.task_put(task), *(repo.message_put(store, m) for m in msgs),
                  *repo.scope_writes(store, new_info, previous=info),
                  *(repo.new_run_claim(store, write) if info is None else [])]
        # Before the messages are stored: a summary whose refresh read the thread before this never read them.
        committing = deps.clock.now()
        try:
            if task.extract:
                # The job commits with the task (locally one transaction; on SQS right after, with the
                # sweeper as the net). A sync add runs inline: its job is the retry if that fails, and
                # the rest of the work if the deadline passes first — so it is due by then.
                deps.queue.commit(deps.table, writes, job, delay=_sync_delay(deps, deadline) if sync else 0)
            else:
                repo.transact(writes)
            break
        except ConditionFailed:
            # Either this tenant's request id was taken meanwhile (a concurrent replay) or the scope entry
            # moved (another add, a policy change): read both again.
            replay = _replay(deps, store, request_id, write, digest)
            if replay is not None:
                return Added(replay, replayed=True)
    else:
        _release(repo, store, request_id, write, now, own_entry)
        raise Conflict("the scope is too busy; retry the add with the same request_id", code="busy")
    deps.faults.point("add.after_messages_and_task")
    assert task is not None
    # The dream scheduler's registry (global partition), which is also how a store's purge finds its tenants.
    repo.touch_activity(store, write, now)
    # Searchable at once. Accepted even if this fails: the job (or, without extraction, the sweeper
    # through the open-task entry left open) indexes them again.
    indexed = message_index.index_after_add(deps, store, msgs)
    if not stores.still_the_store(deps, store_obj):
        _withdraw(deps, task, msgs, created=info is None)
        raise NotFound(f"store '{store}' was deleted while the add was written; nothing of it was kept",
                       code="store_not_found")
    if indexed and not repo.get_messages(store, write, [msgs[0].message_id]):
        # Its thread deleted or its tenant erased meanwhile, by a deletion that removed the documents it found
        # before these were written: they go too. (Deletions remove messages' documents again after their
        # items, so a document written after that second pass is this check's to remove.)
        take_back(deps, store, [m.message_id for m in msgs], app_id=write.app_id, tenant_id=write.tenant_id)
        return Added(task)
    if indexed and task.extract and not sync:
        try:
            repo.mark_messages_indexed(task)  # so its job does not embed them again
        except ConditionFailed:
            pass  # the task is gone already: its store deleted, or its tenant erased, since the check
    if task.extract:
        # A summary is distilled like the memories: only threads whose policy extracts get one.
        summaries.after_add(deps, store_obj, write, msgs, committing, covered_before)
    if not task.extract:
        if indexed:
            repo.close_task(store, request_id, write.app_id, write.tenant_id)
    elif sync:
        # A failure propagates to the caller; the task is not left RUNNING: the job committed above
        # retries it, and it ends SUCCEEDED or FAILED like any other.
        try:
            done = extract.run(deps, store, request_id, app_id=write.app_id, tenant_id=write.tenant_id,
                               store_obj=store_obj, messages_indexed=indexed)
        except DeadlineExceeded as late:
            # Degrade to asynchronous: the caller gets the task as it is (202), the job finishes it.
            log.warning("sync add %s goes on as a job: %s", request_id, late.message)
            return Added(repo.locate_task(store, request_id, write.app_id, write.tenant_id))
        deps.queue.discard(job)  # the safety net is not needed
        return Added(done)
    return Added(task)


def _release(repo: Repository, store: str, request_id: str, scope: Scope, registered: datetime, own: bool) -> None:
    """A refused add takes back its entry and pointer — only if it made the entry: one it found is another add's
    of the same id (under way: its pointer must stay; or dead: the sweeper's), and it is left as it is."""
    if own:
        repo.release_request(store, request_id, scope.app_id, scope.tenant_id, registered)


def _withdraw(deps: Deps, task: Task, msgs: Sequence[Message], *, created: bool) -> None:
    """Take back an add whose store was deleted while it was written: a purge that read the activity
    registry before the add entered it left its items, and a store made again under the name would show
    them. Its messages' index documents and items, its task and pointers go, and the run's entry if this
    add made it (and nothing has been added to it since). Its job, if it ran meanwhile, is taken back too:
    what it wrote stands only on these messages; a job still running sees the messages gone and takes
    back its own writes (extract._deleted_meanwhile); one not yet run finds no task."""
    repo, store, s = deps.repo, task.store, task.scope
    ids = [m.message_id for m in msgs]
    done = repo.find_task(store, s.app_id, s.tenant_id, task.request_id)
    written = [o.memory_id for o in done.outcomes] if done is not None else []
    erase.clear_memories(deps, store, s, written, evidence=ids)  # index first: nothing stays findable
    pk = tenant_pk(store, s.app_id, s.tenant_id)
    repo.delete_items([(pk, f"TASK#{task.request_id}"), *((pk, message_sk(s, i)) for i in ids)])
    entry = repo.get_scope(store, s) if created else None
    if entry is not None and entry.message_count == len(msgs):
        try:
            repo.transact(repo.run_removal(store, entry))
        except ConditionFailed:
            pass  # another add wrote to the run meanwhile: it is that add's now
    repo.close_task(store, task.request_id, s.app_id, s.tenant_id)
    repo.delete_items([repo.request_pointer_key(store, s.app_id, s.tenant_id, task.request_id)])


def _sync_delay(deps: Deps, deadline: Deadline) -> float:
    """When a sync add's job comes due: as the deadline passes (the inline run has given up by then),
    and no later than sync_retry_delay after an inline failure."""
    return min(deps.settings.sync_retry_delay, deadline.remaining())


def _refuse_when_backlogged(deps: Deps) -> None:
    """Back-pressure: past the queue limit an add is refused before it writes anything."""
    limit = deps.settings.queue_limit
    if limit and deps.queue.depth() >= limit:
        raise Overloaded(f"extraction is {limit}+ jobs behind; retry the add later (same request_id)",
                         retry_after=deps.settings.queue_retry_after)


def body_hash(scope: Scope, *, messages: Sequence[dict[str, Any]] | None, text: str | None,
              metadata: dict[str, Any], access_policy: AccessPolicy | None) -> str:
    """sha256 of what an add asks for — scope (defaults filled in), messages or text, metadata, access
    policy — in one canonical JSON form (key order, time zones and `sync` do not matter)."""
    def when(value: Any) -> Any:
        if isinstance(value, datetime):
            return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).isoformat()
        return value

    body = {"scope": scope.as_dict(), "metadata": metadata,
            "access_policy": str(access_policy) if access_policy is not None else None,
            "text": text, "messages": None if messages is None else [
                {"role": m.get("role"), "content": m.get("content"), "name": m.get("name"),
                 "created_at": when(m.get("created_at"))} for m in messages]}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _run_entry(info: ScopeInfo | None, scope: Scope, policy: AccessPolicy, now: datetime, *, messages: int,
               tokens: int) -> ScopeInfo:
    """The run's registry entry after this add: counts and activity moved, the rest (metadata) kept."""
    if info is None:
        return ScopeInfo(scope=scope, access_policy=policy, first_seen=now, last_activity=now, message_count=messages,
                         token_count=tokens)
    return info.model_copy(update={"access_policy": policy, "last_activity": now,
                                   "message_count": info.message_count + messages,
                                   "token_count": info.token_count + tokens})


def _run_policy(info: ScopeInfo | None, asked: AccessPolicy | None) -> AccessPolicy:
    """A new run takes the policy the add names (default recall_and_store). An existing run keeps its own:
    naming another one is refused rather than ignored — a run's policy changes only by PUT /access-policy."""
    if info is None:
        return AccessPolicy(asked or AccessPolicy.RECALL_AND_STORE)
    if asked is not None and AccessPolicy(asked) != info.access_policy:
        raise Conflict(f"run '{info.scope.run_id}' has access policy '{info.access_policy}', not '{asked}'; change "
                       "it with PUT /access-policy, or leave access_policy out", code="access_policy_mismatch",
                       field="access_policy")
    return info.access_policy


def _replay(deps: Deps, store: str, request_id: str, scope: Scope, digest: str) -> Task | None:
    """The tenant's own task of that request id, if any (request ids are per tenant: only its partition is read).
    The same body is a replay and gets the first task; another body is refused."""
    existing = deps.repo.find_task(store, scope.app_id, scope.tenant_id, request_id)
    if existing is None:
        return None
    redaction.check_replay(existing, request_id)
    # An add's task; one written before tasks kept their body's hash is the same add when its scope is. A forced
    # summary refresh's task holds another request under the id, whatever its scope.
    same = existing.kind == "extract" and (existing.body_hash == digest if existing.body_hash is not None
                                           else existing.scope == scope)
    if not same:
        raise Conflict(f"request_id '{request_id}' was already used with another body; use a new request_id",
                       code="request_id_reused", field="request_id")
    if existing.status == TaskStatus.PENDING and deps.clock.now() - existing.updated_at >= REQUEUE_AFTER:
        # Still pending well after it was written: the first attempt may have died between its write and
        # its enqueue. Extraction is idempotent; a fresh task's job is simply on its way, not sent twice.
        deps.queue.enqueue(task_jobs.extract_job(store, request_id, scope))
    if existing.extract and not existing.status.finished and not existing.messages_indexed:
        _index_again(deps, store, existing)
    return existing


def _index_again(deps: Deps, store: str, task: Task) -> None:
    """A replay of an add its first attempt may have left unindexed (it died between its commit and its index write:
    a trial's replays after a kill -9 answered 202 with the messages not findable until the job ran, 20 of 104): an
    add answered is findable at once. An upsert, as the add's; what a deletion took meanwhile is taken back."""
    msgs = deps.repo.get_messages(store, task.scope, task.message_ids)
    if not msgs or not message_index.index_after_add(deps, store, msgs):
        return
    if not deps.repo.get_messages(store, task.scope, [msgs[0].message_id]):
        take_back(deps, store, [m.message_id for m in msgs], app_id=task.scope.app_id, tenant_id=task.scope.tenant_id)
        return
    try:
        deps.repo.mark_messages_indexed(task)
    except ConditionFailed:
        pass  # the task is gone: its store deleted, or its tenant erased, since the read
