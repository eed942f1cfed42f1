"""Apply, reject and undo dream actions.

Apply checks that what the action is about is still as it was proposed (each memory active,
same text), then writes everything in one table transaction together with the action's new
state — the exact before-image of every item it touches and a digest of what it wrote — so
that a crash leaves either all or nothing, and two callers cannot both apply. The index is
updated after (it is derived; search re-checks every hit against the table).

Undo puts every before-image back, in one transaction, but only if nothing changed the items
since the action wrote them (undo later actions first), then restores the index the same way.
Superseded and deleted memories are kept in the table, so nothing an action does is lost.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from ..domain.errors import ConditionFailed, Conflict
from ..domain.ids import derived_id
from ..domain.models import (REDACTED, DreamAction, DreamActionKind, DreamActionStatus, Memory, MemoryDraft,
                             MemoryStatus, Profile, UndoEntry)
from ..domain.scope import Scope
from ..policies import conflicts, dream_profile
from ..ports import Delete, Item, Job, Put, Write
from .deps import Deps
from .index_writes import index_memories


def digest(item: Item | None) -> str:
    """A stable fingerprint of a table item, the same whichever backend returned it."""
    return hashlib.sha256(json.dumps(_canonical(item), sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False, default=str).encode()).hexdigest()


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


class _Plan:
    """The writes of one apply, with the undo entry of each item and what the index must do."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.undo: list[UndoEntry] = []
        self.index_upsert: list[Memory] = []
        self.index_delete: list[str] = []
        self.created: list[str] = []

    def memory(self, deps: Deps, store: str, new: Memory, current: Item | None) -> None:
        item = deps.repo.memory_item(store, new)
        if current is None:
            self.writes.append(Put(item, if_absent=True))
            self.created.append(new.memory_id)
        else:
            self.writes.append(Put(item, expect={"updated_at": current["updated_at"], "status": current["status"]}))
        self.undo.append(UndoEntry(pk=item["pk"], sk=item["sk"], memory_id=new.memory_id, before=current,
                                   after_digest=digest(item)))
        if new.status == MemoryStatus.DELETED:
            self.index_delete.append(new.memory_id)
        else:
            self.index_upsert.append(new)


def apply(deps: Deps, action: DreamAction, *, repair: bool = False) -> DreamAction:
    if action.status != DreamActionStatus.PENDING:
        raise Conflict(f"action '{action.action_id}' is {action.status}, not pending", code="action_not_pending")
    repo, store, now = deps.repo, action.store, deps.clock.now()
    involved = [*action.target_ids, *([action.keep_id] if action.keep_id else [])]
    keys = {mid: repo.memory_key(store, action.scope, mid) for mid in involved}
    items = repo.get_items(list(keys.values()))
    current = {mid: items.get(key) for mid, key in keys.items()}
    stale = _stale(action, current) or _newer_profile(deps, action)
    if stale:
        failed = action.model_copy(update={"status": DreamActionStatus.FAILED, "error": stale, "updated_at": now,
                                           "decided_at": now})
        put = repo.action_put(failed, expect_status=DreamActionStatus.PENDING)
        try:
            repo.table.put(put.item, expect=put.expect)  # a decider that won meanwhile (applied it) stands
        except ConditionFailed:
            raise Conflict(f"action '{action.action_id}' was decided meanwhile; read it again",
                           code="action_conflict") from None
        raise Conflict(f"action '{action.action_id}' is stale: {stale}", code="stale_action")

    plan = _Plan()
    mems = {mid: Memory.model_validate(item) for mid, item in current.items() if item is not None}
    kind = action.kind
    # A retraction (DELETE with the statement that retracts as its keep) closes what it denies the way
    # an update does: superseded by the retraction, with valid_to, so history and `as_of` still show it.
    if kind in (DreamActionKind.UPDATE, DreamActionKind.MERGE) or (kind == DreamActionKind.DELETE and action.keep_id):
        keep_id = action.keep_id
        if keep_id is None:  # a new statement replaces the targets
            assert action.after is not None
            keep_id = derived_id(store, action.action_id, "new")
            plan.memory(deps, store, _new_memory(keep_id, action, action.after, now,
                                                 supersedes=action.target_ids[0]), None)
        else:
            keep = mems[keep_id]
            after = action.after
            changes: dict[str, Any] = {"updated_at": now, "supersedes": keep.supersedes or action.target_ids[0]}
            if after is not None:
                changes.update(text=after.text, reading=conflicts.reading(after.text), memory_type=after.memory_type,
                               evidence=after.evidence, drawn_from=after.drawn_from)
            plan.memory(deps, store, keep.model_copy(update=changes), current[keep_id])
        # Each superseded statement held until the one that replaces it was said (or until now).
        kept = mems.get(keep_id)
        until = (kept.observed_at or kept.valid_from) if kept is not None else None
        for mid in action.target_ids:
            since = mems[mid].observed_at or mems[mid].valid_from
            valid_to = until if until is not None and (since is None or until >= since) else now
            old = mems[mid].model_copy(update={"status": MemoryStatus.SUPERSEDED, "superseded_by": keep_id,
                                               "updated_at": now, "valid_to": valid_to})
            plan.memory(deps, store, old, current[mid])
    elif kind == DreamActionKind.DELETE:
        for mid in action.target_ids:
            plan.memory(deps, store, mems[mid].model_copy(update={"status": MemoryStatus.DELETED, "updated_at": now}),
                        current[mid])
    elif kind in (DreamActionKind.ADD, DreamActionKind.EMIT_SKILL):
        assert action.after is not None
        new_id = derived_id(store, action.action_id, "new")
        plan.memory(deps, store, _new_memory(new_id, action, action.after, now), None)
    elif kind == DreamActionKind.EMIT_PROFILE:
        assert action.profile is not None
        _profile(deps, plan, action, action.profile, now)

    done = action.model_copy(update={"status": DreamActionStatus.APPLIED, "decided_at": now, "updated_at": now,
                                     "undo": plan.undo, "created_ids": plan.created, "error": None})
    try:
        _commit(deps, [*plan.writes, repo.action_put(done, expect_status=DreamActionStatus.PENDING)], done, repair)
    except ConditionFailed:
        raise Conflict(f"action '{action.action_id}' lost a race: its memories or its status changed while it was "
                       "being applied; read it again", code="action_conflict") from None
    _index(deps, store, action.scope, plan.index_upsert, plan.index_delete)
    return done


def take_back(deps: Deps, done: DreamAction) -> None:
    """An apply that wrote while its tenant's erasure ran: what it made under new keys (memories, a profile) the
    erasure's listing may not hold goes here, with the action (trial B: an erased tenant's profile came back). A
    dream's own applies are taken back with the dream (services/dream.py)."""
    repo, s = deps.repo, done.scope
    if done.created_ids:
        deps.index.delete(done.store, done.created_ids, app_id=s.app_id, tenant_id=s.tenant_id)
    made = [repo.memory_key(done.store, s, i) for i in done.created_ids]
    if done.profile is not None:
        p = done.profile
        made.append(repo.profile_key(p.store, p.app_id, p.tenant_id, p.agent_id))
    own = [i for i in repo.tenant_keys(done.store, s.app_id, s.tenant_id, prefix="DACT#")
           if i.get("action_id") == done.action_id]
    repo.delete_items([*repo.dream_pointers(done.store, own), *made, *[(i["pk"], i["sk"]) for i in own]])


REINDEX = "reindex_action"


def _commit(deps: Deps, writes: list[Write], action: DreamAction, repair: bool) -> None:
    """The table writes of an apply or undo; with `repair`, and a job that writes the index again from the table
    (`reindex`): a process that dies after the commit leaves no memory the index shows in another status for good.
    An apply a job makes needs none: that job's redelivery meets the action APPLIED and reindexes it."""
    if not repair:
        deps.repo.transact(writes)
        return
    s = action.scope
    deps.queue.commit(deps.table, writes, Job.of_tenant(REINDEX, action.store, action.action_id, s.app_id, s.tenant_id))


def reindex(deps: Deps, action: DreamAction) -> None:
    """The index writes of an applied action, again from the table: the process that applied it may have died
    between its transaction and its index write, leaving a superseded memory `active` in the index for good.
    Called where a redelivered job meets the action already APPLIED, and by the job an apply or undo asked
    through the API commits with its writes (idempotent: upserts, and deletes of what the table no longer holds)."""
    s = action.scope
    involved = {*action.target_ids, *([action.keep_id] if action.keep_id else []), *action.created_ids}
    if not involved:
        return
    held = deps.repo.get_memories(action.store, s.app_id, s.tenant_id, sorted(involved))
    gone = involved - {m.memory_id for m in held}  # what an undo took back
    _index(deps, action.store, s, [m for m in held if m.status != MemoryStatus.DELETED],
           sorted(gone) + [m.memory_id for m in held if m.status == MemoryStatus.DELETED])


def reject(deps: Deps, action: DreamAction) -> DreamAction:
    if action.status != DreamActionStatus.PENDING:
        raise Conflict(f"action '{action.action_id}' is {action.status}, not pending", code="action_not_pending")
    now = deps.clock.now()
    done = action.model_copy(update={"status": DreamActionStatus.REJECTED, "decided_at": now, "updated_at": now})
    try:
        deps.repo.transact([deps.repo.action_put(done, expect_status=DreamActionStatus.PENDING)])
    except ConditionFailed:
        raise Conflict(f"action '{action.action_id}' was decided meanwhile", code="action_conflict") from None
    return done


def undo(deps: Deps, action: DreamAction, *, repair: bool = False) -> DreamAction:
    if action.status != DreamActionStatus.APPLIED:
        raise Conflict(f"action '{action.action_id}' is {action.status}; only an applied action can be undone",
                       code="action_not_applied")
    if action.error:  # a deletion redacted it: what it changed is gone, not merely changed
        raise Conflict(f"action '{action.action_id}' is about a memory deleted since it was applied: it can no "
                       "longer be undone", code="undo_conflict")
    repo, now = deps.repo, deps.clock.now()
    items = repo.get_items([(e.pk, e.sk) for e in action.undo])
    writes: list[Write] = []
    for entry in action.undo:
        item = items.get((entry.pk, entry.sk))
        what = f"memory '{entry.memory_id}'" if entry.memory_id else "the profile"
        if item is None or digest(item) != entry.after_digest:
            raise Conflict(f"{what} changed after action '{action.action_id}' was applied; undo the later "
                           "changes first", code="undo_conflict")
        expect = {"updated_at": item.get("updated_at")}
        writes.append(Delete(entry.pk, entry.sk, expect=expect) if entry.before is None
                      else Put(entry.before, expect=expect))
    done = action.model_copy(update={"status": DreamActionStatus.UNDONE, "updated_at": now})
    try:
        _commit(deps, [*writes, repo.action_put(done, expect_status=DreamActionStatus.APPLIED)], done, repair)
    except ConditionFailed:
        raise Conflict(f"action '{action.action_id}' changed while being undone; read it again",
                       code="action_conflict") from None
    restored = [Memory.model_validate(e.before) for e in action.undo if e.memory_id and e.before is not None]
    removed = [e.memory_id for e in action.undo if e.memory_id and e.before is None]
    _index(deps, action.store, action.scope, [m for m in restored if m.status != MemoryStatus.DELETED],
           removed + [m.memory_id for m in restored if m.status == MemoryStatus.DELETED])
    return done


def _stale(action: DreamAction, current: dict[str, Item | None]) -> str | None:
    seen = {m.memory_id: m for m in action.before}
    for mid, item in current.items():
        if item is None:
            return f"memory '{mid}' no longer exists"
        if item.get("status") != MemoryStatus.ACTIVE:
            return f"memory '{mid}' is {item.get('status')} now"
        if mid in seen and item.get("text") != seen[mid].text:
            return f"memory '{mid}' was edited since the proposal"
        if mid in seen and datetime.fromisoformat(item["created_at"]) != seen[mid].created_at:
            return f"memory '{mid}' was deleted and written again since the proposal"
    return None


def _newer_profile(deps: Deps, action: DreamAction) -> str | None:
    """A profile proposed by an earlier dream than the one whose profile is applied: applying it would roll the
    profile back (dream task ids sort by time)."""
    if action.kind != DreamActionKind.EMIT_PROFILE or action.profile is None:
        return None
    p = action.profile
    held = deps.repo.get_items([key := deps.repo.profile_key(p.store, p.app_id, p.tenant_id, p.agent_id)]).get(key)
    applied = held.get("task_id") if held else None
    if applied and applied > action.task_id:
        return f"the profile of a later dream ({applied}) is applied"
    return None


def _new_memory(memory_id: str, action: DreamAction, draft: MemoryDraft, now: Any,
                supersedes: str | None = None) -> Memory:
    return Memory(memory_id=memory_id, scope=draft.scope, memory_type=draft.memory_type, text=draft.text,
                  evidence=draft.evidence, created_at=now, updated_at=now, event_time=draft.event_time,
                  metadata={**draft.metadata, "dream_action": action.action_id}, importance=draft.importance,
                  keywords=draft.keywords, reading=conflicts.reading(draft.text), supersedes=supersedes,
                  request_id=action.task_id, drawn_from=draft.drawn_from)


def _profile(deps: Deps, plan: _Plan, action: DreamAction, profile: Profile, now: Any) -> None:
    repo = deps.repo
    key = repo.profile_key(profile.store, profile.app_id, profile.tenant_id, profile.agent_id)
    current = repo.get_items([key]).get(key)
    version = int(current.get("version", 0)) + 1 if current else 1
    item = repo.profile_item(profile.model_copy(update={"version": version, "updated_at": now,
                                                        "task_id": action.task_id, "action_id": action.action_id}))
    plan.writes.append(Put(item, if_absent=True) if current is None
                       else Put(item, expect={"version": current.get("version")}))
    plan.undo.append(UndoEntry(pk=key[0], sk=key[1], before=current, after_digest=digest(item)))


def _index(deps: Deps, store: str, scope: Scope, upsert: list[Memory], delete: list[str]) -> None:
    """An action's memories are all of its tenant (a dream runs on one tenant's)."""
    if upsert:
        index_memories(deps, store, list(zip(upsert, deps.embedder.embed([m.text for m in upsert]))))
    if delete:
        deps.index.delete(store, delete, app_id=scope.app_id, tenant_id=scope.tenant_id)


# What a copy of a deleted memory loses: every field that holds the caller's words (a LangGraph item's value
# is its metadata), not the ids, scope and status that say what happened.
_EMPTIED = {"text": "", "keywords": "", "reading": "", "metadata": {}}


def redacted(action: DreamAction, memory_ids: set[str], run: Scope | None = None,
             reason: str = REDACTED) -> DreamAction | None:
    """`action` with no copy left of the deleted memories (or of anything of the deleted `run`): their
    texts, keywords and metadata in `before`, `after` and the undo before-images are emptied, its profile
    loses the entries they supported, its rationale (which may quote them) is replaced. A pending action can no
    longer be applied and is marked failed; an applied one can no longer be undone (its items are
    gone, so undo refuses). None when the action touched none of it."""
    def of_run(scope: Any, drawn_from: Any = ()) -> bool:  # the run's, or made of its words
        return run is not None and any(s is not None and Scope.model_validate(s) == run
                                       for s in (scope, *(drawn_from or ())))

    def gone(memory_id: str | None, scope: Any = None, drawn_from: Any = ()) -> bool:
        return memory_id in memory_ids or of_run(scope, drawn_from)

    involved = [*action.target_ids, *([action.keep_id] if action.keep_id else []), *action.created_ids]
    touched = (any(m in memory_ids for m in involved)
               or any(gone(m.memory_id, m.scope, m.drawn_from) for m in action.before)
               or any(gone(e.memory_id, (e.before or {}).get("scope"), (e.before or {}).get("drawn_from"))
                      for e in action.undo if e.memory_id)
               or of_run(action.scope)
               or (action.after is not None and of_run(action.after.scope, action.after.drawn_from)))
    profile_ids = set(memory_ids)
    if run is not None:
        profile_ids |= {m.memory_id for m in action.before if m.scope == run}
    profiles = [action.profile] if action.profile else []
    profiles += [Profile.model_validate(e.before) for e in action.undo if e.memory_id is None and e.before]
    if not touched and not any(dream_profile.supported_by(p, profile_ids) for p in profiles):
        return None
    changes: dict[str, Any] = {"rationale": reason}
    changes["before"] = [m.model_copy(update=_EMPTIED) if gone(m.memory_id, m.scope, m.drawn_from) else m
                         for m in action.before]
    if action.after is not None and touched:
        changes["after"] = action.after.model_copy(update=_EMPTIED)
    if action.profile is not None:
        changes["profile"] = dream_profile.without(action.profile, profile_ids)
    undo = []
    for entry in action.undo:
        before = entry.before
        if before is not None and entry.memory_id is None:
            before = {**before, **dream_profile.without(Profile.model_validate(before), profile_ids)
                      .model_dump(mode="json", exclude_none=True)}
        elif before is not None and gone(entry.memory_id, before.get("scope"), before.get("drawn_from")):
            before = {**before, **_EMPTIED}
        undo.append(entry.model_copy(update={"before": before}))
    changes["undo"] = undo
    if action.status == DreamActionStatus.PENDING:
        changes.update(status=DreamActionStatus.FAILED, error=reason)
    elif action.status == DreamActionStatus.APPLIED:
        changes["error"] = f"{reason}: it can no longer be undone"
    return action.model_copy(update=changes)
