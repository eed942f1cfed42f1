"""A table split by partition kind: global partitions (every key with '~': the store catalog,
request-id pointers, registries, audit) go to the service's own table; tenant partitions go to a
table bound to the one tenant the request was authorized for.

On AWS the tenant side signs with STS credentials scoped to `store#app#tenant`, so a key built
for any other tenant is refused by IAM, whatever bug built it. A transaction may not mix the two
kinds — no single set of credentials may write both — so this refuses it everywhere, locally too,
and a mixed write can never pass the tests and then fail in production.
"""

from __future__ import annotations

from typing import Any, Sequence

from .domain.errors import InvalidInput
from .ports import Item, Page, Table, Write


def is_global(pk: str) -> bool:
    return "~" in pk  # scope ids and store names can never contain '~'


class SplitTable:
    def __init__(self, global_table: Table, tenant_table: Table):
        self.global_table, self.tenant_table = global_table, tenant_table

    def _side(self, pk: str) -> Table:
        return self.global_table if is_global(pk) else self.tenant_table

    def get(self, pk: str, sk: str) -> Item | None:
        return self._side(pk).get(pk, sk)

    def batch_get(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        sides = {is_global(pk) for pk, _ in keys}
        if len(sides) > 1:
            found = {(i["pk"], i["sk"]): i for side in (True, False)
                     for i in (self.global_table if side else self.tenant_table).batch_get(
                         [k for k in keys if is_global(k[0]) == side])}
            return [found[k] for k in keys if k in found]
        return self._side(keys[0][0]).batch_get(keys) if keys else []

    def put(self, item: Item, *, if_absent: bool = False, expect: dict[str, Any] | None = None) -> None:
        self._side(item["pk"]).put(item, if_absent=if_absent, expect=expect)

    def update(self, pk: str, sk: str, changes: dict[str, Any], *, expect: dict[str, Any] | None = None) -> Item:
        return self._side(pk).update(pk, sk, changes, expect=expect)

    def delete(self, pk: str, sk: str, *, expect: dict[str, Any] | None = None) -> None:
        self._side(pk).delete(pk, sk, expect=expect)

    def query(self, pk: str, **options: Any) -> Page:
        return self._side(pk).query(pk, **options)

    def transact(self, writes: Sequence[Write]) -> None:
        pks = {w.item["pk"] if hasattr(w, "item") else w.pk for w in writes}  # type: ignore[union-attr]
        kinds = {is_global(pk) for pk in pks}
        if len(kinds) > 1:
            raise InvalidInput("a transaction may not mix tenant and global partitions: " + ", ".join(sorted(pks)),
                               code="mixed_transaction")
        if writes:
            self._side(next(iter(pks))).transact(writes)


class SameTable:
    """TenantTables for local mode: every tenant sees the one local table (grants still apply)."""

    def __init__(self, table: Table):
        self.table = table

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> Table:
        return self.table
