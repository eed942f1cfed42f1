"""Defence in depth: every request reaches tenant partitions only through a table bound to the
tenant its grant was checked for. Here a guard table plays IAM's part: it refuses any key outside
`store#app#tenant`, as the STS-scoped role does on AWS (tests/isolation/test_iam_policy.py)."""

from __future__ import annotations

import json

import pytest

from memlane.api.app import build_api
from memlane.domain.errors import Forbidden, InvalidInput
from memlane.ports import Put, Table
from memlane.server import _LambdaContext, http_event
from memlane.services import ingest, memories, messages, stores
from memlane.split_table import SplitTable


class GuardTable:
    """A table that, like the scoped IAM role, touches one partition key only."""

    def __init__(self, table: Table, pk: str):
        self.table, self.pk = table, pk

    def _check(self, pk: str) -> None:
        if pk != self.pk:
            raise Forbidden(f"AccessDenied: {pk} is not {self.pk}", code="access_denied")

    def get(self, pk, sk):
        self._check(pk)
        return self.table.get(pk, sk)

    def batch_get(self, keys):
        for pk, _ in keys:
            self._check(pk)
        return self.table.batch_get(keys)

    def put(self, item, **kw):
        self._check(item["pk"])
        return self.table.put(item, **kw)

    def update(self, pk, sk, changes, **kw):
        self._check(pk)
        return self.table.update(pk, sk, changes, **kw)

    def delete(self, pk, sk, **kw):
        self._check(pk)
        return self.table.delete(pk, sk, **kw)

    def query(self, pk, **kw):
        self._check(pk)
        return self.table.query(pk, **kw)

    def transact(self, writes):
        for w in writes:
            self._check(w.item["pk"] if hasattr(w, "item") else w.pk)
        return self.table.transact(writes)


class GuardTenants:
    def __init__(self, table: Table):
        self.table, self.bound = table, []

    def for_tenant(self, store, app_id, tenant_id):
        self.bound.append((store, app_id, tenant_id))
        return GuardTable(self.table, f"{store}#{app_id}#{tenant_id}")


@pytest.fixture()
def guarded(service, deps):
    stores.create(deps, name="demo")
    tenants = GuardTenants(deps.table)
    deps.tenant_tables = tenants
    return service, deps, tenants


def call(api, method, path, body=None):
    event = http_event(method, path, {"content-type": "application/json"},
                       json.dumps(body).encode() if body is not None else b"", "127.0.0.1")
    result = api.resolve(event, _LambdaContext())
    return result["statusCode"], json.loads(result["body"]) if result.get("body") else None


def test_every_route_works_through_the_tenant_bound_table(guarded):
    service, deps, tenants = guarded
    api = build_api(deps)
    scope = {"app_id": "app", "tenant_id": "ann", "agent_id": "g", "run_id": "r"}
    status, added = call(api, "POST", "/v1/stores/demo/memories",
                         {"scope": scope, "messages": [{"role": "user", "content": "I grow tomatoes on my balcony."}]})
    assert status == 202
    service.drain()
    assert call(api, "GET", f"/v1/stores/demo/tasks/{added['request_id']}")[1]["status"] == "SUCCEEDED"
    status, found = call(api, "POST", "/v1/stores/demo/search", {"query": "tomatoes", "scope": scope})
    assert status == 200 and "tomatoes" in found["results"][0]["text"]
    q = "app_id=app&tenant_id=ann&agent_id=g&run_id=r"
    for path in (f"/v1/stores/demo/messages?{q}", f"/v1/stores/demo/memories?{q}",
                 "/v1/stores/demo/scopes?app_id=app&tenant_id=ann", "/v1/stores/demo/tasks?app_id=app&tenant_id=ann"):
        assert call(api, "GET", path)[0] == 200, path
    status, card = call(api, "POST", "/v1/stores/demo/threads/r/context", {"app_id": "app", "tenant_id": "ann"})
    assert status == 200 and "tomatoes" in card["text"]
    summary = "/v1/stores/demo/threads/r/summary?app_id=app&tenant_id=ann&agent_id=g"
    status, refresh = call(api, "POST", summary)
    assert status == 202
    service.drain()
    assert call(api, "GET", f"/v1/stores/demo/tasks/{refresh['request_id']}")[1]["status"] == "SUCCEEDED"
    assert call(api, "GET", summary)[0] in (200, 404)  # read through the bound table (the run is all recent turns)
    assert call(api, "DELETE", f"/v1/stores/demo/runs/r?app_id=app&tenant_id=ann&agent_id=g")[0] == 200
    # threads, explicit writes, stated profiles
    tenant = {"app_id": "app", "tenant_id": "ann"}
    assert call(api, "POST", "/v1/stores/demo/threads", {"thread_id": "t", "scope": {**tenant, "agent_id": "g"}})[0] == 201
    assert call(api, "POST", "/v1/stores/demo/memories",
                {"scope": {**tenant, "agent_id": "g", "run_id": "t"}, "infer": False,
                 "memories": [{"text": "Ann's balcony faces south."}]})[0] == 201
    assert call(api, "PUT", "/v1/stores/demo/profiles/ann", {"app_id": "app", "text": "Gardener."})[0] == 200
    assert call(api, "PUT", "/v1/stores/demo/agents/g/profile", {**tenant, "text": "Be brief."})[0] == 200
    for path in ("/v1/stores/demo/threads?app_id=app&tenant_id=ann", "/v1/stores/demo/threads/t?app_id=app&tenant_id=ann",
                 "/v1/stores/demo/profiles/ann?app_id=app", "/v1/stores/demo/agents/g/profile?app_id=app&tenant_id=ann"):
        assert call(api, "GET", path)[0] == 200, path
    assert call(api, "DELETE", "/v1/stores/demo/threads/t?app_id=app&tenant_id=ann")[0] == 200
    assert set(tenants.bound) == {("demo", "app", "ann")}


def test_a_bug_that_builds_another_tenants_key_is_refused(guarded):
    _, deps, _ = guarded
    ingest.add(deps.for_tenant("demo", "app", "bob"), "demo", scope={"app_id": "app", "tenant_id": "bob"},
               text="Bob's secret recipe uses saffron.")
    bound_to_ann = deps.for_tenant("demo", "app", "ann")
    bob = {"app_id": "app", "tenant_id": "bob", "agent_id": "__default__", "run_id": "__default__"}
    assert messages.list_(deps.for_tenant("demo", "app", "bob"), "demo", scope=bob, limit=5, cursor=None)[0]
    for read in (lambda d: messages.list_(d, "demo", scope=bob, limit=5, cursor=None),
                 lambda d: memories.list_(d, "demo", scope=bob, limit=5, cursor=None),
                 lambda d: ingest.add(d, "demo", scope=bob, text="forged")):
        with pytest.raises(Forbidden):  # services handed Bob's scope while bound to Ann: the table refuses
            read(bound_to_ann)


def test_a_transaction_may_not_mix_tenant_and_global_partitions(tmp_path):
    from memlane.adapters.local.sqlite_table import SqliteTable

    table = SplitTable(SqliteTable(tmp_path / "t.db"), SqliteTable(tmp_path / "t.db"))
    with pytest.raises(InvalidInput) as e:
        table.transact([Put({"pk": "demo#~requests", "sk": "r1"}), Put({"pk": "demo#app#ann", "sk": "TASK#r1"})])
    assert e.value.code == "mixed_transaction"
    table.transact([Put({"pk": "demo#app#ann", "sk": "a"}), Put({"pk": "demo#app#ann", "sk": "b"})])
    assert len(table.query("demo#app#ann").items) == 2
