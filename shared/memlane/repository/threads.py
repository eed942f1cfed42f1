"""Threads: a run's registry entry (core.py) with its place in the tenant's activity order and its id.

    <store>#<app>#<tenant>   RECENT#<time>#<agent>#<run>   one per run, keyed by its last activity: newest first
    <store>#<app>#<tenant>   THREAD#<run>                  thread id → its agent (thread ids are per tenant)

Both are written in the transaction that writes the registry entry, so the order never drifts from it.
"""

from __future__ import annotations

from typing import Sequence

from ..domain.ids import time_prefix
from ..domain.models import ScopeInfo
from ..domain.scope import Scope
from ..ports import Check, Delete, Put, Table, Write
from .keys import tenant_pk
from .pages import filtered_page

RECENT = "RECENT#"


def _recent_sk(info: ScopeInfo) -> str:
    return f"{RECENT}{time_prefix(info.last_activity)}#{info.scope.agent_id}#{info.scope.run_id}"


class ThreadRecords:
    table: Table

    def scope_writes(self, store: str, info: ScopeInfo, *, previous: ScopeInfo | None) -> list[Write]:
        """The registry entry (conditioned on `previous`, core.scope_write) and its activity-order item:
        moved when the last activity moved. At most three writes (an add of 96 messages stays within 100)."""
        pk = tenant_pk(store, info.scope.app_id, info.scope.tenant_id)
        writes: list[Write] = [self.scope_write(store, info, previous=previous)]  # type: ignore[attr-defined]
        new, old = _recent_sk(info), _recent_sk(previous) if previous is not None else None
        if new != old:
            if old is not None:
                writes.append(Delete(pk, old))  # absent on entries written before the order: harmless
            writes.append(Put({"pk": pk, "sk": new, "agent_id": info.scope.agent_id, "run_id": info.scope.run_id}))
        return writes

    def thread_key(self, store: str, app_id: str, tenant_id: str, thread_id: str) -> tuple[str, str]:
        return tenant_pk(store, app_id, tenant_id), f"THREAD#{thread_id}"

    def thread_agent(self, store: str, app_id: str, tenant_id: str, thread_id: str) -> str | None:
        """The agent a thread id belongs to in the tenant; None when no thread claimed it."""
        item = self.table.get(*self.thread_key(store, app_id, tenant_id, thread_id))
        return str(item["agent_id"]) if item else None

    def thread_claim(self, store: str, scope: Scope) -> Put:
        """The thread id's claim for its agent, only if nobody claimed it (a lost race reads again)."""
        pk, sk = self.thread_key(store, scope.app_id, scope.tenant_id, scope.run_id)
        return Put({"pk": pk, "sk": sk, "agent_id": scope.agent_id}, if_absent=True)

    def new_run_claim(self, store: str, scope: Scope) -> list[Write]:
        """For a run about to be created: its thread id's claim, if the id is still free in the tenant (a run
        id another agent already uses stays that agent's thread id; this run is found by naming its agent)."""
        holder = self.thread_agent(store, scope.app_id, scope.tenant_id, scope.run_id)
        return self.claim_as_read(store, scope, holder)

    def claim_as_read(self, store: str, scope: Scope, holder: str | None) -> list[Write]:
        """The thread id's claim as the caller read it (`holder`): written if it was free (only if it still is),
        else required to be there still, held by the same agent — by another agent's run, or left by a run a
        deletion is removing: a claim deleted meanwhile fails the commit, and the next attempt claims the id."""
        if holder is None:
            return [self.thread_claim(store, scope)]
        return [Check(*self.thread_key(store, scope.app_id, scope.tenant_id, scope.run_id),
                      expect={"agent_id": holder})]

    def run_removal(self, store: str, info: ScopeInfo) -> list[Write]:
        """A deleted run's registry entry — only as read (its version), so an add that moved the thread's
        activity meanwhile makes the caller read again rather than leave the moved order item behind —
        with its activity-order item and, if the run holds it, its thread id's claim."""
        s = info.scope
        pk = tenant_pk(store, s.app_id, s.tenant_id)
        _, scope_sk = self._scope_key(store, s)  # type: ignore[attr-defined]
        writes: list[Write] = [Delete(pk, scope_sk, expect={"version": info.version or None}), Delete(pk, _recent_sk(info))]
        if self.thread_agent(store, s.app_id, s.tenant_id, s.run_id) == s.agent_id:
            writes.append(Delete(*self.thread_key(store, s.app_id, s.tenant_id, s.run_id)))
        return writes

    def recent_threads(self, store: str, app_id: str, tenant_id: str, *, agent_id: str | None, limit: int,
                       cursor: str | None, max_scan: int) -> tuple[list[ScopeInfo], str | None]:
        """A tenant's runs, newest activity first; with `agent_id`, that agent's only (a page may then hold fewer
        than `limit` while `next_cursor` is set: `filtered_page`)."""
        pk = tenant_pk(store, app_id, tenant_id)
        items, cursor = filtered_page(self.table, pk, prefix=RECENT, forward=False, limit=limit, cursor=cursor,
                                      max_scan=max_scan, keep=lambda i: agent_id is None or i["agent_id"] == agent_id)
        return self._entries([(pk, f"SCOPE#{i['agent_id']}#{i['run_id']}") for i in items]), cursor

    def _entries(self, keys: Sequence[tuple[str, str]]) -> list[ScopeInfo]:
        return [ScopeInfo.model_validate(i) for i in self.table.batch_get(list(keys))]
