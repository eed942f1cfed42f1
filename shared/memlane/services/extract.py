"""Extract: turn a task's messages into memories, idempotently.

Memory ids are derived from (request_id, candidate number), so a redelivered or retried job
writes the same ids again instead of new ones, and a memory found in the index with the id
the candidate would get is recognised as this job's own earlier write.
"""

from __future__ import annotations

from ..domain.errors import MemlaneError
from ..domain.ids import derived_id
from ..domain.models import Candidate, ExtractAction, Memory, Store, Task, TaskOutcome, TaskStatus
from ..domain.scope import ScopeFilter
from ..policies.consolidation import Neighbour, decide
from ..ports import IndexQuery
from . import embedder_guard
from .deps import Deps


def run(deps: Deps, store: str, request_id: str, *, app_id: str | None = None, tenant_id: str | None = None,
        store_obj: Store | None = None) -> Task:
    repo = deps.repo
    task = repo.locate_task(store, request_id, app_id, tenant_id)
    if task.status.finished:
        repo.close_task(store, request_id, task.scope.app_id, task.scope.tenant_id)  # redelivery of a finished job: nothing to do
        return task
    store_obj = embedder_guard.ensure(deps, store_obj or repo.get_store(store))  # vectors of the store's model only
    task = task.model_copy(update={"status": TaskStatus.RUNNING, "attempts": task.attempts + 1,
                                   "updated_at": deps.clock.now()})
    repo.save_task(task)
    deps.faults.point("extract.after_running")

    messages = repo.get_messages(store, task.scope, task.message_ids)
    candidates = deps.extractor.extract(messages, instructions=store_obj.extract_instructions,
                                        keywords_from_assistant=store_obj.keywords_from_assistant)
    outcomes = _consolidate(deps, store, task, candidates)

    done = task.model_copy(update={"status": TaskStatus.SUCCEEDED, "outcomes": outcomes, "error": None,
                                   "updated_at": deps.clock.now()})
    repo.save_task(done)
    repo.close_task(store, request_id, task.scope.app_id, task.scope.tenant_id)
    return done


def fail(deps: Deps, store: str, request_id: str, reason: str, *, app_id: str | None = None,
         tenant_id: str | None = None) -> Task:
    """Mark a task FAILED after its job was given up on (dead-lettered)."""
    task = deps.repo.locate_task(store, request_id, app_id, tenant_id)
    if task.status == TaskStatus.SUCCEEDED:
        deps.repo.close_task(store, request_id, task.scope.app_id, task.scope.tenant_id)
        return task
    failed = task.model_copy(update={"status": TaskStatus.FAILED, "error": reason[:1000],
                                     "updated_at": deps.clock.now()})
    deps.repo.save_task(failed)
    deps.repo.close_task(store, request_id, task.scope.app_id, task.scope.tenant_id)
    return failed


def describe(error: BaseException) -> str:
    if isinstance(error, MemlaneError):
        return f"{error.code}: {error.message}"
    return f"{type(error).__name__}: {error}"


def _consolidate(deps: Deps, store: str, task: Task, candidates: list[Candidate]) -> list[TaskOutcome]:
    if not candidates:
        return []
    now = deps.clock.now()
    vectors = deps.embedder.embed([c.text for c in candidates])
    exact = ScopeFilter(app_id=task.scope.app_id, tenant_id=task.scope.tenant_id,
                        agent_ids=(task.scope.agent_id,), run_ids=(task.scope.run_id,))
    outcomes: list[TaskOutcome] = []
    written: list[tuple[Memory, list[float]]] = []
    ids = [derived_id(task.store, task.request_id, str(i)) for i in range(len(candidates))]
    # What an earlier attempt of this job already put in the table (it may have died before the index).
    earlier = {m.memory_id: m for m in deps.repo.get_memories(store, task.scope.app_id, task.scope.tenant_id, ids)}
    for memory_id, candidate, vector in zip(ids, candidates, vectors):
        if memory_id in earlier:
            mine = earlier[memory_id]
            if mine.text != candidate.text:  # edited since: index what the table holds
                vector = deps.embedder.embed([mine.text])[0]
            written.append((mine, vector))  # written again, to the same id: indexed if it was not
            outcomes.append(TaskOutcome(action=ExtractAction.ADD, memory_id=memory_id, text=candidate.text))
            continue
        neighbours = _neighbours(deps, store, exact, candidate.text, vector)
        # Also compare with what this job has already produced, so one conversation cannot add a fact twice.
        neighbours += [Neighbour(m, _dot(vector, v)) for m, v in written]
        decision = decide(neighbours, duplicate_similarity=deps.settings.duplicate_similarity)
        if decision.action == ExtractAction.NOOP and decision.target is not None:
            outcomes.append(TaskOutcome(action=ExtractAction.NOOP, memory_id=decision.target.memory_id,
                                        text=candidate.text, target_id=decision.target.memory_id))
            continue
        memory = Memory(memory_id=memory_id, scope=task.scope, memory_type=candidate.memory_type,
                        text=candidate.text, evidence=candidate.evidence, created_at=now, updated_at=now,
                        event_time=candidate.event_time, metadata=task.metadata, importance=candidate.importance,
                        keywords=candidate.keywords, request_id=task.request_id)
        written.append((memory, vector))
        outcomes.append(TaskOutcome(action=ExtractAction.ADD, memory_id=memory_id, text=candidate.text))
    # Table first (the truth), then the index (derived); a crash in between is repaired by the retry.
    for n, (memory, _) in enumerate(written):
        deps.repo.put_memory(store, memory)
        if n == 0 and len(written) > 1:
            deps.faults.point("extract.mid_memories")
    deps.faults.point("extract.after_table_write")
    if written:
        deps.index.upsert(store, written)
    deps.faults.point("extract.after_index_write")
    if written:
        deps.repo.touch_activity(store, task.scope, now)  # new memories: the scope is due for a dream
    return outcomes


def _neighbours(deps: Deps, store: str, scope: ScopeFilter, text: str, vector: list[float]) -> list[Neighbour]:
    hits = deps.index.search(store, IndexQuery(scope=scope, text=text, vector=vector, k=deps.settings.neighbours))
    by_id = {h.memory_id: h.score for h in hits.vector}
    if not by_id:
        return []
    memories = deps.repo.get_memories(store, scope.app_id, scope.tenant_id, list(by_id))
    return [Neighbour(m, by_id[m.memory_id]) for m in memories]


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))
