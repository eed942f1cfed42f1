"""The messages extraction reads as context (`Repository.messages_before`), on every Table backend:
the run's own messages said before a given one, newest first — never those of another run (even
one whose id extends this one's), agent, tenant or store."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memlane.domain.models import Message
from memlane.domain.scope import Scope
from memlane.ports import Table
from memlane.repository import Repository

from .table_backends import table  # noqa: F401  (the parametrised fixture)

T = datetime(2026, 1, 1, tzinfo=timezone.utc)
RUN = Scope(app_id="a", tenant_id="t", agent_id="g", run_id="r1")


def put(repo: Repository, store: str, scope: Scope, n: int) -> Message:
    message = Message(message_id=f"{n:04d}", scope=scope, role="user", content=f"{scope.run_id} {n}",
                      created_at=T + timedelta(minutes=n), request_id=f"q{n}")
    repo.table.put(repo.message_put(store, message).item)
    return message


def test_only_the_runs_own_earlier_messages_newest_first(table: Table) -> None:
    repo = Repository(table)
    own = [put(repo, "s", RUN, n) for n in (1, 2, 3, 5)]
    for n, scope in enumerate([RUN.model_copy(update={"run_id": "r10"}),  # an id extending this run's
                               RUN.model_copy(update={"run_id": "r"}),
                               RUN.model_copy(update={"agent_id": "g2"}),
                               RUN.model_copy(update={"tenant_id": "t2"})], start=1):
        put(repo, "s", scope, n + 1)  # said between the run's own, in every neighbour
    put(repo, "other", RUN, 4)  # another store, same scope
    assert [m.content for m in repo.messages_before("s", RUN, own[3].message_id, limit=10)] == \
        ["r1 3", "r1 2", "r1 1"]
    assert [m.content for m in repo.messages_before("s", RUN, own[3].message_id, limit=2)] == ["r1 3", "r1 2"]
    assert repo.messages_before("s", RUN, own[0].message_id, limit=10) == []
