"""Thread summaries: a rolling summary per thread (run), refreshed in the background.

Due: when the part of the thread not yet summarised — the messages after the summary's
`covered_until`, leaving out the last `summary_keep_recent` — reaches the store's
`summary_trigger_tokens` (counted with deps.tokenizer). After each add, `after_add` decides
this by reading the thread newest first and stopping at the threshold or at `covered_until`,
so the cost is bounded by the trigger, not by the thread, and queues a "summarize" job named
after the thread and the range it would cover (the local queue keeps one waiting job per name).

Incremental: a refresh reads only the messages after `covered_until` (at most BATCH per pass)
and builds the new summary from the previous one plus those — with the LLM when one is
configured (prompts/summary.py: numbered messages, a strict answer, one repair turn), else, or
when the model's answer is still unusable, extractively (policies/summary.py).

Late messages: message ids sort by when a message was said, not by when it was stored, so an add
stamped earlier (an import, a lagging clock) — or committed after a refresh read past its time —
lands below `covered_until`. The add (`after_add`, when the summary was built before the add stored
its messages) and the refresh that covered the range (after its write) note such messages in the
summary (`late`); the next refresh summarises them with its batch. A summary remembers the messages its
latest passes took in (`folded`), late or not, and none of them is noted late again: an add's check may run
after a pass that stamped its read time before the add was stored yet read it all the same. Left: an add whose
commit overlaps that refresh's write may still be missed.

One summary per thread: the table item is versioned and every write is conditioned on the
version read, so of two concurrent refreshes (or a redelivered job racing the first delivery)
one writes and the other reads again and continues from what was written: none is duplicated,
no coverage is lost. The summary is also an index document (record_type `summary`, scope = the
thread, evidence = the cited messages) so search can find it; the table stays the truth.

Only threads whose access policy extracts (recall_and_store, store_only) are summarised: a
summary is a distilled memory like the ones extraction writes.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Iterable, Iterator, Sequence

from ..domain.errors import ConditionFailed, Conflict, DependencyFailed, NotFound
from ..domain.ids import derived_id, sortable_id
from ..domain.models import Memory, MemoryType, Message, RecordType, Store, SummarySentence, Task, TaskStatus, \
    ThreadSummary
from ..domain.scope import DEFAULT, Scope
from ..domain.validation import says_something
from ..policies import summary as extractive
from ..ports import Job, Tokenizer
from ..prompts import summary as prompt
from . import embedder_guard
from .deps import Deps
from .index_writes import take_back

log = logging.getLogger(__name__)

KIND = "summarize"
BATCH = 200  # messages one refresh pass reads and summarises
_MAX_PASSES = 50  # passes one refresh makes (a long unsummarised backlog is caught up in batches)
# Messages a summary remembers having taken in, so that none is noted late and taken in twice: two passes' batches
# (an add's check runs right after its commit, so the pass that read it is the latest — or the one before, when
# the latest ran on a server whose clock lags: a regression trial). ~15 KB on the summary's item (1,000: 42 KB).
_FOLDED = 2 * BATCH
_ATTEMPTS = 10  # writes lost to another refresh before giving up (each means the other one progressed)
DOC_PREFIX = "sum-"  # summary documents' ids; memory ids are plain base32
_SCAN_PAGE = 50  # messages read per page by the trigger's newest-first scan


def doc_id(scope: Scope) -> str:
    """The id of a thread's summary in the index: one per thread, never a memory's id."""
    return DOC_PREFIX + derived_id("summary", scope.app_id, scope.tenant_id, scope.agent_id, scope.run_id)


def get_summary(deps: Deps, store: str, scope: Scope) -> ThreadSummary | None:
    """The thread's summary, or None if it has none yet. `deps` bound to the tenant."""
    return deps.repo.get_summary(store, scope)


def read(deps: Deps, store: str, scope: Scope) -> ThreadSummary:
    """The route's read: 404 `thread_not_found` when there is no such thread, `summary_not_found` when it has no
    summary (yet)."""
    store_obj = deps.repo.get_store(store)
    found = get_summary(deps, store, scope)
    if found is not None:
        return found
    info = deps.repo.get_scope(store, scope)
    if info is None:  # no such thread (or deleted): no refresh will ever make one
        raise _no_thread(scope)
    if not info.access_policy.extracts:
        raise NotFound(f"thread '{scope.run_id}' keeps no summary: its access policy stores nothing in long-term "
                       "memory", code="summary_not_found")
    if info.message_count <= store_obj.summary_keep_recent:  # a refresh finds nothing to cover (a trial: it said
        # SUCCEEDED, then this answered as if one could make it)
        raise NotFound(f"thread '{scope.run_id}' has no summary: it has {info.message_count} messages, none before its "
                       f"last {store_obj.summary_keep_recent} (summary_keep_recent), which a summary leaves out — "
                       "a refresh has nothing to cover yet", code="summary_not_found")
    raise NotFound(f"thread '{scope.run_id}' has no summary yet: a summary covers what precedes the thread's "
                   f"last {store_obj.summary_keep_recent} messages (summary_keep_recent), once that reaches "
                   f"{store_obj.summary_trigger_tokens} tokens (summary_trigger_tokens) or a refresh is asked for",
                   code="summary_not_found")


def as_document(summary: ThreadSummary) -> Memory:
    """The summary as the index holds it: Memory-shaped, record_type `summary`."""
    keywords = " ".join(summary.open_items + summary.decisions)
    return Memory(memory_id=doc_id(summary.scope), scope=summary.scope, memory_type=MemoryType.SUMMARY,
                  record_type=RecordType.SUMMARY, text=summary.text, evidence=summary.evidence,
                  created_at=summary.created_at, updated_at=summary.updated_at, keywords=keywords,
                  metadata={"covered_until": summary.covered_until or "", "covered_messages": summary.covered_messages})


def index_documents(deps: Deps, store: str, app_id: str, tenant_id: str) -> Iterator[Memory]:
    """The summary documents the index should hold for a tenant (those that say something), from the table:
    what fsck compares and reindex rebuilds."""
    return (as_document(s) for s in deps.repo.iter_summaries(store, app_id, tenant_id) if s.text)


def documents(deps: Deps, store: str, app_id: str, tenant_id: str, ids: Sequence[str],
              threads: Sequence[tuple[str, str]] | None = None) -> list[Memory]:
    """The summary documents among `ids` (index hits, ids to repair), from the table. `threads`: the
    (agent_id, run_id) the ids' index documents name — then one batch read of those threads' summaries,
    not a scan of every summary of the tenant (an id alone does not say its thread)."""
    wanted = {i for i in ids if i.startswith(DOC_PREFIX)}
    if not wanted:
        return []
    if threads is None:
        found: Iterable[Memory] = index_documents(deps, store, app_id, tenant_id)
    else:
        scopes = [Scope(app_id=app_id, tenant_id=tenant_id, agent_id=a, run_id=r) for a, r in dict.fromkeys(threads)]
        found = (as_document(s) for s in deps.repo.get_summaries(store, scopes).values() if s.text)
    return [d for d in found if d.memory_id in wanted]


# -- the trigger ---------------------------------------------------------------------------------


def covered_until(deps: Deps, store: str, scope: Scope) -> str | None:
    """The thread's summary coverage now (None: no summary, or summaries off): an add reads it before it stores
    its messages (`after_add`). `deps` bound to the tenant."""
    if deps.tokenizer is None:
        return None
    summary = deps.repo.get_summary(store, scope)
    return summary.covered_until if summary else None


def after_add(deps: Deps, store: Store, scope: Scope, added: Sequence[Message] = (),
              stored: datetime | None = None, covered_before: str | None = None) -> bool:
    """Queue a refresh of the thread if one is due now — or if `added` (the add's messages, being `stored` from then
    on) is below the coverage of a summary that cannot have read them; whether one was queued. Cheap: bounded by the
    trigger (see `due`). `covered_before`: the coverage read before the add stored them. `deps` bound to the
    tenant."""
    if deps.tokenizer is None:
        return False  # nothing to count with: summaries are off
    summary = deps.repo.get_summary(store.name, scope)
    # A refresh reads only above the coverage it starts from: a message stored below the coverage of its time
    # (stamped earlier, an import, a lagging clock) is never read by one; and one stored above it is missed by a
    # refresh that read before it was stored and covered past it (one that read while the add committed finds it
    # after its write: `_pass`). Both are late (a trial: judged by when the summary was built, 15-54 of ~80-224
    # such messages were never summarised). Judged by a time after the commit, a refresh that read while it ran
    # was counted twice (a concurrent test).
    unread = summary is not None and stored is not None and (summary.read_at or summary.updated_at) < stored
    late = [m.message_id for m in added if summary is not None and summary.covered_until is not None
            and m.message_id <= summary.covered_until
            and (unread or (covered_before is not None and m.message_id <= covered_before))]
    if late and _note_late(deps, store.name, scope, late):
        deps.queue.enqueue(job(store.name, derived_id(KIND, scope.app_id, scope.tenant_id, scope.agent_id,
                                                      scope.run_id, "late", *sorted(m.message_id for m in added)),
                               scope))
        return True
    try:
        target = due(deps, store, scope, summary)
    except DependencyFailed as off:  # the tokenizer cannot load here: the add stands, summaries wait
        log.warning("summary trigger skipped for store %s: %s", store.name, off.message)
        return False
    if target is None:
        return False
    # Named after the thread and the range it covers: a second add before it runs finds it waiting (one job,
    # locally); another tenant's thread of the same ids is another job.
    name = derived_id(KIND, scope.app_id, scope.tenant_id, scope.agent_id, scope.run_id,
                      summary.covered_until if summary else "", target)
    deps.queue.enqueue(job(store.name, name, scope))
    return True


def due(deps: Deps, store: Store, scope: Scope, summary: ThreadSummary | None) -> str | None:
    """The id of the newest message a refresh would cover, if the not-yet-summarised part (after
    `covered_until`, without the last `summary_keep_recent` messages) has reached the trigger; else None.
    Reads newest first and stops at the trigger or at `covered_until`."""
    count = _tokenizer(deps).count_many
    covered = summary.covered_until if summary else None
    skip, total, newest, cursor = store.summary_keep_recent, 0, None, None
    while True:
        page, cursor = deps.repo.newest_messages(store.name, scope, limit=_SCAN_PAGE, cursor=cursor)
        fresh = [m for m in page if covered is None or m.message_id > covered]
        eligible = fresh[skip:]
        skip = max(0, skip - len(fresh))
        for message, n in zip(eligible, count([extractive.line(m) for m in eligible]) if eligible else []):
            newest = newest or message.message_id
            total += n
            if total >= store.summary_trigger_tokens:
                return newest
        if len(fresh) < len(page) or cursor is None:
            return None


def job(store: str, name: str, scope: Scope) -> Job:
    """A refresh job: the tenant's fairness group (it waits for the tenant's extractions), and the thread."""
    return Job.of_tenant(KIND, store, name, scope.app_id, scope.tenant_id).model_copy(
        update={"agent_id": scope.agent_id, "run_id": scope.run_id})


# -- a forced refresh (POST .../summary): a task, pollable like an extraction ------------------------


def request_refresh(deps: Deps, store: str, scope: Scope) -> Task:
    """Queue a refresh of the thread now, whatever the trigger says; the task says when it is done
    (GET .../tasks/{request_id}). `deps` bound to the tenant."""
    repo = deps.repo
    repo.get_store(store)
    info = repo.get_scope(store, scope)
    if info is None:  # a task for no thread would outlive the purge of its store
        raise _no_thread(scope)
    if not info.access_policy.extracts:  # a refresh would succeed and write nothing: say why instead
        raise Conflict(f"thread '{scope.run_id}' keeps no summary: its access policy ({info.access_policy}) stores "
                       "nothing in long-term memory", code="summary_not_kept")
    now = deps.clock.now()
    task = Task(request_id=sortable_id(now), kind=KIND, store=store, scope=scope, created_at=now, updated_at=now,
                extract=False)
    repo.open_task(store, task.request_id, scope, now)  # the sweeper's net for a job lost before it ran
    repo.claim_request(store, task.request_id, scope)  # GET .../tasks/{id} finds it without the tenant named
    deps.queue.commit(deps.table, [repo.task_put(task)], job(store, task.request_id, scope))
    return task


def run_job(deps: Deps, job_: Job) -> Task | None:
    """A summarize job: a forced refresh finishes its task; a triggered one refreshes if still due.
    `deps` bound to the job's tenant."""
    if job_.app_id is None or job_.tenant_id is None or job_.agent_id is None or job_.run_id is None:
        raise NotFound(f"summarize job {job_.request_id} names no thread", code="thread_not_found")
    scope = Scope(app_id=job_.app_id, tenant_id=job_.tenant_id, agent_id=job_.agent_id, run_id=job_.run_id)
    repo = deps.repo
    task = repo.find_task(job_.store, scope.app_id, scope.tenant_id, job_.request_id)
    if task is None or task.kind != KIND:
        refresh(deps, job_.store, scope)
        return None
    if task.status.finished:  # a redelivery of a finished refresh
        repo.close_task(job_.store, task.request_id, scope.app_id, scope.tenant_id)
        return task
    # Every task write conditioned on the version read (repo.change_task): a task erased with its tenant meanwhile is
    # not written back, nor one another delivery moved on.
    running, moved = repo.change_task(task, lambda t: None if t.status.finished else t.model_copy(
        update={"status": TaskStatus.RUNNING, "attempts": t.attempts + 1, "updated_at": deps.clock.now()}))
    if not moved:
        return running
    refresh(deps, job_.store, scope, force=True)
    if repo.get_scope(job_.store, scope) is None:  # deleted before or while it ran: it summarised nothing
        stored, _ = repo.change_task(task, lambda t: None if t.status != TaskStatus.RUNNING else t.model_copy(
            update={"status": TaskStatus.FAILED, "updated_at": deps.clock.now(),
                    "error": "its thread was deleted before it was summarised"}))
    else:
        # Also over FAILED: given up on by the queue's last delivery while this one summarised, the summary is
        # written and the task says so (a regression trial), as an extraction's does.
        stored, _ = repo.change_task(task, lambda t: None if not t.status.worked_on else t.model_copy(
            update={"status": TaskStatus.SUCCEEDED, "error": None, "updated_at": deps.clock.now()}))
    repo.close_task(job_.store, task.request_id, scope.app_id, scope.tenant_id)
    return stored


# -- the refresh -----------------------------------------------------------------------------------


def refresh(deps: Deps, store: str, scope: Scope, *, force: bool = False) -> ThreadSummary | None:
    """Bring the thread's summary up to date, incrementally; the summary as it then is (None: none yet and
    nothing to summarise). `force`: summarise what is eligible even below the trigger. `deps` bound to the tenant."""
    repo = deps.repo
    store_obj = repo.get_store(store)
    if not _extracts(deps, store, scope):
        return repo.get_summary(store, scope)
    unindexed = repo.unindexed_summary(store, scope)
    if unindexed is not None:  # its writer died between the table and the index: finish its work first
        _index(deps, store_obj, unindexed)
    current = None
    for _ in range(_MAX_PASSES):
        written, more = _pass(deps, store_obj, scope, force=force)
        current = written
        if not more:
            break
    return current


def _pass(deps: Deps, store: Store, scope: Scope, *, force: bool) -> tuple[ThreadSummary | None, bool]:
    """One batch: (the summary after it, whether more is eligible). Retries a write lost to another refresh."""
    repo, count = deps.repo, _tokenizer(deps).count_many
    for _ in range(_ATTEMPTS):
        read_at = deps.clock.now()  # before the read: an add stored after it is not in what this pass reads
        previous = repo.get_summary(store.name, scope)
        batch = _eligible(deps, store, scope, previous)
        if not batch:
            return previous, False
        late = bool(previous and previous.late)  # noted as missed: taken in whatever the trigger says
        if not force and not late and sum(count([extractive.line(m) for m in batch])) < store.summary_trigger_tokens:
            return previous, False
        summary = _summarise(deps, store, scope, previous, batch).model_copy(update={"read_at": read_at})
        try:
            written = repo.put_summary(store.name, summary, previous=previous)
        except ConditionFailed:
            continue  # another refresh wrote first: read what it wrote and go on from there
        if len(repo.get_messages(store.name, scope, [m.message_id for m in batch])) < len(batch):
            # Its thread was deleted after the read, and its id taken again by a new add (the registry entry
            # the write needs is back): what it wrote from the deleted messages goes.
            repo.delete_summary(store.name, scope, version=written.version)
            take_back(deps, store.name, [doc_id(scope)], app_id=scope.app_id, tenant_id=scope.tenant_id)
            return None, False
        _index(deps, store, written)
        # An add committed inside the range just covered after this pass read it: noted for the next one.
        covered = {m.message_id for m in batch}
        stored = repo.messages_after(store.name, scope, previous.covered_until if previous else None,
                                     limit=len(batch) + BATCH)
        missed = [m.message_id for m in stored if m.message_id not in covered and m.message_id <= written.covered_until]
        if missed and _note_late(deps, store.name, scope, missed):
            return repo.get_summary(store.name, scope), True
        return written, late or len(batch) == BATCH  # after the late ones, what is due after covered_until
    raise Conflict(f"the summary of thread '{scope.run_id}' kept changing; retry", code="busy")


def _note_late(deps: Deps, store: str, scope: Scope, ids: Sequence[str]) -> bool:
    """Note in the thread's summary that the messages `ids` are not covered (the caller judged them below
    the coverage of a summary that never read them; a later refresh only reads above it); whether any
    was noted. One already noted, or taken in by a recent pass (`folded`), is not noted again."""
    for _ in range(_ATTEMPTS):
        current = deps.repo.get_summary(store, scope)
        if current is None:
            return False
        late = [i for i in ids if i not in current.late and i not in current.folded]
        if not late:
            return False
        try:
            deps.repo.put_summary(store, current.model_copy(update={"late": sorted([*current.late, *late])}),
                                  previous=current)
            return True
        except ConditionFailed:
            continue  # a refresh or another add wrote first (or the thread is being deleted): look again
    log.warning("late messages of thread %s not noted: its summary kept changing", scope.run_id)
    return False


def _eligible(deps: Deps, store: Store, scope: Scope, previous: ThreadSummary | None) -> list[Message]:
    """The next batch to summarise: the late messages noted in the summary, then, with them (a late one noted by
    each add of an import must not cost a refresh a pass of its own), those after `covered_until`, before the last
    `summary_keep_recent` messages."""
    late = deps.repo.get_messages(store.name, scope, previous.late[:BATCH]) if previous and previous.late else []
    late = sorted(late, key=lambda m: m.message_id)  # all below covered_until: before the rest
    boundary = None
    if store.summary_keep_recent:
        recent, _ = deps.repo.newest_messages(store.name, scope, limit=store.summary_keep_recent)
        if len(recent) < store.summary_keep_recent:
            return late  # the whole thread is recent
        boundary = recent[-1].message_id
        if previous is not None and previous.covered_until is not None and boundary <= previous.covered_until:
            return late
    if len(late) >= BATCH:
        return late
    after = previous.covered_until if previous else None
    return late + deps.repo.messages_after(store.name, scope, after, before=boundary, limit=BATCH - len(late))


def _summarise(deps: Deps, store: Store, scope: Scope, previous: ThreadSummary | None,
               batch: list[Message]) -> ThreadSummary:
    count, cap = _tokenizer(deps).count_many, deps.settings.summary_max_tokens
    old = extractive.Draft(list(previous.sentences), list(previous.open_items), list(previous.decisions),
                           dict(previous.cited)) if previous else extractive.Draft()
    draft = _with_llm(deps, old, batch, cap) if deps.llm is not None else None
    origin = "llm"
    if draft is None:
        draft = extractive.merge(old, extractive.extract(batch, count, cap), count, cap)
        origin = "extractive"
    now = deps.clock.now()
    taken = {m.message_id for m in batch}
    return ThreadSummary(scope=scope, sentences=draft.sentences, open_items=draft.open_items,
                         decisions=draft.decisions, cited=draft.cited,
                         covered_until=max(filter(None, [previous.covered_until if previous else None,
                                                         batch[-1].message_id])),
                         covered_messages=(previous.covered_messages if previous else 0) + len(batch),
                         late=[i for i in previous.late if i not in taken] if previous else [],
                         folded=[*(previous.folded if previous else []), *(m.message_id for m in batch)][-_FOLDED:],
                         tokens=extractive.tokens(draft, count), origin=origin,
                         created_at=previous.created_at if previous else now, updated_at=now,
                         version=previous.version if previous else 0)


def _with_llm(deps: Deps, previous: extractive.Draft, batch: list[Message], cap: int) -> extractive.Draft | None:
    """The LLM's summary, validated (numbers shown, within the cap), after at most one repair turn;
    None when it is still unusable (the caller falls back to the extractive summary)."""
    assert deps.llm is not None
    count = _tokenizer(deps).count_many

    def numbered(mark: str, texts: list[str]) -> str:
        return "\n".join(f"[{mark}{i}] {text}" for i, text in enumerate(texts, start=1)) or "(none yet)"

    request = prompt.TEMPLATE.format(
        previous=numbered("p", [s.text for s in previous.sentences]),
        open_items=numbered("o", previous.open_items), decisions=numbered("d", previous.decisions),
        messages="\n".join(f"[{i}] {extractive.line(m)}" for i, m in enumerate(batch, start=1)), cap=cap)

    def usable(answer: prompt.SummaryAnswer) -> tuple[extractive.Draft, list[str]]:
        errors = prompt.resolve(answer, messages=len(batch), previous=len(previous.sentences),
                                open_items=len(previous.open_items), decisions=len(previous.decisions))
        draft = _draft(answer, batch, previous) if not errors else extractive.Draft()
        if not errors and (size := extractive.tokens(draft, count)) > cap:
            errors.append(f"the summary has {size} tokens; at most {cap}")
        return draft, errors

    try:
        draft, errors = usable(deps.llm.generate(system=prompt.SYSTEM, prompt=request,
                                                 response_model=prompt.SummaryAnswer))
        if errors:
            repair = prompt.REPAIR.format(errors="\n".join(errors), cap=cap)
            draft, errors = usable(deps.llm.generate(system=prompt.SYSTEM, prompt=request + "\n\n" + repair,
                                                     response_model=prompt.SummaryAnswer))
    except DependencyFailed as failed:
        log.warning("summary: the model could not answer (%s); extractive summary instead", failed.message)
        return None
    if errors:
        log.warning("summary: the model's answer is still unusable after a repair (%s); extractive instead",
                    "; ".join(errors))
        return None
    return draft


def _draft(answer: prompt.SummaryAnswer, batch: list[Message], previous: extractive.Draft) -> extractive.Draft:
    """The answer with its numbers read as message ids: each part cites its new messages and what the previous
    parts it keeps cited."""
    def cited(part: prompt.Sentence, kept: list[list[str]]) -> list[str]:  # an Item is a Sentence
        return list(dict.fromkeys([*(batch[m - 1].message_id for m in part.messages),
                                   *(e for p in part.previous for e in kept[p - 1])]))

    kept = [p.evidence for p in previous.sentences]
    sentences = [SummarySentence(text=" ".join(s.text.split()), evidence=cited(s, kept))
                 for s in answer.sentences if says_something(s.text)]

    def items(parts: list[prompt.Item], kept: list[str]) -> list[tuple[str, list[str]]]:
        return [(" ".join(i.text.split()), cited(i, [previous.cited.get(t, []) for t in kept]))
                for i in parts if says_something(i.text)]

    open_items, decisions = items(answer.open_items, previous.open_items), items(answer.decisions, previous.decisions)
    citing: dict[str, list[str]] = {}
    for text, evidence in open_items + decisions:  # an item and a decision of one text cite what both cite
        citing[text] = list(dict.fromkeys([*citing.get(text, []), *evidence]))
    return extractive.Draft(sentences, [t for t, _ in open_items], [t for t, _ in decisions], citing)


def _index(deps: Deps, store: Store, summary: ThreadSummary) -> None:
    """Upsert the thread's summary document (or remove it when the summary says nothing), then mark the item
    indexed; an item left unmarked (the writer died in between) is indexed by the thread's next refresh."""
    doc, s = as_document(summary), summary.scope
    if not summary.text:
        deps.index.delete(store.name, [doc.memory_id], app_id=s.app_id, tenant_id=s.tenant_id)
    else:
        embedder_guard.ensure(deps, store)  # vectors of the store's model only
        deps.index.upsert(store.name, [(doc, deps.embedder.embed([doc.text])[0])])
    # The thread may have been deleted (or its tenant erased) since the write: deletion removes the item
    # before the document, so an item gone now means this document must go too.
    if deps.repo.get_summary(store.name, summary.scope) is None:
        take_back(deps, store.name, [doc.memory_id], app_id=s.app_id, tenant_id=s.tenant_id)
        return
    deps.repo.summary_indexed(store.name, summary)


def _extracts(deps: Deps, store: str, scope: Scope) -> bool:
    info = deps.repo.get_scope(store, scope)
    return info is None or info.access_policy.extracts


def _tokenizer(deps: Deps) -> Tokenizer:
    if deps.tokenizer is None:
        raise DependencyFailed("thread summaries count tokens, and no tokenizer is configured (MEMLANE_TOKENIZER)",
                               code="tokenizer_unavailable")
    return deps.tokenizer


# -- deletion ------------------------------------------------------------------------------------


def delete(deps: Deps, store: str, scope: Scope) -> int:
    """Remove the thread's summary from the table, then from the index; how many there were (0 or 1).
    Call it once the thread's messages and registry entry are gone (no refresh can write it again), and in
    this order: a refresh indexing meanwhile finds the item gone and removes its own document (`_index`).
    `deps` bound to the tenant."""
    existed = deps.repo.delete_summary(store, scope)
    deps.index.delete(store, [doc_id(scope)], app_id=scope.app_id, tenant_id=scope.tenant_id)
    return int(existed)


def _no_thread(scope: Scope) -> NotFound:
    """404 for a thread: its agent named only when one was (a trial read "of agent '__default__'")."""
    of_agent = "" if scope.agent_id == DEFAULT else f" of agent '{scope.agent_id}'"
    return NotFound(f"thread '{scope.run_id}'{of_agent} not found", code="thread_not_found")
