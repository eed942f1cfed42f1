"""Dream: the activity registry, dream tasks and actions, profiles."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterator, Sequence

from ..domain.errors import ConditionFailed, NotFound
from ..domain.models import ActivityInfo, DreamAction, DreamTask, Memory, Profile
from ..domain.scope import Scope
from ..ports import Item, Put, Table, Update, Write
from .keys import tenant_pk, activity_pk, dream_pk
from .keys import _dump, _json_values


class DreamRecords:
    table: Table

    # -- dream: activity registry ------------------------------------------------------------
    # Written by ingest in the add transaction (and by extract when it writes memories): a scope
    # with `pending_since` set is due for a dream. The registry is one store-level partition so
    # the scheduler can walk it round-robin without knowing the tenants.
    def activity_key(self, store: str, scope: Scope) -> tuple[str, str]:
        return activity_pk(store), f"{scope.app_id}#{scope.tenant_id}#{scope.agent_id}#{scope.run_id}"

    def get_activity(self, store: str, scope: Scope) -> ActivityInfo | None:
        item = self.table.get(*self.activity_key(store, scope))
        return ActivityInfo.model_validate(item) if item else None

    def activity_write(self, store: str, scope: Scope, now: datetime, *, previous: ActivityInfo | None) -> Write:
        """Record activity in `scope`. Conditioned on `previous`, so a concurrent claim by a dream is never lost."""
        pk, sk = self.activity_key(store, scope)
        if previous is None:
            info = ActivityInfo(scope=scope, last_activity=now, pending_since=now)
            return Put({"pk": pk, "sk": sk, **_dump(info)}, if_absent=True)
        stamp = _dump(ActivityInfo(scope=scope, last_activity=now))["last_activity"]
        if previous.pending_since is None:
            return Update(pk, sk, {"last_activity": stamp, "pending_since": stamp}, expect={"pending_since": None})
        return Update(pk, sk, {"last_activity": stamp}, expect={"pending_since": _dump(previous)["pending_since"]})

    def know_scope(self, store: str, scope: Scope, now: datetime) -> None:
        """Give a scope written without messages or memories (a thread created, a profile or an access
        policy set) a registry entry, with nothing due for a dream, if it has none: so that the store's
        tenants (`iter_tenants`: its purge, reindex, fsck) include every tenant that has items. Written
        before the tenant's own items (the registry is a global partition, never in their transaction):
        a crash in between leaves an entry without items, which is harmless, never the reverse."""
        if self.get_activity(store, scope) is not None:
            return
        pk, sk = self.activity_key(store, scope)
        try:
            self.table.put({"pk": pk, "sk": sk, **_dump(ActivityInfo(scope=scope, last_activity=now))}, if_absent=True)
        except ConditionFailed:
            pass  # an add or another write registered it meanwhile

    def touch_activity(self, store: str, scope: Scope, now: datetime, *, attempts: int = 5) -> None:
        for _ in range(attempts):
            try:
                self.table.transact([self.activity_write(store, scope, now,
                                                         previous=self.get_activity(store, scope))])
                return
            except ConditionFailed:
                continue  # a concurrent add or dream claim moved it: read again

    def scan_activity(self, store: str, *, after: str | None, limit: int) -> list[tuple[str, ActivityInfo]]:
        """Up to `limit` registry entries in key order, starting after the key `after` (exclusive)."""
        page = self.table.query(activity_pk(store), start=after, limit=limit + 1 if after else limit)
        items = [i for i in page.items if i["sk"] != after][:limit]
        return [(i["sk"], ActivityInfo.model_validate(i)) for i in items]

    def list_activity(self, store: str, app_id: str, tenant_id: str, agent_id: str | None = None,
                      run_id: str | None = None) -> Iterator[tuple[str, ActivityInfo]]:
        prefix = f"{app_id}#{tenant_id}#"
        if agent_id is not None:
            prefix += f"{agent_id}#" + (run_id if run_id is not None else "")
        cursor = None
        while True:
            page = self.table.query(activity_pk(store), prefix=prefix, limit=500, cursor=cursor)
            for item in page.items:
                info = ActivityInfo.model_validate(item)
                if run_id is None or info.scope.run_id == run_id:
                    yield item["sk"], info
            if not (cursor := page.cursor):
                return

    def iter_tenants(self, store: str) -> Iterator[tuple[str, str]]:
        """Each (app_id, tenant_id) of the store once, in key order, from the activity registry: every
        write that creates a tenant's items records its scope there (adds and memory writes as activity,
        threads, profiles and access policies by `know_scope`)."""
        last: tuple[str, str] | None = None
        cursor = None
        while True:
            page = self.table.query(activity_pk(store), limit=500, cursor=cursor)
            for item in page.items:
                app_id, tenant_id = item["sk"].split("#", 2)[:2]
                if (app_id, tenant_id) != last:  # one tenant's scopes are adjacent in key order
                    last = (app_id, tenant_id)
                    yield last
            if not (cursor := page.cursor):
                return

    def activity_update(self, store: str, sk: str, changes: dict[str, Any],
                        expect: dict[str, Any] | None = None) -> Update:
        """An update of a registry entry; datetimes in `changes`/`expect` are stored as the model stores them."""
        return Update(activity_pk(store), sk, _json_values(changes),
                      expect=_json_values(expect) if expect is not None else None)

    def get_dream_cursor(self, store: str) -> str | None:
        item = self.table.get(dream_pk(store), "SCHED")
        return item.get("cursor") if item else None

    def set_dream_cursor(self, store: str, cursor: str | None) -> None:
        self.table.put({"pk": dream_pk(store), "sk": "SCHED", **({"cursor": cursor} if cursor else {})})

    # -- dream: tasks ------------------------------------------------------------------------
    def create_dream_task(self, task: DreamTask) -> None:
        """The id → tenant pointer (a global partition), then the task in the tenant's partition: two
        writes, never one transaction (no single credential may write both; see split_table.py)."""
        self.table.transact([self.dream_task_pointer(task)])
        self.save_dream_task(task)

    def dream_task_pointer(self, task: DreamTask) -> Put:
        s = task.scope
        return Put({"pk": dream_pk(task.store), "sk": f"TASK#{task.task_id}", "app_id": s.app_id,
                    "tenant_id": s.tenant_id}, if_absent=True)

    def dream_task_keys(self, task: DreamTask) -> list[tuple[str, str]]:
        """The task's pointer and its item, in the order they are deleted."""
        s = task.scope
        return [(dream_pk(task.store), f"TASK#{task.task_id}"),
                (tenant_pk(task.store, s.app_id, s.tenant_id), f"DREAM#{task.task_id}")]

    def dream_task_tenant(self, store: str, task_id: str) -> tuple[str, str] | None:
        """(app_id, tenant_id) of a dream task, from its pointer; None if unknown."""
        pointer = self.table.get(dream_pk(store), f"TASK#{task_id}")
        return (pointer["app_id"], pointer["tenant_id"]) if pointer else None

    def get_dream_task(self, store: str, task_id: str) -> DreamTask:
        pointer = self.table.get(dream_pk(store), f"TASK#{task_id}")
        item = pointer and self.table.get(tenant_pk(store, pointer["app_id"], pointer["tenant_id"]),
                                          f"DREAM#{task_id}")
        if not item:
            raise NotFound(f"dream task '{task_id}' not found", code="dream_task_not_found")
        return DreamTask.model_validate(item)

    def save_dream_task(self, task: DreamTask, *, expect_status: str | None = None) -> None:
        self.table.transact([self.dream_task_put(task, expect_status=expect_status)])

    def dream_task_put(self, task: DreamTask, *, expect_status: str | None = None) -> Put:
        """The dream task item (a write the queue can commit with the task's job)."""
        s = task.scope
        return Put({"pk": tenant_pk(task.store, s.app_id, s.tenant_id), "sk": f"DREAM#{task.task_id}",
                    **_dump(task)}, expect={"status": str(expect_status)} if expect_status else None)

    def list_dream_tasks(self, store: str, app_id: str, tenant_id: str, *, limit: int,
                         cursor: str | None) -> tuple[list[DreamTask], str | None]:
        page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="DREAM#", limit=limit, cursor=cursor,
                                forward=False)
        return [DreamTask.model_validate(i) for i in page.items], page.cursor

    # -- dream: actions ----------------------------------------------------------------------
    # An action id is derived from what the action does, so its pointer doubles as a guard: the
    # same proposal is never stored twice, even by two dreams, and a rejected one is not re-proposed.
    def claim_action(self, action: DreamAction, ordinal: int) -> str | None:
        """Reserve the action's id for its task (the pointer, a global partition) and return the sort key
        its item gets (`put_action`), or None when another dream holds that id. A pointer whose item was
        never written (a crash between the two writes) is taken over; the same task's own is reused."""
        s = action.scope
        # In proposal order, and the action's own: two attempts of a job whose answers differ may propose
        # other actions at one place, and one action's item must never be found under another's id.
        sk = f"DACT#{action.task_id}#{ordinal:04d}#{action.action_id[:12]}"
        pointer = {"pk": dream_pk(action.store), "sk": f"ACT#{action.action_id}", "app_id": s.app_id,
                   "tenant_id": s.tenant_id, "task_id": action.task_id, "item_sk": sk}
        try:
            self.table.put(pointer, if_absent=True)
            return sk
        except ConditionFailed:
            held = self.find_action_pointer(action.store, action.action_id)
        if held is None:
            return None
        if held["task_id"] == action.task_id:
            return str(held["item_sk"])
        if self.table.get(tenant_pk(action.store, held["app_id"], held["tenant_id"]), held["item_sk"]) is None:
            try:
                self.table.put(pointer, expect={"task_id": held["task_id"], "item_sk": held["item_sk"]})
                return sk
            except ConditionFailed:
                return None
        return None

    def put_action(self, action: DreamAction, sk: str) -> None:
        """Store a new action; ConditionFailed when its item exists (another delivery of the task stored it, and
        may have decided it since: what it holds stands)."""
        s = action.scope
        self.table.put({"pk": tenant_pk(action.store, s.app_id, s.tenant_id), "sk": sk, **_dump(action)},
                       if_absent=True)

    def action_tenant(self, store: str, action_id: str) -> tuple[str, str] | None:
        """(app_id, tenant_id) of a dream action, from its pointer; None if unknown."""
        pointer = self.find_action_pointer(store, action_id)
        return (pointer["app_id"], pointer["tenant_id"]) if pointer else None

    def find_action_pointer(self, store: str, action_id: str) -> Item | None:
        return self.table.get(dream_pk(store), f"ACT#{action_id}")

    def get_action(self, store: str, action_id: str) -> DreamAction:
        pointer = self.find_action_pointer(store, action_id)
        item = pointer and self.table.get(tenant_pk(store, pointer["app_id"], pointer["tenant_id"]),
                                          pointer["item_sk"])
        if not item:
            raise NotFound(f"dream action '{action_id}' not found", code="dream_action_not_found")
        return DreamAction.model_validate(item)

    def action_put(self, action: DreamAction, *, expect_status: str) -> Put:
        """The action's new state, conditioned on the status it had: two deciders cannot both win."""
        pointer = self.find_action_pointer(action.store, action.action_id)
        if pointer is None:
            raise NotFound(f"dream action '{action.action_id}' not found", code="dream_action_not_found")
        s = action.scope
        return Put({"pk": tenant_pk(action.store, s.app_id, s.tenant_id), "sk": pointer["item_sk"],
                    **_dump(action)}, expect={"status": str(expect_status)})

    def list_actions(self, store: str, app_id: str, tenant_id: str, task_id: str, *, limit: int = 1000,
                     cursor: str | None = None) -> tuple[list[DreamAction], str | None]:
        page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix=f"DACT#{task_id}#", limit=limit,
                                cursor=cursor)
        return [DreamAction.model_validate(i) for i in page.items], page.cursor

    # -- dream: profiles and raw items for undo ----------------------------------------------
    def profile_key(self, store: str, app_id: str, tenant_id: str, agent_id: str | None) -> tuple[str, str]:
        sk = "PROFILE#~tenant" if agent_id is None else f"PROFILE#AGENT#{agent_id}"
        return tenant_pk(store, app_id, tenant_id), sk

    def get_profile(self, store: str, app_id: str, tenant_id: str, agent_id: str | None = None) -> Profile | None:
        item = self.table.get(*self.profile_key(store, app_id, tenant_id, agent_id))
        return Profile.model_validate(item) if item else None

    def profile_item(self, profile: Profile) -> Item:
        pk, sk = self.profile_key(profile.store, profile.app_id, profile.tenant_id, profile.agent_id)
        return {"pk": pk, "sk": sk, **_dump(profile)}

    def memory_key(self, store: str, scope: Scope, memory_id: str) -> tuple[str, str]:
        return tenant_pk(store, scope.app_id, scope.tenant_id), f"MEM#{memory_id}"

    def memory_item(self, store: str, memory: Memory) -> Item:
        return self.memory_put(store, memory).item

    def get_items(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Item]:
        return {(i["pk"], i["sk"]): i for i in self.table.batch_get(list(keys))}

    def dream_keys_outside(self, store: str, app_id: str, tenant_id: str,
                           tenant_items: Sequence[Item]) -> list[tuple[str, str]]:
        """Keys of a tenant's dream data outside its partition: its activity registry entries and the
        pointers of its dream tasks and actions (`tenant_items`: the items of its partition). Erasure
        deletes these with the partition."""
        return [(activity_pk(store), sk) for sk, _ in self.list_activity(store, app_id, tenant_id)] + \
            self.dream_pointers(store, tenant_items)

    def dream_pointers(self, store: str, tenant_items: Sequence[Item]) -> list[tuple[str, str]]:
        """Keys of the pointers (in the store's dream partition) of these dream task and action items."""
        keys = []
        for item in tenant_items:
            if item["sk"].startswith("DREAM#"):
                keys.append((dream_pk(store), f"TASK#{item['sk'][len('DREAM#'):]}"))
            elif item["sk"].startswith("DACT#") and "action_id" in item:
                keys.append((dream_pk(store), f"ACT#{item['action_id']}"))
        return keys
