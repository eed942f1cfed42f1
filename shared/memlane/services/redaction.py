"""Redaction: after memories (or a whole run) are deleted, rewrite every record of the tenant that
keeps a copy of their content, so that no route shows it again.

- tasks: the text and reason of each outcome that produced or matched a deleted memory (and, for a
  run, the add's own text and metadata) are emptied, and the deleted statements leave the answer a running job
  recorded for its retry; status, ids and counts stay for the record; the digest of the request's body goes
  where its content did (`check_replay`);
- dream actions: their before/after copies, undo before-images, profile copies and rationale
  (services/dream_actions.redacted);
- profiles resting on a deleted memory are rebuilt from the tenant's remaining active memories,
  so an attribute whose only evidence was deleted disappears (policies/dream_profile.build).

Each rewrite is conditioned on the item not having changed since it was read; a lost race is
read again. A thread's summary cites messages, not memories: it goes with its run (services/erase.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

from ..domain.errors import ConditionFailed, Conflict
from ..domain.models import EXPLICIT_WRITE, REDACTED, DreamAction, MemoryStatus, Profile, Task, TaskOutcome
from ..domain.scope import Scope
from ..policies import dream_profile
from .dream_actions import redacted as redacted_action
from .deps import Deps
from .task_ids import task_id

_ATTEMPTS = 5


@dataclass(frozen=True)
class Redacted:
    tasks: int = 0
    dream_actions: int = 0
    profiles: int = 0

    def __add__(self, other: "Redacted") -> "Redacted":
        return Redacted(self.tasks + other.tasks, self.dream_actions + other.dream_actions,
                        self.profiles + other.profiles)


def redact(deps: Deps, store: str, app_id: str, tenant_id: str, *, memory_ids: set[str],
           run: Scope | None = None, statements: frozenset[str] = frozenset()) -> Redacted:
    """`deps` must be bound to the tenant (`Deps.for_tenant`). `statements`: the deleted memories' statement keys
    (services/task_ids.py), taken out of a job's recorded answer that says one again."""
    def task(item: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
        found = Task.model_validate(item)
        new = _redacted_task(found, memory_ids, run, statements)
        if new is None or new == found:  # nothing of theirs, or redacted already (a deletion redacts twice)
            return None
        # A new version: a write conditioned on the one read before (a manual retry, a job noting its writes) fails
        # and reads this one, rather than writing back what it took out (a regression trial).
        later = new.model_copy(update={"updated_at": found.updated_at + timedelta(microseconds=1)})
        return later, {"status": str(found.status), "updated_at": item["updated_at"]}

    return Redacted(tasks=_rewrite_all(deps, store, app_id, tenant_id, "TASK#", task),
                    dream_actions=_rewrite_all(deps, store, app_id, tenant_id, "DACT#", _action(memory_ids, run)),
                    profiles=rebuild_profiles(deps, store, app_id, tenant_id, memory_ids, gone=True))


def rebuild_profiles(deps: Deps, store: str, app_id: str, tenant_id: str, memory_ids: set[str], *,
                     gone: bool = False) -> int:
    """Rebuild each distilled profile of the tenant that rests on one of `memory_ids` from its active memories as
    they are now (policies/dream_profile.build): after they were deleted (`gone`), superseded or edited, the profile
    says what holds without waiting for the next dream. Returns how many were rewritten."""
    def profile(item: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
        found = Profile.model_validate(item)
        if not dream_profile.supported_by(found, memory_ids):
            return None
        active = [m for m in deps.repo.iter_memories(store, app_id, tenant_id)
                  if m.status == MemoryStatus.ACTIVE and not (gone and m.memory_id in memory_ids)
                  and (found.agent_id is None or m.scope.agent_id == found.agent_id)]
        built = dream_profile.build(store=store, app_id=app_id, tenant_id=tenant_id, agent_id=found.agent_id,
                                    memories=active)
        new = built.model_copy(update={"version": found.version + 1, "updated_at": deps.clock.now()})
        return new, {"version": found.version}

    return _rewrite_all(deps, store, app_id, tenant_id, "PROFILE#", profile)


def redact_task_actions(deps: Deps, store: str, app_id: str, tenant_id: str, task_id: str, run: Scope) -> int:
    """The actions of one dream task with no copy left of anything of `run` (its messages read, then deleted):
    only that task's — a run deleted and made again by a new add has records of its own, which stand."""
    return _rewrite_all(deps, store, app_id, tenant_id, f"DACT#{task_id}#", _action(set(), run))


def after_edit(deps: Deps, store: str, app_id: str, tenant_id: str, memory_id: str) -> int:
    """The dream actions with no copy left of what an edit took out of the memory's text (a password): their copies
    of it emptied, a pending one FAILED (trial B: a pending merge and profile kept the old words, and applying the
    profile wrote them back). How many were rewritten."""
    return _rewrite_all(deps, store, app_id, tenant_id, "DACT#", _action({memory_id}, None, EDITED))


EDITED = "redacted: a memory it was about was edited"


def _action(memory_ids: set[str], run: Scope | None,
            reason: str = REDACTED) -> Callable[[dict[str, Any]], tuple[Any, dict[str, Any]] | None]:
    """A dream action item's redacted rewrite (and the state it is conditioned on), or None if untouched."""
    def change(item: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
        found = DreamAction.model_validate(item)
        new = redacted_action(found, memory_ids, run, reason)
        if new is None or new == found:  # nothing of theirs, or redacted already
            return None
        return new, {"status": item["status"], "updated_at": item["updated_at"]}
    return change


def after_compare(deps: Deps, store: str, app_id: str, tenant_id: str, compared: set[str]) -> Redacted | None:
    """A job wrote a record quoting memories it compared with (a task's outcomes, a write-time action): those
    deleted meanwhile leave it as they left every other record. A delete redacts again after removing the
    memory, so a record written before that pass is its; one written after finds the memory gone here."""
    compared.discard("")
    if not compared:
        return None
    present = {m.memory_id for m in deps.repo.get_memories(store, app_id, tenant_id, sorted(compared))}
    gone = compared - present
    return redact(deps, store, app_id, tenant_id, memory_ids=gone) if gone else None


def _redacted_task(task: Task, memory_ids: set[str], run: Scope | None,
                   statements: frozenset[str] = frozenset()) -> Task | None:
    """The task without the deleted memories' words: an outcome about one of them loses its text and its
    reason (which quotes the two statements it compared); a task of the deleted run loses the add's own
    text and metadata too, and so does its body's digest — as an explicit write's does with its memories: against
    it, a replay with a guessed text would confirm the deleted one (a trial)."""
    def about(o: TaskOutcome) -> bool:
        return o.memory_id in memory_ids or o.target_id in memory_ids or not memory_ids.isdisjoint(o.target_ids)

    whole = run is not None and task.scope == run
    # The answer a job recorded for its retry (Task.answer) without their statements, nor one saying a deleted
    # memory again: never written again (it would be new once the memory it restates is gone: a regression trial).
    answer = None if whole or task.answer is None else \
        {key: None if task_id(task, key) in memory_ids or key in statements else c for key, c in task.answer.items()}
    if not whole and not any(about(o) for o in task.outcomes) and answer == task.answer:
        return None
    outcomes = [o.model_copy(update={"text": "", "reason": REDACTED}) if whole or about(o) else o
                for o in task.outcomes]
    if task.kind == EXPLICIT_WRITE and task.body_hash is not None:
        return task.model_copy(update={"outcomes": outcomes, "answer": answer, "body_hash": BODY_DELETED})
    if not whole:
        return task.model_copy(update={"outcomes": outcomes, "answer": answer})
    return task.model_copy(update={"outcomes": outcomes, "answer": None, "text": None, "metadata": {},
                                   "body_hash": BODY_DELETED if task.body_hash is not None else None})


BODY_DELETED = "deleted"  # a task's body digest once what the request said was deleted


def check_replay(task: Task, request_id: str) -> None:
    """A request id whose request's content was deleted is refused whatever the body: nothing tells whether it is
    the deleted one."""
    if task.body_hash == BODY_DELETED:
        raise Conflict(f"request_id '{request_id}' named a request whose content was deleted; use a new request_id",
                       code="request_content_deleted", field="request_id")


def _rewrite_all(deps: Deps, store: str, app_id: str, tenant_id: str, prefix: str,
                 change: Callable[[dict[str, Any]], tuple[Any, dict[str, Any]] | None]) -> int:
    repo = deps.repo
    count = 0
    for item in list(repo.tenant_keys(store, app_id, tenant_id, prefix=prefix)):
        for _ in range(_ATTEMPTS):
            planned = change(item)
            if planned is None:
                break
            try:
                repo.rewrite(item, planned[0], expect=planned[1])
                count += 1
                break
            except ConditionFailed:  # changed meanwhile (a dream, an extraction): read it again
                fresh = repo.table.get(item["pk"], item["sk"])
                if fresh is None:
                    break
                item = fresh
    return count
