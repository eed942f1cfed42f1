"""Pick the scopes a scheduled dream run works on: only due ones, fairly, within a bound.

Each store's activity registry is walked round-robin: a run reads at most `scan_limit` entries
from where the previous run stopped (wrapping around), so its reads are bounded however many
scopes a store has, and every scope is looked at in turn. Among the due entries read, across
all stores, the oldest pending activity goes first, grouped by agent (a dream covers all runs
of one agent of one tenant), at most `max_scopes` groups. A store's cursor stops before its
first due entry that was not picked, so that entry is read first next time; as new activity is
always newer than what already waits, nothing waits forever.

A picked scope is marked queued (with a lease) in the same transaction that creates its dream
task, so overlapping runs cannot queue it twice; the dream claims it when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..domain.models import ActivityInfo, DreamScope, Store
from .deps import Deps

MAX_MARKED = 90  # registry entries marked in the task's transaction (DynamoDB allows 100 writes)


@dataclass
class Pick:
    store: Store
    scope: DreamScope
    entries: list[tuple[str, ActivityInfo]] = field(default_factory=list)


def due(info: ActivityInfo, now: datetime, lease_seconds: int) -> bool:
    if info.pending_since is None:
        return False
    queued = info.queued_at is not None and info.queued_at > now - timedelta(seconds=lease_seconds)
    return not queued


def stores(deps: Deps) -> list[Store]:
    out: list[Store] = []
    cursor = None
    while True:
        page, cursor = deps.repo.list_stores(200, cursor)
        out += page
        if not cursor:
            return out


def window(deps: Deps, store: str, cursor: str | None, limit: int) -> list[tuple[str, ActivityInfo]]:
    """Up to `limit` registry entries after `cursor`, wrapping around to the start once."""
    seen = deps.repo.scan_activity(store, after=cursor, limit=limit)
    if cursor is not None and len(seen) < limit:
        keys = {sk for sk, _ in seen}
        head = deps.repo.scan_activity(store, after=None, limit=limit - len(seen))
        seen += [(sk, info) for sk, info in head if sk <= cursor and sk not in keys]
    return seen


def pick(deps: Deps, *, now: datetime, max_scopes: int, scan_limit: int,
         lease_seconds: int) -> tuple[list[Pick], dict[str, str | None]]:
    """The scopes to dream now, oldest pending first, and each store's next cursor."""
    windows: dict[str, list[tuple[str, ActivityInfo]]] = {}
    cursors: dict[str, str | None] = {}
    candidates: list[tuple[datetime, str, int, str, ActivityInfo]] = []
    by_name = {s.name: s for s in stores(deps)}
    for name in by_name:
        cursors[name] = deps.repo.get_dream_cursor(name)
        windows[name] = window(deps, name, cursors[name], scan_limit)
        for pos, (sk, info) in enumerate(windows[name]):
            if due(info, now, lease_seconds):
                assert info.pending_since is not None
                candidates.append((info.pending_since, name, pos, sk, info))
    candidates.sort(key=lambda c: (c[0], c[1], c[3]))
    picks: dict[tuple[str, str, str, str], Pick] = {}
    taken: dict[str, set[int]] = {name: set() for name in by_name}
    for _, name, pos, sk, info in candidates:
        s = info.scope
        key = (name, s.app_id, s.tenant_id, s.agent_id)
        if key not in picks:
            if len(picks) >= max_scopes:
                continue
            picks[key] = Pick(by_name[name], DreamScope(app_id=s.app_id, tenant_id=s.tenant_id, agent_id=s.agent_id))
        picks[key].entries.append((sk, info))
        taken[name].add(pos)
    next_cursors: dict[str, str | None] = {}
    for name, seen in windows.items():
        waiting = [pos for pos, (_, info) in enumerate(seen)
                   if pos not in taken[name] and due(info, now, lease_seconds)]
        if waiting:
            first = waiting[0]
            next_cursors[name] = seen[first - 1][0] if first > 0 else cursors[name]
        else:
            next_cursors[name] = seen[-1][0] if seen else cursors[name]
    return list(picks.values()), next_cursors
