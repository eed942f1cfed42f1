"""Stores, messages, memories, tasks and the scope registry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable, Iterator, Sequence

from ..domain import limits
from ..domain.errors import ConditionFailed, Conflict, InvalidInput, NotFound
from ..domain.models import Candidate, Memory, Message, ScopeInfo, Store, Task, TaskStatus
from ..domain.scope import Scope, ScopeFilter
from ..ports import Check, Delete, Put, Table, Write
from .keys import STORES_PK, tenant_pk, requests_pk, message_sk
from .pages import filtered_page
from .keys import _dump


class CoreRecords:
    table: Table

    # -- stores ------------------------------------------------------------------------------
    def create_store(self, store: Store) -> Store:
        created = store.model_copy(update={"version": 1})  # 0 stands for a record written before versions
        try:
            self.table.put({"pk": STORES_PK, "sk": store.name, **_dump(created)}, if_absent=True)
        except ConditionFailed:
            raise Conflict(f"store '{store.name}' already exists", code="store_exists") from None
        return created

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

    def update_store(self, store: Store) -> Store:
        """Replace a store's record read as `store` (its version), bumping the version: two rewrites (a
        reindex, a first use recording the embedder) never overwrite each other. ConditionFailed if the
        record changed since it was read; NotFound if it is gone."""
        updated = store.model_copy(update={"version": store.version + 1})
        try:
            # Version 0: a record written before versions, which has no such attribute.
            self.table.put({"pk": STORES_PK, "sk": store.name, **_dump(updated)},
                           expect={"name": store.name, "version": store.version or None})
        except ConditionFailed:
            self.get_store(store.name)  # gone → NotFound
            raise
        return updated

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

    def messages_before(self, store: str, scope: Scope, message_id: str, *, limit: int) -> list[Message]:
        """Up to `limit` messages of the scope's run sorted before `message_id` (ids sort by time), newest first."""
        page = self.table.query(tenant_pk(store, scope.app_id, scope.tenant_id), start=message_sk(scope),
                                end=message_sk(scope, message_id), limit=limit + 1, forward=False)
        found = [Message.model_validate(i) for i in page.items]
        return [m for m in found if m.message_id != message_id][:limit]

    def get_messages(self, store: str, scope: Scope, message_ids: Sequence[str]) -> list[Message]:
        pk = tenant_pk(store, scope.app_id, scope.tenant_id)
        items = self.table.batch_get([(pk, message_sk(scope, mid)) for mid in message_ids])
        return [Message.model_validate(i) for i in items]

    def iter_messages(self, store: str, app_id: str, tenant_id: str) -> Iterator[Message]:
        """Every message of a tenant, run by run (what fsck and reindex put in the index)."""
        cursor = None
        while True:
            page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="MSG#", limit=500, cursor=cursor)
            yield from (Message.model_validate(i) for i in page.items)
            if not (cursor := page.cursor):
                return

    # -- memories ----------------------------------------------------------------------------
    def memory_put(self, store: str, memory: Memory, *, expect: dict[str, Any] | None = None,
                   previous: Memory | None = None) -> Put:
        """`previous`: only over that version of the memory (as `put_memory`)."""
        s = memory.scope
        return Put({"pk": tenant_pk(store, s.app_id, s.tenant_id), "sk": f"MEM#{memory.memory_id}", **_dump(memory)},
                   expect=_as_read(previous) if previous is not None else expect)

    def put_memory(self, store: str, memory: Memory, *, previous: Memory | None = None, new: bool = False,
                   thread: ScopeInfo | None = None) -> None:
        """Write the memory; with `previous`, only over that version (ConditionFailed if it was changed or
        deleted since it was read); `new`, only where no memory of its id is (ConditionFailed if one is);
        `thread`, only while the memory's run is that thread, its registry entry as read (ConditionFailed once the
        run's deletion, or the tenant's erasure, has begun — each removes the entry first — and after a new add
        made the thread again under its id: another `first_seen`)."""
        put = self.memory_put(store, memory, expect=_as_read(previous) if previous is not None else None)
        if thread is not None:
            self.table.transact([Put(put.item, expect=put.expect, if_absent=new),
                                 Check(*self._scope_key(store, thread.scope),
                                       expect={"first_seen": _dump(thread)["first_seen"]})])
        else:
            self.table.put(put.item, expect=put.expect, if_absent=new)

    def put_memory_beside(self, store: str, memory: Memory, previous: Memory, beside: Memory) -> None:
        """`put_memory` over `previous`, in one transaction with a check that `beside` (the memory it now
        names) is still there as read: ConditionFailed if either changed or went."""
        put = self.memory_put(store, memory, expect=_as_read(previous))
        s = beside.scope
        check = Check(tenant_pk(store, s.app_id, s.tenant_id), f"MEM#{beside.memory_id}", expect=_as_read(beside))
        self.table.transact([put, check])

    def delete_memories_as_read(self, store: str, memories: Sequence[Memory]) -> None:
        """Delete these memories only as they were read, 25 a transaction: ConditionFailed if one of a
        transaction's changed since (the transactions before it stand)."""
        for start in range(0, len(memories), 25):
            self.table.transact([Delete(tenant_pk(store, m.scope.app_id, m.scope.tenant_id), f"MEM#{m.memory_id}",
                                        expect=_as_read(m)) for m in memories[start:start + 25]])

    def get_memory(self, store: str, app_id: str, tenant_id: str, memory_id: str) -> Memory:
        item = self.table.get(tenant_pk(store, app_id, tenant_id), f"MEM#{memory_id}")
        if item is None:
            raise NotFound(f"memory '{memory_id}' not found", code="memory_not_found")
        return Memory.model_validate(item)

    def get_memories(self, store: str, app_id: str, tenant_id: str, memory_ids: Sequence[str]) -> list[Memory]:
        pk = tenant_pk(store, app_id, tenant_id)
        return [Memory.model_validate(i) for i in self.table.batch_get([(pk, f"MEM#{m}") for m in memory_ids])]

    def list_memories(self, store: str, scope: ScopeFilter, *, limit: int, cursor: str | None,
                      max_scan: int = limits.MAX_MEMORY_SCAN) -> tuple[list[Memory], str | None]:
        """Memories of a tenant narrowed to the filter's agents/runs, in the partition's order, `limit` a page unless
        `max_scan` are skipped (a trial: `run_id=` answered empty pages until the sixth)."""
        items, cursor = filtered_page(self.table, tenant_pk(store, scope.app_id, scope.tenant_id), prefix="MEM#",
                                      keep=lambda i: scope.matches(i["scope"]), limit=limit, cursor=cursor,
                                      max_scan=max_scan)
        return [Memory.model_validate(i) for i in items], cursor

    def iter_memories(self, store: str, app_id: str, tenant_id: str) -> Iterator[Memory]:
        cursor = None
        while True:
            page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="MEM#", limit=500, cursor=cursor)
            yield from (Memory.model_validate(i) for i in page.items)
            if not (cursor := page.cursor):
                return

    # -- tasks -------------------------------------------------------------------------------
    # A request id is namespaced by its tenant: the task lives at TASK#<request_id> in the tenant's
    # partition, and that item (written only if absent) is the tenant's own replay guard. The
    # pointer <request_id>#<app>#<tenant> in the store's global requests partition only finds the
    # tenant of a request id named alone (GET .../tasks/{request_id}, old jobs); another tenant's
    # pointer never stops a claim, so no tenant can squat another's ids.
    def request_pointer_key(self, store: str, app_id: str, tenant_id: str, request_id: str) -> tuple[str, str]:
        return requests_pk(store), f"{request_id}#{app_id}#{tenant_id}"

    def claim_request(self, store: str, request_id: str, scope: Scope) -> None:
        """Record the pointer of a tenant's request id (idempotent: a retried add writes it again)."""
        pk, sk = self.request_pointer_key(store, scope.app_id, scope.tenant_id, request_id)
        self.table.put({"pk": pk, "sk": sk, "request_id": request_id, "app_id": scope.app_id,
                        "tenant_id": scope.tenant_id})

    def task_put(self, task: Task) -> Put:
        """The task item, written only if absent (the tenant's own guard against a replay)."""
        s = task.scope
        return Put({"pk": tenant_pk(task.store, s.app_id, s.tenant_id), "sk": f"TASK#{task.request_id}",
                    **_dump(task)}, if_absent=True)

    def task_owners(self, store: str, request_id: str) -> list[tuple[str, str]]:
        """Every (app_id, tenant_id) that used this request id in the store, from the pointers."""
        owners = [(i["app_id"], i["tenant_id"]) for i in self.table.query(
            requests_pk(store), prefix=f"{request_id}#", limit=1000).items]
        legacy = self.table.get(requests_pk(store), request_id)  # a pointer written before ids were per tenant
        if legacy is not None and (legacy["app_id"], legacy["tenant_id"]) not in owners:
            owners.append((legacy["app_id"], legacy["tenant_id"]))
        return owners

    def find_task(self, store: str, app_id: str, tenant_id: str, request_id: str) -> Task | None:
        item = self.task_item(store, app_id, tenant_id, request_id)
        return Task.model_validate(item) if item else None

    def task_item(self, store: str, app_id: str, tenant_id: str, request_id: str) -> dict[str, Any] | None:
        """The task's item as stored (what a write conditioned on the version read compares)."""
        return self.table.get(tenant_pk(store, app_id, tenant_id), f"TASK#{request_id}")

    def get_task(self, store: str, app_id: str, tenant_id: str, request_id: str) -> Task:
        task = self.find_task(store, app_id, tenant_id, request_id)
        if task is None:
            raise NotFound(f"task '{request_id}' not found", code="task_not_found")
        return task

    def locate_task(self, store: str, request_id: str, app_id: str | None = None,
                    tenant_id: str | None = None) -> Task:
        """A task by its tenant and request id; without the tenant, the one tenant that used the id
        (InvalidInput `tenant_required` when several did)."""
        if app_id is not None and tenant_id is not None:
            return self.get_task(store, app_id, tenant_id, request_id)
        owners = self.task_owners(store, request_id)
        if len(owners) > 1:
            raise InvalidInput(f"request_id '{request_id}' is used by several tenants: name app_id and tenant_id",
                               code="tenant_required", field="tenant_id")
        if not owners:
            raise NotFound(f"task '{request_id}' not found", code="task_not_found")
        return self.get_task(store, *owners[0], request_id)

    def mark_messages_indexed(self, task: Task) -> None:
        """The add's messages are in the search index (an attribute of the task, set without a condition:
        a job that read the task before keeps its own copy, and re-indexing is harmless)."""
        s = task.scope
        self.table.update(tenant_pk(task.store, s.app_id, s.tenant_id), f"TASK#{task.request_id}",
                          {"messages_indexed": True})

    def save_task(self, task: Task) -> None:
        """Unconditionally: a job's writes go through change_task."""
        s = task.scope
        self.table.put({"pk": tenant_pk(task.store, s.app_id, s.tenant_id), "sk": f"TASK#{task.request_id}",
                        **_dump(task)})

    def note_task_writes(self, task: Task, memory_ids: Sequence[str], *,
                         answer: dict[str, Candidate | None] | None = None) -> None:
        """Add `memory_ids` to what the task's job set out to write, merged with what another delivery noted meanwhile,
        and record `answer` unless one is; nothing once the task is gone or has SUCCEEDED. Also over a task given up on
        (FAILED) or queued again by a retry (PENDING) while this delivery wrote: that retry decides on the same answer,
        and names what this one wrote (a regression trial)."""
        def noted(found: Task) -> Task | None:
            if found.status == TaskStatus.SUCCEEDED:
                return None
            ids = [*found.written_ids, *(m for m in memory_ids if m not in found.written_ids)]
            record = {"answer": answer} if answer is not None and found.answer is None else {}
            if len(ids) == len(found.written_ids) and not record:
                return None
            return found.model_copy(update={"written_ids": ids, **record})

        self.change_task(task, noted)

    def change_task(self, task: Task, change: Callable[[Task], Task | None]) -> tuple[Task | None, bool]:
        """Write `change(current)` over the task's item, conditioned on the version it was made from (its status and
        `updated_at`): a write that raced another (a redaction, another delivery, a retry) is made again from what
        that one wrote, never over it. `change` returns None for nothing to write. Returns the item as it is now (None
        once gone) and whether this change was written."""
        s = task.scope
        for _ in range(20):
            item = self.task_item(task.store, s.app_id, s.tenant_id, task.request_id)
            if item is None:
                return None, False
            found = Task.model_validate(item)
            new = change(found)
            if new is None:
                return found, False
            if new.updated_at <= found.updated_at:  # a new version, whatever the clock says
                new = new.model_copy(update={"updated_at": found.updated_at + timedelta(microseconds=1)})
            try:
                self.table.put({"pk": tenant_pk(task.store, s.app_id, s.tenant_id), "sk": f"TASK#{task.request_id}",
                                **_dump(new)}, expect={"status": item["status"], "updated_at": item["updated_at"]})
                return new, True
            except ConditionFailed:
                continue
        raise Conflict(f"task '{task.request_id}' is too busy to change; retry", code="busy")

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

    def scope_write(self, store: str, info: ScopeInfo, *, previous: ScopeInfo | None) -> Put:
        """Create the registry entry, or replace the one read as `previous` — only if nobody wrote it since
        (its version), so neither an add nor a policy change can overwrite the other. Bumps the version."""
        pk, sk = self._scope_key(store, info.scope)
        if previous is None:
            return Put({"pk": pk, "sk": sk, **_dump(info.model_copy(update={"version": 1}))}, if_absent=True)
        item = {"pk": pk, "sk": sk, **_dump(info.model_copy(update={"version": previous.version + 1}))}
        # Version 0: an entry written before versions, which has no such attribute.
        return Put(item, expect={"version": previous.version or None})

    def list_scopes(self, store: str, app_id: str, tenant_id: str, *, limit: int,
                    cursor: str | None) -> tuple[list[ScopeInfo], str | None]:
        page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="SCOPE#", limit=limit, cursor=cursor)
        return [ScopeInfo.model_validate(i) for i in page.items], page.cursor

    def transact(self, writes: Sequence[Write]) -> None:
        self.table.transact(writes)


def _as_read(memory: Memory) -> dict[str, Any]:
    """The condition that a memory's item is still the version read: a write over it, or beside it, waits on no
    other (an edit moves `updated_at`, a supersede or delete the status)."""
    read = _dump(memory)
    return {"updated_at": read["updated_at"], "status": read["status"]}
