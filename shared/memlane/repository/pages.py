"""A page of a partition narrowed by a filter the table cannot apply (agents, runs)."""

from __future__ import annotations

from typing import Callable

from ..ports import Item, Table


def filtered_page(table: Table, pk: str, *, prefix: str, keep: Callable[[Item], bool], limit: int,
                  cursor: str | None, max_scan: int, forward: bool = True) -> tuple[list[Item], str | None]:
    """The items under `prefix` that `keep` lets through, in key order, until `limit` are found. Pages are read whole
    (each item kept or skipped), so the table's cursor resumes exactly; at most `max_scan` items a call, so a filter
    that skips that many answers a short page with its cursor set."""
    kept: list[Item] = []
    scanned = 0
    while len(kept) < limit and scanned < max_scan:
        page = table.query(pk, prefix=prefix, forward=forward, limit=min(limit - len(kept), max_scan - scanned),
                           cursor=cursor)
        scanned += len(page.items)
        kept += [i for i in page.items if keep(i)]
        cursor = page.cursor
        if cursor is None:
            break
    return kept, cursor
