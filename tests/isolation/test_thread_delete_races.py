"""Deleting a thread while an add to it moves its last activity: the delete had read the thread's entry
(and so its place in the activity order) before the add moved it. Nothing of the deleted thread may stay
in the tenant's thread list — not even an order item pointing at nothing, which would list the thread
twice once its id is used again."""

from memlane.repository import tenant_pk
from memlane.services import ingest, stores, threads

SCOPE = {"app_id": "app", "tenant_id": "alice", "agent_id": "bot"}


def test_a_thread_deleted_while_an_add_moves_its_activity_leaves_no_order_item(service, deps, monkeypatch):
    stores.create(deps, name="s")
    threads.create(deps, "s", scope=SCOPE, thread_id="t1")
    repo_type, fired = type(deps.repo), []
    original = repo_type.run_removal

    def add_meanwhile(repo, store, info):
        keys = original(repo, store, info)  # the delete now holds the entry as it was
        if not fired:
            fired.append(True)
            ingest.add(deps, "s", scope={**SCOPE, "run_id": "t1"}, request_id="late-add",
                       messages=[{"role": "user", "content": "one more thing"}])
        return keys

    monkeypatch.setattr(repo_type, "run_removal", add_meanwhile)
    threads.delete(deps, "s", app_id="app", tenant_id="alice", thread_id="t1")
    assert fired
    service.drain()
    order = [i["sk"] for i in deps.table.query(tenant_pk("s", "app", "alice"), prefix="RECENT#", limit=100).items]
    assert order == []
    threads.create(deps, "s", scope=SCOPE, thread_id="t1")  # the id used again: listed once
    listed, _ = threads.list_(deps, "s", app_id="app", tenant_id="alice", limit=50, cursor=None)
    assert [t.scope.run_id for t in listed] == ["t1"]
