"""Thread summaries: one versioned item per thread (run) under the tenant's partition, and the thread's
messages read in the order a summary consumes them."""

from __future__ import annotations

from typing import Iterator

from ..domain.errors import ConditionFailed
from ..domain.models import Message, ThreadSummary
from ..domain.scope import Scope
from ..ports import Check, Put, Table
from .keys import _dump, message_sk, tenant_pk

_AFTER_EVERY_ID = "~"  # sorts after every message id (lower-case base32)
_JUST_AFTER = "!"  # appended to an id: sorts after it and before every later id (ids have one length)


def summary_sk(scope: Scope) -> str:
    return f"SUM#{scope.agent_id}#{scope.run_id}"


class SummaryRecords:
    table: Table

    def summary_key(self, store: str, scope: Scope) -> tuple[str, str]:
        return tenant_pk(store, scope.app_id, scope.tenant_id), summary_sk(scope)

    def get_summary(self, store: str, scope: Scope) -> ThreadSummary | None:
        item = self.table.get(*self.summary_key(store, scope))
        return ThreadSummary.model_validate(item) if item else None

    def get_summaries(self, store: str, scopes: list[Scope]) -> dict[Scope, ThreadSummary]:
        """The summaries of these threads (one batch read), by thread; threads without one are absent."""
        items = self.table.batch_get([self.summary_key(store, scope) for scope in scopes]) if scopes else []
        found = (ThreadSummary.model_validate(i) for i in items)
        return {summary.scope: summary for summary in found}

    def iter_summaries(self, store: str, app_id: str, tenant_id: str) -> Iterator[ThreadSummary]:
        cursor = None
        while True:
            page = self.table.query(tenant_pk(store, app_id, tenant_id), prefix="SUM#", limit=500, cursor=cursor)
            yield from (ThreadSummary.model_validate(i) for i in page.items)
            if not (cursor := page.cursor):
                return

    def put_summary(self, store: str, summary: ThreadSummary, *, previous: ThreadSummary | None) -> ThreadSummary:
        """Write `summary` as the successor of `previous` (None: the thread has none yet), bumping the version.
        ConditionFailed if another refresh wrote first (the caller reads again, so coverage is never lost and
        a thread never has two summaries), or if the thread is gone: the write requires the thread's registry
        entry, which run deletion and tenant erasure delete after its messages, so a refresh that read the
        thread before it was deleted cannot write its summary back afterwards."""
        version = (previous.version if previous else 0) + 1
        written = summary.model_copy(update={"version": version})
        pk, sk = self.summary_key(store, summary.scope)
        # `indexed` (not part of the model): set once the index holds this version (`summary_indexed`).
        item = {"pk": pk, "sk": sk, **_dump(written), "indexed": False}
        put = Put(item, if_absent=True) if previous is None else Put(item, expect={"version": previous.version})
        thread = Check(pk, f"SCOPE#{summary.scope.agent_id}#{summary.scope.run_id}")  # the scope registry entry
        self.table.transact([put, thread])
        return written

    def summary_indexed(self, store: str, summary: ThreadSummary) -> None:
        """Record that the index holds this version of the summary (a newer version, or none, is left alone)."""
        try:
            self.table.update(*self.summary_key(store, summary.scope), {"indexed": True},
                              expect={"version": summary.version})
        except ConditionFailed:
            pass  # rewritten or deleted since: that writer indexes (or removes) its own

    def unindexed_summary(self, store: str, scope: Scope) -> ThreadSummary | None:
        """The thread's summary if its last write never reached the index (the writer died in between)."""
        item = self.table.get(*self.summary_key(store, scope))
        return ThreadSummary.model_validate(item) if item and item.get("indexed") is False else None

    def delete_summary(self, store: str, scope: Scope, *, version: int | None = None) -> bool:
        """Delete the thread's summary item (with `version`: only that version); whether there was one. (Its
        index document goes after it: services/summaries.delete.)"""
        key = self.summary_key(store, scope)
        existed = self.table.get(*key) is not None
        try:
            self.table.delete(*key, expect=None if version is None else {"version": version})
        except ConditionFailed:
            return False  # another version was written since: not this caller's to delete
        return existed

    # -- a thread's messages, as summaries read them ------------------------------------------------
    def messages_after(self, store: str, scope: Scope, after: str | None, *, before: str | None = None,
                       limit: int = 200) -> list[Message]:
        """Up to `limit` messages of the thread, oldest first, with ids after `after` (None: from the first)
        and before `before` (None: to the last). Reads only that range of the partition."""
        pk = tenant_pk(store, scope.app_id, scope.tenant_id)
        # The range is inclusive: it starts just after `after` (never re-read: it is covered), and `before`
        # itself, the first message kept out, is read and dropped.
        start = message_sk(scope, after + _JUST_AFTER if after else "")
        end = message_sk(scope, before or _AFTER_EVERY_ID)
        page = self.table.query(pk, start=start, end=end, limit=limit + 1)
        return [m for m in (Message.model_validate(i) for i in page.items) if m.message_id != before][:limit]

    def newest_messages(self, store: str, scope: Scope, *, limit: int, cursor: str | None = None
                        ) -> tuple[list[Message], str | None]:
        """The thread's messages newest first."""
        page = self.table.query(tenant_pk(store, scope.app_id, scope.tenant_id), prefix=message_sk(scope),
                                forward=False, limit=limit, cursor=cursor)
        return [Message.model_validate(i) for i in page.items], page.cursor
