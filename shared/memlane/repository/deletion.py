"""Store deletion and tenant erasure."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterator, Sequence

from ..domain.errors import ConditionFailed, NotFound
from ..domain.limits import MAX_AUDIT_RETENTION_DAYS
from ..domain.models import Erasure, TaskStatus
from ..ports import Delete, Put, Table, Update
from .keys import (DEAD_LETTER_SCAN_PK, ERASURES_PK, PURGING_PK, RETIRED_LOGS_PK, TTL_ATTRIBUTE, activity_pk,
                   dream_pk, open_pk, requests_pk, tenant_pk)
from .keys import _dump
from .leases import LeaseRecords


class DeletionRecords(LeaseRecords):
    table: Table

    # -- store deletion ----------------------------------------------------------------------
    def purging_put(self, store: str, since: datetime) -> Put:
        """The deleted store's record while its purge runs (the queue commits its job with it)."""
        return Put({"pk": PURGING_PK, "sk": store, "since": since.isoformat()})

    def purging(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every deleted store whose purge has not finished, with its record."""
        cursor = None
        while True:
            page = self.table.query(PURGING_PK, limit=500, cursor=cursor)
            yield from ((i["sk"], i) for i in page.items)
            if not (cursor := page.cursor):
                return

    def retired_log_put(self, store: str, at: datetime) -> Put:
        """A deleted store's audit log, kept for its retention: the name the local table's expiry finds it by once
        the store is out of the catalog (DynamoDB's TTL needs none; this item goes after the longest retention)."""
        return Put({"pk": RETIRED_LOGS_PK, "sk": store, "since": at.isoformat(),
                    TTL_ATTRIBUTE: int((at + timedelta(days=MAX_AUDIT_RETENTION_DAYS + 1)).timestamp())})

    def retired_logs(self) -> Iterator[str]:
        cursor = None
        while True:
            page = self.table.query(RETIRED_LOGS_PK, limit=500, cursor=cursor)
            yield from (i["sk"] for i in page.items)
            if not (cursor := page.cursor):
                return

    def log_expired(self, store: str) -> None:
        """The deleted store's log holds no row any more: nothing of it is left to expire."""
        if not self.table.query(f"{store}#~audit", limit=1).items:
            self.table.delete(RETIRED_LOGS_PK, store)

    def purge_requeued(self, store: str, at: datetime) -> None:
        item = self.table.get(PURGING_PK, store)
        if item is not None and item.get("status") != "FAILED":
            self.table.put({**item, "since": at.isoformat()})

    def purged(self, store: str) -> None:
        self.table.delete(PURGING_PK, store)

    def purge_failed(self, store: str, reason: str, at: datetime) -> None:
        """The purge's job was given up on: the store's record says so, and why (the name stays taken
        until a redriven job finishes the purge)."""
        self.table.put({"pk": PURGING_PK, "sk": store, "status": "FAILED", "error": reason[:1000],
                        "updated_at": at.isoformat()})

    def purge_state(self, store: str) -> dict[str, Any] | None:
        """A deleted store's purge: {"status": RUNNING | FAILED, "error": ...}; None once purged (or never deleted)."""
        item = self.table.get(PURGING_PK, store)
        if item is None:
            return None
        return {"status": item.get("status", "RUNNING"), "error": item.get("error")}

    def store_global_keys(self, store: str) -> Iterator[tuple[str, str]]:
        """Keys of the store's global partitions except its audit log (kept for its retention)."""
        for pk in (requests_pk(store), activity_pk(store), dream_pk(store), open_pk(store)):
            cursor = None
            while True:
                page = self.table.query(pk, limit=500, cursor=cursor)
                yield from ((i["pk"], i["sk"]) for i in page.items)
                if not (cursor := page.cursor):
                    break

    # -- erasure -------------------------------------------------------------------------------
    def put_erasure(self, erasure: Erasure) -> None:
        self.table.transact([self.erasure_put(erasure)])

    def erasure_put(self, erasure: Erasure) -> Put:
        """The erasure item (a write the queue can commit with the erasure's job)."""
        return Put({"pk": ERASURES_PK, "sk": erasure.erasure_id, **_dump(erasure)})

    def erasures(self) -> Iterator[Erasure]:
        """Every erasure, oldest first (the records are kept: erasures are few)."""
        cursor = None
        while True:
            page = self.table.query(ERASURES_PK, limit=500, cursor=cursor)
            yield from (Erasure.model_validate(i) for i in page.items)
            if not (cursor := page.cursor):
                return

    def erasure_resent(self, erasure: Erasure, at: datetime) -> bool:
        """Mark `erasure` (as read) sent again at `at`; False if it changed since it was read (its job runs)."""
        was = _dump(erasure)
        try:
            self.table.transact([Update(ERASURES_PK, erasure.erasure_id, {"updated_at": _dump(
                erasure.model_copy(update={"updated_at": at}))["updated_at"]},
                expect={"updated_at": was["updated_at"], "status": was["status"]})])
        except ConditionFailed:
            return False
        return True

    def take_dead_letter_lease(self, holder: str, now: datetime, hold: timedelta) -> bool:
        """Take (or renew) the one lease on reading the ingestion dead letters, unless another holder's is still
        running; whether `holder` has it now."""
        return self.take_lease(DEAD_LETTER_SCAN_PK, "lease", holder, now, hold)

    def release_dead_letter_lease(self, holder: str) -> None:
        self.release_lease(DEAD_LETTER_SCAN_PK, "lease", holder)

    def erased_since(self, app_id: str, tenant_id: str, since: datetime) -> bool:
        """Whether an erasure of the tenant was under way at `since` or began after it (waiting, running, or succeeded
        since then): a job that read the tenant from `since` on may have written after that erasure listed its
        items, and takes back what it wrote. Not one that FAILED: the tenant's data stands, and its next erasure lists
        it all again (a regression trial: a failed erasure made a dream undo itself). Erasures are few."""
        return any((e.app_id, e.tenant_id) == (app_id, tenant_id) and e.status != TaskStatus.FAILED
                   and (not e.status.finished or e.updated_at >= since) for e in self.erasures())

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

    # -- redaction: rewriting what keeps a copy of deleted content ----------------------------
    def delete_memory(self, store: str, app_id: str, tenant_id: str, memory_id: str, *,
                      job: str | None = None, until: int | None = None,
                      evidence: Sequence[str] = ()) -> None:
        """A hard delete: nothing keeps the text (the audit log keeps who deleted and when). `job`: the request id of
        the job that wrote it — a delivery of it still to come would find the memory missing and write it again, so a
        marker (the id and the ids of the messages it rested on, `evidence`, expiring at `until`, epoch seconds) says
        it was deleted."""
        pk = tenant_pk(store, app_id, tenant_id)
        if job is None:
            self.table.delete(pk, f"MEM#{memory_id}")
            return
        try:  # only beside the memory: one gone meanwhile (its tenant erased) leaves no marker in the partition
            self.table.transact([Delete(pk, f"MEM#{memory_id}", expect={"memory_id": memory_id}),
                                 Put({"pk": pk, "sk": self.gone_key(store, app_id, tenant_id, memory_id)[1],
                                      "request_id": job,
                                      "evidence": list(evidence), TTL_ATTRIBUTE: until})])
        except ConditionFailed:
            pass

    def gone_key(self, store: str, app_id: str, tenant_id: str, memory_id: str) -> tuple[str, str]:
        """The key of the marker `delete_memory` leaves."""
        return tenant_pk(store, app_id, tenant_id), f"GONE#{memory_id}"

    def deleted_since_written(self, store: str, app_id: str, tenant_id: str,
                              memory_ids: Sequence[str]) -> dict[str, set[str]]:
        """Of these memory ids, those deleted since the job that wrote them wrote them (`delete_memory`), each
        with the ids of the messages it rested on (none for a marker written before they were kept)."""
        pk = tenant_pk(store, app_id, tenant_id)
        return {i["sk"][len("GONE#"):]: set(i.get("evidence") or ())
                for i in self.table.batch_get([(pk, f"GONE#{m}") for m in memory_ids])}

    def rewrite(self, item: dict[str, Any], model: Any, *, expect: dict[str, Any]) -> None:
        """Replace an item (by its keys) with `model`, if it still holds what `expect` says."""
        self.table.put({"pk": item["pk"], "sk": item["sk"], **_dump(model)}, expect=expect)
