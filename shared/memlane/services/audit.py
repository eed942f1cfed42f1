"""The audit log: every request, who made it, on what scope, how it ended. Kept for a retention period."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..domain.errors import InvalidInput
from ..domain.models import AuditRecord
from .deps import Deps

GLOBAL_STORE = "~global"  # requests that name no store (list or create stores)


def record(deps: Deps, entry: AuditRecord, retention_days: int) -> None:
    expires = entry.at + timedelta(days=retention_days)
    deps.repo.put_audit(entry, int(expires.timestamp()))


def _key_time(when: datetime | None) -> str | None:
    """`when` as the rows' sort keys write it (UTC, ISO): an instant given with another offset compares the same."""
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).isoformat()


def list_(deps: Deps, store: str, *, limit: int, cursor: str | None, since: datetime | None = None,
          until: datetime | None = None, principal: str | None = None, status: int | None = None,
          operation: str | None = None, tenant_id: str | None = None) -> tuple[list[AuditRecord], str | None]:
    """Newest first. Time bounds narrow the key range; the other filters apply within the page."""
    start, end = _key_time(since), _key_time(until)  # one given with an offset, one without: both UTC now
    if start and end and start > end:
        raise InvalidInput("since must not be after until", field="since")
    if store != GLOBAL_STORE:
        # A store created again under a name starts with an empty log: the rows of the one deleted before stay
        # theirs (until they expire), and its deletion is in the global log.
        created = _key_time(deps.repo.get_store(store).created_at)
        start = max(start or created, created)
        if end is not None and start > end:
            return [], None  # a window that closed before the store was created
    now = int(deps.clock.now().timestamp())
    found, next_cursor = deps.repo.list_audit(store, limit=limit, cursor=cursor, now=now, since=start, until=end)
    kept = [r for r in found
            if (principal is None or r.principal == principal) and (status is None or r.status == status)
            and (operation is None or operation in r.operation) and (tenant_id is None or r.tenant_id == tenant_id)]
    return kept, next_cursor


def expire(deps: Deps) -> int:
    """Delete the audit rows past their retention in every store's log, a deleted store's and the global one, for a
    table that does not expire items itself (the local one; DynamoDB's TTL does it on AWS); how many."""
    now, expired, cursor = int(deps.clock.now().timestamp()), 0, None
    while True:
        stores, cursor = deps.repo.list_stores(100, cursor)
        for name in [s.name for s in stores] + ([GLOBAL_STORE] if cursor is None else []):
            expired += deps.repo.expire_audit(name, now=now)
        if cursor is None:
            break
    for name in list(deps.repo.retired_logs()):
        expired += deps.repo.expire_audit(name, now=now)
        deps.repo.log_expired(name)
    return expired
