"""The open-task registry: which extraction tasks are not finished yet, in a global partition.

The sweeper (services/sweep.py) reads it to find tasks whose job was lost (a crash between the
task's commit and its SQS send, a Lambda killed on its last receive) without scanning tenant
partitions, which function credentials cannot read. An add registers its task before writing
it; extraction clears the entry when the task finishes. An entry names only ids, never content.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterator

from ..domain.errors import ConditionFailed
from ..domain.scope import Scope
from ..ports import Delete, Table
from .keys import SWEEP_PK, open_pk


@dataclass(frozen=True)
class OpenTask:
    store: str
    request_id: str
    app_id: str
    tenant_id: str
    since: datetime  # registered, or last re-enqueued by the sweeper
    swept: bool = False  # re-enqueued by the sweeper at least once

    @property
    def key(self) -> str:
        return _sk(self.request_id, self.app_id, self.tenant_id)


class OpenTaskRecords:
    table: Table

    # Request ids are per tenant: the entry is keyed by the request id and its tenant.
    def open_task(self, store: str, request_id: str, scope: Scope, now: datetime) -> bool:
        """Register (or register again) the task of a request id; whether this made the entry — False when one
        was there (another add of the id under way, or one that died): its `since` moves to `now` either way."""
        item = {"pk": open_pk(store), "sk": _sk(request_id, scope.app_id, scope.tenant_id), "request_id": request_id,
                "app_id": scope.app_id, "tenant_id": scope.tenant_id, "since": now.isoformat()}
        try:
            self.table.put(item, if_absent=True)
            return True
        except ConditionFailed:
            self.table.put(item)
            return False

    def close_task(self, store: str, request_id: str, app_id: str, tenant_id: str) -> None:
        self.table.delete(*self.open_task_key(store, request_id, app_id, tenant_id))

    def release_request(self, store: str, request_id: str, app_id: str, tenant_id: str, since: datetime) -> bool:
        """Take back what an add that wrote no task left in the global partitions: its open-task entry, if it is
        still the one registered at `since` (an add of the same id registered later shares it now), and with it,
        in one transaction, the request-id pointer. False when the entry is another's (or gone). Only for an
        entry its caller made (`open_task` said so) or one past the sweeper's deadline: an entry found there
        may be an add's still under way, which would lose its pointer."""
        try:
            self.table.transact([
                Delete(*self.open_task_key(store, request_id, app_id, tenant_id), expect={"since": since.isoformat()}),
                Delete(*self.request_pointer_key(store, app_id, tenant_id, request_id))])  # type: ignore[attr-defined]
        except ConditionFailed:
            return False
        return True

    def open_task_key(self, store: str, request_id: str, app_id: str, tenant_id: str) -> tuple[str, str]:
        return open_pk(store), _sk(request_id, app_id, tenant_id)

    def sweep_mark(self) -> tuple[str, str] | None:
        """Where the last sweep that stopped short stopped: (store, entry key), the first not checked."""
        item = self.table.get(SWEEP_PK, "mark")
        return (item["store"], item["key"]) if item else None

    def set_sweep_mark(self, mark: tuple[str, str] | None, *, read: tuple[str, str] | None) -> bool:
        """Move the mark from `read` (the one the pass began at) to `mark`; False, leaving it, when another pass moved
        it meanwhile: a slow pass does not move it back over what later ones checked (a trial)."""
        was = None if read is None else {"store": read[0], "key": read[1]}
        try:
            if mark is None:
                if was is not None:
                    self.table.delete(SWEEP_PK, "mark", expect=was)
            else:
                self.table.put({"pk": SWEEP_PK, "sk": "mark", "store": mark[0], "key": mark[1]},
                               if_absent=was is None, expect=was)
        except ConditionFailed:
            return False
        return True

    def swept(self, store: str, entry: "OpenTask", now: datetime) -> None:
        key = entry.key
        item = self.table.get(open_pk(store), key)
        if item is not None:
            self.table.put({**item, "since": now.isoformat(), "swept": True})

    def open_tasks(self, store: str, *, start: str | None = None, end: str | None = None) -> Iterator[OpenTask]:
        """The store's entries in key order (`OpenTask.key`), those in [start, end] when given."""
        cursor = None
        while True:
            page = self.table.query(open_pk(store), start=start, end=end, limit=500, cursor=cursor)
            for i in page.items:
                yield OpenTask(store=store, request_id=i["request_id"], app_id=i["app_id"], tenant_id=i["tenant_id"],
                               since=datetime.fromisoformat(i["since"]), swept=bool(i.get("swept")))
            if not (cursor := page.cursor):
                return


def _sk(request_id: str, app_id: str, tenant_id: str) -> str:
    return f"{request_id}#{app_id}#{tenant_id}"
