"""The schema policy: what to do when the table and the index are not what this version expects.

- ``validate`` (AWS default): compare, and refuse to run on any difference (SchemaMismatch names each).
- ``create`` (local default): make what is missing (a table, its TTL), refuse what differs.
- ``recreate``: as create, then rebuild every store's index from the table — a new version behind the
  alias, filled, then the alias swapped in one call (no search gap). The table is never dropped: a table
  difference is refused whatever the policy. At start-up, recreate rebuilds only when an index differs;
  `memlane schema recreate` always does.

The comparison itself is pure (domain/schema.py); adapters describe what exists (ports.SchemaOwner).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Literal

from ..domain.schema import Difference, SchemaMismatch, differences
from ..ports import IndexRebuild, SchemaOwner
from ..split_table import SplitTable
from .deps import Deps
from .reindex import Indexed, fill, reindex

Policy = Literal["validate", "create", "recreate"]
Progress = Callable[[str], None]

HINT = "memlane schema create makes what is missing; memlane schema recreate rebuilds the index from the table"


@dataclass
class SchemaReport:
    policy: Policy
    created: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)  # stores whose index was rebuilt
    differences: list[str] = field(default_factory=list)  # what was found before anything was done


def check(deps: Deps, policy: Policy, *, rebuild: bool = False, progress: Progress | None = None) -> SchemaReport:
    """Apply `policy`; SchemaMismatch if differences are left. `rebuild` (recreate only): rebuild the
    index even when it does not differ (the operator's `memlane schema recreate`)."""
    report = SchemaReport(policy)
    table, index = _owner(_own_table(deps)), _owner(deps.index)
    table_diffs, index_diffs = _diff(table), _diff(index)
    report.differences = [str(d) for d in table_diffs + index_diffs]
    if policy == "validate":
        _refuse(table_diffs + index_diffs)
        return report
    for owner in (table, index):
        if owner is not None:
            report.created += owner.create_missing()
    table_diffs, index_diffs = _diff(table), _diff(index)
    _refuse(table_diffs)  # never dropped nor changed, whatever the policy
    if policy == "recreate" and (index_diffs or rebuild):
        report.rebuilt = recreate_index(deps, progress=progress)
        index_diffs = _diff(index)
    _refuse(index_diffs)
    return report


def recreate_index(deps: Deps, *, progress: Progress | None = None) -> list[str]:
    """Rebuild every store's index from the table; the stores rebuilt."""
    names: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = deps.repo.list_stores(100, cursor)
        names += [s.name for s in page]
        if cursor is None:
            break
    for name in names:
        recreate_store(deps, name, progress=progress)
    return names


def recreate_store(deps: Deps, store: str, *, progress: Progress | None = None) -> None:
    """One store's index rebuilt from the table. Behind an alias (OpenSearch): filled beside the live one
    and swapped in, then filled again from the table to catch what was written to the old index meanwhile
    (upserts by id: harmless twice); what the first fill indexed and the second no longer finds was deleted
    meanwhile, from the old index only, and is deleted from the new one. The embedded index has no alias: it is rebuilt in place (reindex) —
    locally the operator's command owns the data directory, so no search runs meanwhile."""
    say = progress or (lambda _line: None)
    deps.repo.get_store(store)  # unknown → NotFound before anything is built
    if not isinstance(deps.index, IndexRebuild):
        reindex(deps, store, progress=say)
        return
    first: Indexed = {}
    with deps.index.rebuilding(store, deps.embedder.dim) as target:
        filled = fill(replace(deps, index=target), store, progress=say, ids=first)
        say(f"{store}: new index filled ({filled['indexed']} memories, {filled['messages']} messages); swapping")
    now: Indexed = {}
    fill(deps, store, progress=say, ids=now)  # what reached the old index while the new one was filled
    # What was deleted meanwhile reached the old index only: the new one must not keep it.
    swept = 0
    for (app_id, tenant_id), written in first.items():
        gone = sorted(written - now.get((app_id, tenant_id), set()))
        if gone:
            deps.for_tenant(store, app_id, tenant_id).index.delete(store, gone, app_id=app_id, tenant_id=tenant_id)
            swept += len(gone)
    say(f"{store}: index rebuilt ({swept} documents deleted during the rebuild swept)")


def _own_table(deps: Deps) -> object:
    return deps.table.global_table if isinstance(deps.table, SplitTable) else deps.table


def _owner(adapter: object) -> SchemaOwner | None:
    return adapter if isinstance(adapter, SchemaOwner) else None


def _diff(owner: SchemaOwner | None) -> list[Difference]:
    return differences(owner.describe()) if owner is not None else []


def _refuse(found: list[Difference]) -> None:
    if found:
        raise SchemaMismatch(found, hint=HINT)
