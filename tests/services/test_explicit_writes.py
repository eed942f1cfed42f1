"""Explicit writes (infer: false): written and indexed as given, idempotent, all or nothing; they take part
in search, dream and erasure like extracted memories."""

from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain import limits
from memlane.domain.errors import Conflict, InvalidInput, PayloadTooLarge, Retryable
from memlane.domain.models import DreamActionKind, MemoryOrigin, MemoryType, TaskStatus
from memlane.faults import Faults
from memlane.repository import requests_pk, tenant_pk
from memlane.services import dream, erase, explicit, ingest, search, stores

SCOPE = {"app_id": "app", "tenant_id": "ann"}
TENANT = {"app_id": "app", "tenant_id": "ann"}


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def memory_items(deps, store, tenant="ann"):
    return deps.table.query(tenant_pk(store, "app", tenant), prefix="MEM#", limit=1000).items


def test_written_as_given_and_found_at_once(deps, store):
    when = datetime(2025, 5, 1, tzinfo=timezone.utc)
    done = explicit.write(deps, store, scope=SCOPE, memories=[
        {"text": "Ann's frequent flyer number is TP-448812.", "memory_type": "fact", "memory_id": "ffn",
         "metadata": {"source": "crm"}},
        {"text": "Ann prefers aisle seats", "memory_type": "preference", "event_time": when}])
    assert done.created == 2
    first, second = done.memories
    assert (first.memory_id, first.origin, first.metadata) == ("ffn", MemoryOrigin.EXPLICIT, {"source": "crm"})
    assert second.text == "Ann prefers aisle seats"  # not rewritten ("User prefers ..."): no inference
    assert second.memory_type == MemoryType.PREFERENCE and second.event_time == when and second.evidence == []
    assert first.scope.run_id == "__default__"  # tenant-level: no thread named
    found = search.search(deps, store, query="frequent flyer number", scope=TENANT, top_k=3)
    assert found[0].memory.memory_id == "ffn" and found[0].memory.origin == MemoryOrigin.EXPLICIT
    assert not deps.table.query(tenant_pk(store, "app", "ann"), prefix="TASK#").items  # no extraction task


def test_idempotent_on_the_memory_id(deps, store):
    body = [{"text": "Ann's passport expires in March 2027.", "memory_id": "passport"}]
    first = explicit.write(deps, store, scope=SCOPE, memories=body)
    before = memory_items(deps, store)
    again = explicit.write(deps, store, scope=SCOPE, memories=body)
    assert again.created == 0 and again.memories == first.memories and memory_items(deps, store) == before
    with pytest.raises(Conflict) as e:
        explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's passport expires in 2030.",
                                                            "memory_id": "passport"}])
    assert (e.value.code, e.value.field) == ("memory_id_reused", "memories[0].memory_id")
    assert memory_items(deps, store) == before


def test_idempotent_on_the_request_id_without_memory_ids(deps, store):
    body = [{"text": "Ann likes jazz."}, {"text": "Ann owns a bicycle."}]
    first = explicit.write(deps, store, scope=SCOPE, memories=body, request_id="import-1")
    again = explicit.write(deps, store, scope=SCOPE, memories=body, request_id="import-1")
    assert again.created == 0 and [m.memory_id for m in again.memories] == [m.memory_id for m in first.memories]
    assert len(memory_items(deps, store)) == 2


def test_all_or_nothing(deps, store):
    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's dog is called Max.", "memory_id": "dog"}])
    before = memory_items(deps, store)
    bad_batches = [
        ([{"text": "fine"}, {"text": "   "}], InvalidInput, "memories[1].text"),
        ([{"text": "fine"}, {"text": "x", "memory_type": "gossip"}], InvalidInput, "memories[1].memory_type"),
        ([{"text": "fine"}, {"text": "x", "memory_id": "a#b"}], InvalidInput, "memories[1].memory_id"),
        ([{"text": "fine"}, {"text": "x", "memory_id": ".."}], InvalidInput, "memories[1].memory_id"),  # no path reaches it
        ([{"text": "fine", "memory_id": "m"}, {"text": "y", "memory_id": "m"}], InvalidInput, "memories[1].memory_id"),
        ([{"text": "fine"}, {"text": "x" * (limits.MAX_CONTENT_CHARS + 1)}], PayloadTooLarge, "memories[1].text"),
        ([{"text": "fine"}, {"text": "x", "metadata": {"bad key": 1}}], InvalidInput, "memories[1].metadata"),
        ([{"text": f"m{i}"} for i in range(limits.MAX_MEMORIES_PER_WRITE + 1)], PayloadTooLarge, "memories"),
        ([], InvalidInput, "memories"),
        # the second item reuses an id with other content: the first, new, is not written either
        ([{"text": "Ann's cat is called Tom.", "memory_id": "cat"}, {"text": "Ann's dog is Rex.", "memory_id": "dog"}],
         Conflict, "memories[1].memory_id"),
    ]
    for batch, error, field in bad_batches:
        with pytest.raises(error) as e:
            explicit.write(deps, store, scope=SCOPE, memories=batch)
        assert e.value.field == field, batch
    assert memory_items(deps, store) == before
    assert [h.memory.memory_id for h in search.search(deps, store, query="cat Tom", scope=TENANT)] == ["dog"]


def test_refused_with_infer_true_or_a_wildcard_scope(deps, store):
    with pytest.raises(InvalidInput) as e:
        explicit.write(deps, store, scope=SCOPE, memories=[{"text": "x"}], infer=True)
    assert e.value.code == "infer_required"
    with pytest.raises(InvalidInput):
        explicit.write(deps, store, scope={**SCOPE, "run_id": "*"}, memories=[{"text": "x"}])


def test_a_dream_consolidates_them(deps, store):
    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann is allergic to peanuts.", "memory_id": "a1"},
                                                       {"text": "Ann has a peanut allergy.", "memory_id": "a2"}])
    task = dream.start(deps, store, scope=TENANT, sync=True, kinds=[DreamActionKind.MERGE])
    assert task.status == TaskStatus.SUCCEEDED
    found, _ = dream.list_actions(deps, store, task.task_id)
    (merge,) = found
    assert {m.memory_id for m in merge.before} == {"a1", "a2"}


def test_erased_with_the_tenant_and_their_thread(deps, store):
    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's locker code is 5521."}])
    explicit.write(deps, store, scope={**SCOPE, "agent_id": "bot", "run_id": "t-1"},
                   memories=[{"text": "Ann's gate code is 9034."}])
    explicit.write(deps, store, scope={"app_id": "app", "tenant_id": "bob"}, memories=[{"text": "Bob's code is 1."}])
    gone = erase.delete_run(deps, store, scope={**SCOPE, "agent_id": "bot", "run_id": "t-1"})
    assert gone["memories"] == 1
    assert [h.memory.text for h in search.search(deps, store, query="code", scope=TENANT)] == [
        "Ann's locker code is 5521."]
    erasure = erase.request_erasure(deps, app_id="app", tenant_id="ann", principal="ops")
    done = erase.run_erasure(deps, erasure.erasure_id)
    assert done.deleted["demo"]["memories"] == 1 and done.deleted["demo"]["index_documents"] == 1
    assert not memory_items(deps, store) and not search.search(deps, store, query="code", scope=TENANT)
    assert search.search(deps, store, query="code", scope={"app_id": "app", "tenant_id": "bob"})


def test_audited_with_the_scope_and_ids_kept_out_of_operation_names(deps, store):
    import json

    from memlane.api.app import build_api
    from memlane.server import _LambdaContext, http_event
    from memlane.services import access, audit

    key = access.create_api_key(deps, "crm-sync", {"app": ["ann"]})
    api = build_api(deps, auth="api_key")

    def call(method, path, body=None):
        event = http_event(method, path, {"content-type": "application/json", "authorization": f"Bearer {key}"},
                           json.dumps(body).encode() if body is not None else b"", "127.0.0.1")
        return api.resolve(event, _LambdaContext())["statusCode"]

    assert call("POST", "/v1/stores/demo/memories", {"scope": SCOPE, "infer": False,
                                                     "memories": [{"text": "Ann's locker is 12."}]}) == 201
    assert call("POST", "/v1/stores/demo/threads", {"thread_id": "t-9", "scope": SCOPE}) == 201
    assert call("GET", "/v1/stores/demo/threads/t-9?app_id=app&tenant_id=ann") == 200
    assert call("PUT", "/v1/stores/demo/agents/bot/profile", {**SCOPE, "text": "Be brief."}) == 200
    rows, _ = audit.list_(deps, store, limit=50, cursor=None)
    seen = {(r.operation, r.principal, r.app_id, r.tenant_id, r.status) for r in rows}
    assert {("POST /v1/stores/{store}/memories", "crm-sync", "app", "ann", 201),
            ("POST /v1/stores/{store}/threads", "crm-sync", "app", "ann", 201),
            ("GET /v1/stores/{store}/threads/{id}", "crm-sync", "app", "ann", 200),
            ("PUT /v1/stores/{store}/agents/{id}/profile", "crm-sync", "app", "ann", 200)} <= seen


def test_a_memory_id_of_a_messages_or_a_summarys_form_is_refused(deps, store):
    """Messages and thread summaries are documents of the same index under the tenant's ids: a memory written
    under one's id replaced its search document, and the thread's deletion then took the memory's away."""
    from memlane.domain.models import RecordType
    from memlane.domain.scope import Scope
    from memlane.services import ingest, summaries

    run = {**SCOPE, "agent_id": "bot", "run_id": "th"}
    ingest.add(deps, store, scope=run, sync=True, messages=[{"role": "user", "content": "My locker code is 4417."}])
    [message] = deps.table.query(tenant_pk(store, "app", "ann"), prefix="MSG#", limit=10).items
    for taken in (message["message_id"], summaries.doc_id(Scope(**run))):
        with pytest.raises(InvalidInput) as refused:
            explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's seat is 14C.", "memory_id": taken}])
        assert (refused.value.code, refused.value.field) == ("reserved_memory_id", "memories[0].memory_id")
    hits = search.search(deps, store, query="locker code", scope={**SCOPE, "run_id": "th", "agent_id": "bot"},
                         record_types=[RecordType.MESSAGE], top_k=3)
    assert [h.memory.memory_id for h in hits] == [message["message_id"]]


def test_a_write_named_by_a_request_id_is_its_task_and_takes_the_id(deps, store):
    """Its request id is recorded (kind `explicit`, the ids it wrote): an add of messages, or a write of another
    body, under it is 409 request_id_reused; the same instant given in another zone is the same write."""
    when = datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)
    first = explicit.write(deps, store, scope=SCOPE, request_id="R1",
                           memories=[{"text": "Ann's flight to Lisbon leaves.", "event_time": when}])
    task = deps.repo.get_task(store, "app", "ann", "R1")
    assert (task.kind, task.status, task.memory_ids) == ("explicit", TaskStatus.SUCCEEDED, [first.memories[0].memory_id])
    again = explicit.write(deps, store, scope=SCOPE, request_id="R1", memories=[
        {"text": "Ann's flight to Lisbon leaves.", "event_time": when.astimezone(timezone(timedelta(hours=2)))}])
    assert again.created == 0 and again.memories == first.memories
    for refused in (lambda: explicit.write(deps, store, scope=SCOPE, request_id="R1", memories=[{"text": "Other."}]),
                    lambda: ingest.add(deps, store, scope=SCOPE, request_id="R1", text="I moved to Denver.")):
        with pytest.raises(Conflict) as e:
            refused()
        assert e.value.code == "request_id_reused"
    assert [m.memory_id for m in deps.repo.iter_memories(store, "app", "ann")] == [first.memories[0].memory_id]


def test_a_tenant_erased_while_a_write_claims_its_request_id_keeps_no_pointer(deps, store, monkeypatch):
    claim, erased = type(deps.repo).claim_request, []

    def erased_first(repo, *args):  # the erasure runs between the write's transaction and its pointer
        if not erased:
            erased.append(erase.run_erasure(deps, erase.request_erasure(deps, app_id="app", tenant_id="ann",
                                                                        principal="admin").erasure_id))
        return claim(repo, *args)

    monkeypatch.setattr(type(deps.repo), "claim_request", erased_first)
    explicit.write(deps, store, scope=SCOPE, request_id="R3", memories=[{"text": "Ann's PIN hint is her cat."}])
    assert erased and deps.repo.find_task(store, "app", "ann", "R3") is None
    assert deps.table.query(requests_pk(store), limit=100).items == []


def test_a_retry_that_wrote_the_task_again_keeps_its_pointer(deps, store, monkeypatch):
    """A write that finds its task gone (erased) takes its pointer back — not one a retry of it has made since."""
    find, checks, body = type(deps.repo).find_task, [], [{"text": "Ann's PIN hint is her cat.", "memory_id": "pin"}]

    def erased_and_retried(repo, store_, app_id, tenant_id, request_id):
        checks.append(request_id)
        if len(checks) == 2:  # the first write's check after its pointer: its items were just erased ...
            pk = tenant_pk(store_, app_id, tenant_id)
            repo.delete_items([(pk, f"TASK#{request_id}"), (pk, "MEM#pin"),
                               repo.request_pointer_key(store_, app_id, tenant_id, request_id)])
            gone = find(repo, store_, app_id, tenant_id, request_id)
            monkeypatch.setattr(type(deps.repo), "find_task", find)  # ... and a retry runs whole before it goes on
            explicit.write(deps, store, scope=SCOPE, request_id="R9", memories=body)
            return gone
        return find(repo, store_, app_id, tenant_id, request_id)

    monkeypatch.setattr(type(deps.repo), "find_task", erased_and_retried)
    explicit.write(deps, store, scope=SCOPE, request_id="R9", memories=body)
    assert len(checks) == 2 and deps.repo.find_task(store, "app", "ann", "R9") is not None
    assert deps.repo.task_owners(store, "R9") == [("app", "ann")]


def test_a_replay_of_a_recorded_write_brings_back_nothing_deleted_since(deps, store):
    """Its task says the write was done whole: a late retry of it writes nothing again — a memory deleted since (or
    its thread) stays deleted, as a replayed add writes nothing again. It is refused, whatever its body: compared with
    the body's digest, a retry with a guessed text would confirm the deleted one (a trial, session 32)."""
    from memlane.services import memories

    body = [{"text": "Ann's passport number is X123."}, {"text": "Ann's locker code is 4471."}]
    scope = {**SCOPE, "agent_id": "bot", "run_id": "r1"}
    first = explicit.write(deps, store, scope=scope, memories=body, request_id="R5")
    again = explicit.write(deps, store, scope=scope, memories=body, request_id="R5")
    assert again.created == 0 and again.memories == first.memories
    memories.delete(deps, store, app_id="app", tenant_id="ann", memory_id=first.memories[0].memory_id)
    for guess in (body, [{"text": "Ann's passport number is X124."}, body[1]]):
        with pytest.raises(Conflict) as refused:
            explicit.write(deps, store, scope=scope, memories=guess, request_id="R5")
        assert refused.value.code == "request_content_deleted"
    assert [m["memory_id"] for m in memory_items(deps, store)] == [first.memories[1].memory_id]
    erase.delete_run(deps, store, scope=scope)
    assert memory_items(deps, store) == []


class Died(Exception):
    pass


def _die(name):
    raise Died(name)


def test_a_write_whose_process_dies_before_the_index_is_indexed_by_its_job(service, deps, store):
    """A process that died between the table and the index (a Lambda's timeout, kill -9) left the memories in the
    table and out of search until the client retried — which a client that gave up never does (session 31's note)."""
    deps.faults = Faults("explicit.after_commit", crash=_die)
    with pytest.raises(Died):
        explicit.write(deps, store, scope=SCOPE, memories=[
            {"text": "Ann's locker code is 4471 zebra."}, {"text": "Ann's gym is on Harbour Street."}])
    deps.faults = Faults()
    assert len(memory_items(deps, store)) == 2
    assert search.search(deps, store, query="locker code zebra", scope=TENANT, top_k=3, recipe="keyword") == []
    service.drain()  # the write's job
    for words in ("locker code zebra", "gym Harbour Street"):
        found = search.search(deps, store, query=words, scope=TENANT, top_k=3, recipe="keyword")
        assert [h.memory.origin for h in found] == [MemoryOrigin.EXPLICIT]


def test_a_write_whose_model_fails_writes_nothing(deps, store, monkeypatch):
    def throttled(texts):
        raise Retryable("ThrottlingException", code="retryable")

    monkeypatch.setattr(deps.embedder, "embed", throttled)
    with pytest.raises(Retryable):
        explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's locker code is 4471."}], request_id="w1")
    monkeypatch.undo()
    assert memory_items(deps, store) == []
    assert not deps.table.query(tenant_pk(store, "app", "ann"), prefix="TASK#").items


def test_a_write_whose_index_fails_after_its_commit_is_answered_as_written(service, deps, store, monkeypatch):
    """A trial (session 32): on a full disk the table took the write and the index did not; the write answered 503
    `storage_full` ("not written") for memories that were there — and a client without a request id that retried
    wrote them twice. Committed with its index job, it is answered as written, and the job indexes it."""
    def full(*args, **kwargs):
        raise Retryable("the data directory's disk is full", code="storage_full")

    monkeypatch.setattr(deps.index, "upsert", full)
    done = explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's locker code is 4471 zebra."}])
    monkeypatch.undo()
    assert done.created == 1 and len(memory_items(deps, store)) == 1
    service.drain()
    found = search.search(deps, store, query="locker code zebra", scope=TENANT, top_k=3, recipe="keyword")
    assert [h.memory.memory_id for h in found] == [done.memories[0].memory_id]


def test_a_write_whose_job_is_not_sent_after_its_commit_is_answered_as_written_and_indexed(deps, store, monkeypatch):
    """SQS cannot join the table's transaction: the job is sent after the commit. A send that failed then answered
    the write 5xx, committed and never indexed (nothing else would): it is no failure of the write, which indexes
    its memories itself, as before the job existed."""
    def committed_then_unsent(table, writes, job, **kwargs):
        table.transact(writes)
        raise Retryable("the queue is unreachable", code="queue_unavailable")

    monkeypatch.setattr(deps.queue, "commit", committed_then_unsent)
    done = explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's locker code is 4471 zebra."}])
    assert done.created == 1
    found = search.search(deps, store, query="locker code zebra", scope=TENANT, top_k=3, recipe="keyword")
    assert [h.memory.memory_id for h in found] == [done.memories[0].memory_id]


def test_tenants_writing_the_same_ids_at_once_each_find_only_their_own(service, deps, store):
    """Explicit writes of several tenants at once, with the same client ids (the local server runs them on several
    threads; each commits its index job with it): every tenant finds its own memories, searchable, and no other's."""
    import threading

    tenants = [f"t{i}" for i in range(4)]
    failed: list[BaseException] = []

    def write(tenant: str) -> None:
        try:
            for i in range(5):
                explicit.write(deps, store, scope={"app_id": "app", "tenant_id": tenant}, memories=[
                    {"memory_id": f"m{i}", "text": f"{tenant} keeps locker {i} with code zebra{tenant}."}])
        except BaseException as error:  # noqa: BLE001 — reported below
            failed.append(error)

    threads = [threading.Thread(target=write, args=(t,)) for t in tenants]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed
    service.drain()
    for tenant in tenants:
        found = search.search(deps, store, query="locker code zebra", scope={"app_id": "app", "tenant_id": tenant},
                              top_k=10, recipe="keyword")
        assert sorted(h.memory.memory_id for h in found) == [f"m{i}" for i in range(5)]
        assert {h.memory.scope.tenant_id for h in found} == {tenant}
