"""Leases: one holder at a time of a piece of work, taken with a conditional write and held until released or
until it expires (a holder that died lets go by expiring)."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..domain.errors import ConditionFailed
from ..ports import Delete, Put, Table
from .keys import tenant_pk

CONSOLIDATION_SK = "LEASE#consolidate"


class LeaseRecords:
    table: Table

    def take_lease(self, pk: str, sk: str, holder: str, now: datetime, hold: timedelta) -> bool:
        """Take (or renew) the lease unless another holder's is still running; whether `holder` has it now."""
        item = self.table.get(pk, sk)
        if item is not None and item["holder"] != holder and datetime.fromisoformat(item["until"]) > now:
            return False
        lease = {"pk": pk, "sk": sk, "holder": holder, "until": (now + hold).isoformat()}
        try:
            self.table.transact([Put(lease, if_absent=True) if item is None else
                                 Put(lease, expect={"holder": item["holder"], "until": item["until"]})])
        except ConditionFailed:
            return False  # another took it meanwhile
        return True

    def release_lease(self, pk: str, sk: str, holder: str) -> None:
        try:
            self.table.transact([Delete(pk, sk, expect={"holder": holder})])
        except ConditionFailed:
            pass  # expired and taken by another meanwhile (or erased with its tenant): not ours to release

    def consolidation_lease(self, store: str, app_id: str, tenant_id: str) -> tuple[str, str]:
        """The key of a tenant's write-time consolidation lease: in its own partition, which its jobs may write."""
        return tenant_pk(store, app_id, tenant_id), CONSOLIDATION_SK
