"""The single-table key design, in one place. Maps domain models to table items and back.

Partitions (pk) and sort keys (sk):

    ~stores                       <store>                         the store catalog
    <store>#<app>#<tenant>        MSG#<agent>#<run>#<message_id>  messages (short-term memory)
    <store>#<app>#<tenant>        MEM#<memory_id>                 memory units
    <store>#<app>#<tenant>        TASK#<request_id>               extraction tasks
    <store>#<app>#<tenant>        SCOPE#<agent>#<run>             scope registry (activity, access policy)
    <store>#~requests             <request_id>                    request id → tenant (uniqueness guard)
    ~grants                       <principal>                     what a caller may touch
    ~apikeys                      <sha256 of key>                 local-mode API key → principal
    <store>#~audit                <time>#<request_id>             the audit log (expires_at = TTL)
    ~erasures                     <erasure_id>                    tenant erasure tasks
    ~stores-purging               <store>                         deleted stores whose items are being purged
    <store>#~activity             <app>#<tenant>#<agent>#<run>    activity registry: which scopes a dream is due for
    <store>#<app>#<tenant>        DREAM#<task_id>                 dream tasks
    <store>#<app>#<tenant>        DACT#<task_id>#<nnnn>           dream actions, in proposal order (with undo records)
    <store>#<app>#<tenant>        PROFILE#~tenant                 the tenant's profile
    <store>#<app>#<tenant>        PROFILE#AGENT#<agent>           the profile of one agent of the tenant
    <store>#~dream                TASK#<task_id> / ACT#<action_id>  dream task / action id → tenant (pointers)
    <store>#~dream                SCHED                           the scheduler's round-robin cursor

Every tenant item lives under a partition key that *is* ``store#app#tenant``, so one IAM
condition on ``dynamodb:LeadingKeys`` confines a caller to its tenant. Scope ids cannot
contain ``#`` or ``~`` (domain.scope), so no id can forge another partition.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterator, Sequence

from pydantic import TypeAdapter

from .domain.errors import ConditionFailed, Conflict, NotFound
from .domain.models import AuditRecord, Erasure, Grant, Memory, Message, ScopeInfo, Store, Task
from .domain.models import ActivityInfo, DreamAction, DreamTask, Profile
from .domain.scope import Scope, ScopeFilter
from .ports import Delete, Item, Put, Table, Update, Write

STORES_PK = "~stores"
ERASURES_PK = "~erasures"
PURGING_PK = "~stores-purging"  # stores deleted whose items are still being purged
GRANTS_PK = "~grants"
API_KEYS_PK = "~apikeys"
TTL_ATTRIBUTE = "expires_at"  # epoch seconds; DynamoDB TTL deletes the item after it


def tenant_pk(store: str, app_id: str, tenant_id: str) -> str:
    return f"{store}#{app_id}#{tenant_id}"


def requests_pk(store: str) -> str:
    return f"{store}#~requests"


def message_sk(scope: Scope, message_id: str = "") -> str:
    return f"MSG#{scope.agent_id}#{scope.run_id}#{message_id}"


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


class Repository:
    """Typed access to the table. The only code that knows the key layout."""

    def __init__(self, table: Table):
        self.table = table

    # -- stores ------------------------------------------------------------------------------
    def create_store(self, store: Store) -> None:
        try:
            self.table.put({"pk": STORES_PK, "sk": store.name, **_dump(store)}, if_absent=True)
        except ConditionFailed:
            raise Conflict(f"store '{store.name}' already exists", code="store_exists") from None

    def get_store(self, name: str) -> Store:
        item = self.table.get(STORES_PK, name)
        if item is None:
            raise NotFound(f"store '{name}' not found", code="store_not_found")
        return Store.model_validate(item)

    def list_stores(self, limit: int, cursor: str | None) -> tuple[list[Store], str | None]:
        page = self.table.query(STORES_PK, limit=limit, cursor=cursor)
        return [Store.model_validate(i) for i in page.items], page.cursor

    def delete_store(self, name: str) -> None:
        self.table.delete(STORES_PK, name)

    def update_store(self, store: Store) -> None:
        """Overwrite an existing store's record (reindex records the embedding model it used)."""
        try:
            self.table.put({"pk": STORES_PK, "sk": store.name, **_dump(store)}, expect={"name": store.name})
        except ConditionFailed:
            raise NotFound(f"store '{store.name}' not found", code="store_not_found") from None

    # -- messages ----------------------------------------------------------------------------
    def message_put(self, store: str, message: Message) -> Put:
        s = message.scope
        return Put({"pk": tenant_pk(store, s.app_id, s.tenant_id), "sk": message_sk(s, message.message_id),
                    **_dump(message)})

    def list_messages(self, store: str, scope: Scope, *, limit: int, cursor: str | None,
                      forward: bool = True) -> tuple[list[Message], str | None]:
        page = self.table.query(tenant_pk(store, scope.app_id, scope.tenant_id), prefix=message_sk(scope),
                                limit=limit, cursor=cursor, forward=forward)
        return [Message.model_validate(i) for i in page.items], page.cursor

    def get_messages(self, store: str, scope: Scope, message_ids: Sequence[str]) -> list[Message]:
        pk = tenant_pk(store, scope.app_id, scope.tenant_id)
        items = self.table.batch_get([(pk, message_sk(scope, mid)) for mid in message_ids])
        return [Message.model_validate(i) for i in items]

    # -- memories ----------------------------------------------------------------------------
    def memory_put(self, store: str, memory: Memory, *, expect: dict[str, Any] | None = None) -> Put:
        s = memory.scope
        return Put({"pk": tenant_pk(store, s.app_id, s.tenant_id), "sk": f"MEM#{memory.memory_id}", **_dump(memory)},
                   expect=expect)

    def put_memory(self, store: str, memory: Memory) -> None:
        put = self.memory_put(store, memory)
        self.table.put(put.item)

    def get_memory(self, store: str, app_id: str, tenant_id: str, memory_id: str) -> Memory:
        item = self.table.get(tenant_pk(store, app_id, tenant_id), f"MEM#{memory_id}")
        if item is None:
            raise NotFound(f"memory '{memory_id}' not found", code="memory_not_found")
        return Memory.model_validate(item)

    def get_memories(self, store: str, app_id: str, tenant_id: str, memory_ids: Sequence[str]) -> list[Memory]:
        pk = tenant_pk(store, app_id, tenant_id)
        return [Memory.model_validate(i) for i in self.table.batch_get([(pk, f"MEM#{m}") for m in memory_ids])]

    def list_memories(self, store: str, scope: ScopeFilter, *, limit: int,
                      cursor: str | None) -> tuple[list[Memory], str | None]:
        """Memories of a tenant narrowed to the filter's agents/runs. Pages by the partition."""
        page = self.table.query(tenant_pk(store, scope.app_id, scope.tenant_id), prefix="MEM#",
                                limit=limit, cursor=cursor)
        found = [Memory.model_validate(i) for i in page.items]
        return [m for m in found if scope.matches(m.scope.as_dict())], page.cursor

    def iter_memories(self, store: str, app_id: str, tenant_id: str) -> Iterator[Memory]:
        cursor = None
        while True:
            page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="MEM#", limit=500, cursor=cursor)
            yield from (Memory.model_validate(i) for i in page.items)
            if not (cursor := page.cursor):
                return

    # -- tasks -------------------------------------------------------------------------------
    def claim_request(self, store: str, request_id: str, scope: Scope) -> None:
        """Reserve a request id for a tenant (a global partition). Claiming it again for the same
        tenant is fine — a retried add whose first attempt died after this step carries on."""
        try:
            self.table.put({"pk": requests_pk(store), "sk": request_id, "app_id": scope.app_id,
                            "tenant_id": scope.tenant_id}, if_absent=True)
        except ConditionFailed:
            if self.task_tenant(store, request_id) != (scope.app_id, scope.tenant_id):
                raise Conflict(f"request_id '{request_id}' was already used for another scope",
                               code="request_id_in_use", field="request_id") from None

    def task_put(self, task: Task) -> Put:
        """The task item, written only if absent (the tenant's own guard against a replay)."""
        s = task.scope
        return Put({"pk": tenant_pk(task.store, s.app_id, s.tenant_id), "sk": f"TASK#{task.request_id}",
                    **_dump(task)}, if_absent=True)

    def task_tenant(self, store: str, request_id: str) -> tuple[str, str] | None:
        """(app_id, tenant_id) a request id belongs to, from its pointer; None if unknown."""
        pointer = self.table.get(requests_pk(store), request_id)
        return (pointer["app_id"], pointer["tenant_id"]) if pointer else None

    def find_task(self, store: str, request_id: str) -> Task | None:
        """A pointer without its task (an add that died between the two writes) counts as absent."""
        owner = self.task_tenant(store, request_id)
        if owner is None:
            return None
        item = self.table.get(tenant_pk(store, *owner), f"TASK#{request_id}")
        return Task.model_validate(item) if item else None

    def get_task(self, store: str, request_id: str) -> Task:
        task = self.find_task(store, request_id)
        if task is None:
            raise NotFound(f"task '{request_id}' not found", code="task_not_found")
        return task

    def save_task(self, task: Task, *, expect_status: str | None = None) -> None:
        s = task.scope
        self.table.put({"pk": tenant_pk(task.store, s.app_id, s.tenant_id), "sk": f"TASK#{task.request_id}",
                        **_dump(task)}, expect={"status": expect_status} if expect_status else None)

    def list_tasks(self, store: str, app_id: str, tenant_id: str, *, limit: int,
                   cursor: str | None) -> tuple[list[Task], str | None]:
        page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="TASK#", limit=limit, cursor=cursor,
                                forward=False)
        return [Task.model_validate(i) for i in page.items], page.cursor

    # -- scope registry ----------------------------------------------------------------------
    def _scope_key(self, store: str, scope: Scope) -> tuple[str, str]:
        return tenant_pk(store, scope.app_id, scope.tenant_id), f"SCOPE#{scope.agent_id}#{scope.run_id}"

    def get_scope(self, store: str, scope: Scope) -> ScopeInfo | None:
        item = self.table.get(*self._scope_key(store, scope))
        return ScopeInfo.model_validate(item) if item else None

    def scope_write(self, store: str, info: ScopeInfo, *, previous: ScopeInfo | None) -> Write:
        """Create or advance the registry entry; conditioned so concurrent adds cannot lose counts."""
        pk, sk = self._scope_key(store, info.scope)
        item = {"pk": pk, "sk": sk, **_dump(info)}
        if previous is None:
            return Put(item, if_absent=True)
        return Put(item, expect={"message_count": previous.message_count})

    def set_access_policy(self, store: str, info: ScopeInfo) -> None:
        pk, sk = self._scope_key(store, info.scope)
        self.table.put({"pk": pk, "sk": sk, **_dump(info)})

    def list_scopes(self, store: str, app_id: str, tenant_id: str, *, limit: int,
                    cursor: str | None) -> tuple[list[ScopeInfo], str | None]:
        page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="SCOPE#", limit=limit, cursor=cursor)
        return [ScopeInfo.model_validate(i) for i in page.items], page.cursor

    def transact(self, writes: Sequence[Write]) -> None:
        self.table.transact(writes)



    # -- grants, API keys, audit -------------------------------------------------------------
    def put_grant(self, grant: Grant) -> None:
        self.table.put({"pk": GRANTS_PK, "sk": grant.principal, **_dump(grant)})

    def get_grant(self, principal: str) -> Grant | None:
        item = self.table.get(GRANTS_PK, principal)
        return Grant.model_validate(item) if item else None

    def list_grants(self, limit: int, cursor: str | None) -> tuple[list[Grant], str | None]:
        page = self.table.query(GRANTS_PK, limit=limit, cursor=cursor)
        return [Grant.model_validate(i) for i in page.items], page.cursor

    def delete_grant(self, principal: str) -> None:
        self.table.delete(GRANTS_PK, principal)

    def put_api_key(self, key_hash: str, principal: str) -> None:
        self.table.put({"pk": API_KEYS_PK, "sk": key_hash, "principal": principal}, if_absent=True)

    def principal_for_key(self, key_hash: str) -> str | None:
        item = self.table.get(API_KEYS_PK, key_hash)
        return item["principal"] if item else None

    def has_api_keys(self) -> bool:
        return bool(self.table.query(API_KEYS_PK, limit=1).items)

    def put_audit(self, record: AuditRecord, expires_at: int) -> None:
        self.table.put({"pk": f"{record.store}#~audit", "sk": f"{record.at.isoformat()}#{record.request_id}",
                        TTL_ATTRIBUTE: expires_at, **_dump(record)})

    def list_audit(self, store: str, *, limit: int, cursor: str | None, since: str | None = None,
                   until: str | None = None) -> tuple[list[AuditRecord], str | None]:
        """Newest first. `since`/`until` are ISO times bounding the sort key."""
        page = self.table.query(f"{store}#~audit", start=since or "0", end=(until or "9999") + "~", limit=limit,
                                cursor=cursor, forward=False)
        return [AuditRecord.model_validate(i) for i in page.items], page.cursor

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
        """Each (app_id, tenant_id) of the store once, in key order, from the activity registry:
        every add and every memory write records its scope there (used by reindex)."""
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
        s = task.scope
        self.table.put({"pk": tenant_pk(task.store, s.app_id, s.tenant_id), "sk": f"DREAM#{task.task_id}",
                        **_dump(task)}, expect={"status": expect_status} if expect_status else None)

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
        sk = f"DACT#{action.task_id}#{ordinal:04d}"
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
        s = action.scope
        self.table.put({"pk": tenant_pk(action.store, s.app_id, s.tenant_id), "sk": sk, **_dump(action)})

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
        keys = [(activity_pk(store), sk) for sk, _ in self.list_activity(store, app_id, tenant_id)]
        for item in tenant_items:
            if item["sk"].startswith("DREAM#"):
                keys.append((dream_pk(store), f"TASK#{item['sk'][len('DREAM#'):]}"))
            elif item["sk"].startswith("DACT#") and "action_id" in item:
                keys.append((dream_pk(store), f"ACT#{item['action_id']}"))
        return keys

    # -- store deletion ----------------------------------------------------------------------
    def mark_purging(self, store: str) -> None:
        self.table.put({"pk": PURGING_PK, "sk": store})

    def is_purging(self, store: str) -> bool:
        return self.table.get(PURGING_PK, store) is not None

    def purged(self, store: str) -> None:
        self.table.delete(PURGING_PK, store)

    def store_global_keys(self, store: str) -> Iterator[tuple[str, str]]:
        """Keys of the store's global partitions except its audit log (kept for its retention)."""
        for pk in (requests_pk(store), activity_pk(store), dream_pk(store)):
            cursor = None
            while True:
                page = self.table.query(pk, limit=500, cursor=cursor)
                yield from ((i["pk"], i["sk"]) for i in page.items)
                if not (cursor := page.cursor):
                    break

    # -- erasure -------------------------------------------------------------------------------
    def put_erasure(self, erasure: Erasure) -> None:
        self.table.put({"pk": ERASURES_PK, "sk": erasure.erasure_id, **_dump(erasure)})

    def get_erasure(self, erasure_id: str) -> Erasure:
        item = self.table.get(ERASURES_PK, erasure_id)
        if item is None:
            raise NotFound(f"erasure '{erasure_id}' not found", code="erasure_not_found")
        return Erasure.model_validate(item)

    def tenant_keys(self, store: str, app_id: str, tenant_id: str, prefix: str | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a tenant's partition (optionally one sort-key prefix), page by page."""
        cursor = None
        while True:
            page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix=prefix, limit=500, cursor=cursor)
            yield from page.items
            if not (cursor := page.cursor):
                return

    def delete_items(self, keys: Sequence[tuple[str, str]]) -> None:
        for start in range(0, len(keys), 25):
            self.table.transact([Delete(pk, sk) for pk, sk in keys[start:start + 25]])


def activity_pk(store: str) -> str:
    return f"{store}#~activity"


def dream_pk(store: str) -> str:
    return f"{store}#~dream"


_DATETIME = TypeAdapter(datetime)


def _json_values(values: dict[str, Any]) -> dict[str, Any]:
    """Datetimes as the models store them (pydantic's JSON form), so conditions compare like with like."""
    return {k: (_DATETIME.dump_python(v, mode="json") if isinstance(v, datetime) else v) for k, v in values.items()}
