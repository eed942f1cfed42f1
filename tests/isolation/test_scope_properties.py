"""Property: whatever is stored, no read — search, memory list, message read, task read — ever
returns an item outside the scope it asked for. Random data across stores, apps and tenants,
on every table backend (SQLite, DynamoDB under moto) with the embedded index."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.services import ingest, memories, messages, search, stores, tasks

IDS = ["a", "b", "a1", "ab"]  # "a" is a prefix of "a1" and "ab": partitions must not bleed
WORDS = ["apple", "river", "guitar", "paris", "doctor", "bicycle", "garden", "coffee", "python", "winter"]
STORES = ["s1", "s2"]

scopes = st.fixed_dictionaries({"app_id": st.sampled_from(IDS[:2]), "tenant_id": st.sampled_from(IDS),
                                "agent_id": st.sampled_from(IDS[:2]), "run_id": st.sampled_from(IDS)})
sentences = st.lists(st.sampled_from(WORDS), min_size=4, max_size=8).map(lambda ws: "I like " + " ".join(ws))
adds = st.lists(st.tuples(st.sampled_from(STORES), scopes, sentences), min_size=1, max_size=12)
selector = st.one_of(st.none(), st.just("*"), st.sampled_from(IDS), st.lists(st.sampled_from(IDS), min_size=1,
                                                                                max_size=3))
queries = st.lists(st.tuples(st.sampled_from(STORES), st.sampled_from(IDS[:2]), st.sampled_from(IDS), selector,
                             selector, st.sampled_from(WORDS)), min_size=1, max_size=8)


@contextlib.contextmanager
def service_on(backend: str, tmp_path):
    if backend == "dynamodb-moto":
        import boto3
        from moto import mock_aws

        from memlane.adapters.dynamodb.table import ATTRIBUTE_DEFINITIONS, KEY_SCHEMA, DynamoDBTable

        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(TableName="memlane", KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTE_DEFINITIONS,
                                BillingMode="PAY_PER_REQUEST")
            svc = build_local(Settings.from_env(env={}, data_dir=tmp_path, reranker="none"), embedder=HashingEmbedder())
            svc.deps.table = DynamoDBTable("memlane", client=client)
            yield svc
            svc.close()
    else:
        svc = build_local(Settings.from_env(env={}, data_dir=tmp_path, reranker="none"), embedder=HashingEmbedder())
        yield svc
        svc.close()


def within(selector_value, value):
    if selector_value is None or selector_value == "*":
        return True
    return value in ([selector_value] if isinstance(selector_value, str) else selector_value)


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb-moto"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=adds, asks=queries)
def test_no_read_leaves_its_scope(backend, tmp_path_factory, monkeypatch, data, asks):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    with service_on(backend, tmp_path_factory.mktemp(backend)) as svc:
        deps = svc.deps
        for name in STORES:
            stores.create(deps, name=name)
        request_ids = []
        for store, scope, text in data:
            request_ids.append((store, scope, ingest.add(deps, store, scope=scope, messages=[
                {"role": "user", "content": text}]).request_id))
        svc.drain()

        for store, app, tenant, agent, run, word in asks:
            scope = {"app_id": app, "tenant_id": tenant, "agent_id": agent, "run_id": run}
            scope = {k: v for k, v in scope.items() if v is not None}
            # A fact restated in another run of the same agent is kept once, under the run that first said it
            # (services/consolidate.py): a search naming runs finds the run's own words as its messages.
            kinds = ["memory"] if run in (None, "*") else ["memory", "message"]
            hits = search.search(deps, store, query=word, scope=scope, top_k=50, include_evidence=True,
                                 record_types=kinds)
            reachable = [t for st_, sc, t in data if st_ == store and (sc["app_id"], sc["tenant_id"]) == (app, tenant)
                         and within(agent, sc["agent_id"]) and within(run, sc["run_id"])]
            assert bool(hits) == bool(reachable)  # finds something in scope, and nothing when nothing is
            for hit in hits:
                s = hit.memory.scope
                assert (s.app_id, s.tenant_id) == (app, tenant)
                assert within(agent, s.agent_id) and within(run, s.run_id)
                assert all(m.scope == s for m in hit.evidence or [])
                assert (store, s.as_dict()) in [(st_, {**sc}) for st_, sc, _ in data]  # came from this store
            listed, _ = memories.list_(deps, store, scope=scope, limit=200, cursor=None)
            for m in listed:
                assert (m.scope.app_id, m.scope.tenant_id) == (app, tenant)
                assert within(agent, m.scope.agent_id) and within(run, m.scope.run_id)
            if isinstance(agent, str) and agent != "*" and isinstance(run, str) and run != "*":
                exact = {"app_id": app, "tenant_id": tenant, "agent_id": agent, "run_id": run}
                msgs, _ = messages.list_(deps, store, scope=exact, limit=200, cursor=None)
                expected = sorted(t for st_, sc, t in data if st_ == store and sc == exact)
                assert sorted(m.content for m in msgs) == expected
            found, _ = tasks.list_(deps, store, app_id=app, tenant_id=tenant, limit=200, cursor=None)
            assert all((t.scope.app_id, t.scope.tenant_id) == (app, tenant) for t in found)
        for store, scope, rid in request_ids:
            assert tasks.get(deps, store, rid).scope.as_dict() == scope
