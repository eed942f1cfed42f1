"""Concurrent requests never mix: the API object is shared by every server thread, and each request
must be answered from its own event — its own caller, its own scope, its own request id."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import Counter

import pytest

from memlane.adapters.local.embedded_index import EmbeddedIndex
from memlane.api.app import build_api
from memlane.bootstrap import build
from memlane.config import Settings
from memlane.services import access

from .api_events import api_event


TENANTS = ("alice", "bob", "carol", "dave")
ROUNDS = 60




@pytest.fixture()
def api_and_keys(tmp_path):
    deps = build(Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none"))
    keys = {t: access.create_api_key(deps, f"{t}-app", {"travel": [t]}) for t in TENANTS}
    keys["admin"] = access.create_api_key(deps, "ops", {}, admin=True)
    api = build_api(deps, auth="api_key")
    assert api.resolve(api_event("POST", "/v1/stores", {"name": "demo"}, keys["admin"]), None)["statusCode"] == 201
    for t in TENANTS:
        scope = {"app_id": "travel", "tenant_id": t, "run_id": "r"}
        added = api.resolve(api_event("POST", "/v1/stores/demo/memories",
                                   {"scope": scope, "text": f"{t} keeps the secret word {t}word.", "sync": True},
                                   keys[t]), None)
        assert added["statusCode"] == 200, added
    return api, keys


def test_one_api_serving_many_threads_never_answers_with_another_requests_data(api_and_keys):
    api, keys = api_and_keys
    problems: list[str] = []
    seen = Counter()
    start = threading.Barrier(len(TENANTS) + 1)

    def tenant_client(t: str) -> None:
        start.wait()
        for i in range(ROUNDS):
            scope = {"app_id": "travel", "tenant_id": t}
            found = api.resolve(api_event("POST", "/v1/stores/demo/search", {"query": "secret word", "scope": scope},
                                       keys[t]), None)
            texts = [r["text"] for r in json.loads(found["body"]).get("results", [])]
            if found["statusCode"] != 200 or any(f"{t}word" not in x for x in texts) or not texts:
                problems.append(f"{t} search: {found['statusCode']} {texts}")
            rid = f"{t}-add-{i}"
            added = api.resolve(api_event("POST", "/v1/stores/demo/memories",
                                       {"scope": {**scope, "run_id": "r2"}, "text": f"note {i}", "request_id": rid},
                                       keys[t]), None)
            if added["statusCode"] != 202 or json.loads(added["body"]).get("request_id") != rid:
                problems.append(f"{t} add {rid}: {added['statusCode']} {added['body'][:120]}")
            seen[t] += 1

    def admin_client() -> None:
        start.wait()
        for _ in range(ROUNDS):
            api.resolve(api_event("GET", "/v1/stores/demo/requests", None, keys["admin"]), None)

    threads = [threading.Thread(target=tenant_client, args=(t,)) for t in TENANTS]
    threads.append(threading.Thread(target=admin_client))
    # tenant keys asking for the admin-only audit log while the admin does must always be refused
    def audit_probe() -> None:
        for _ in range(ROUNDS):
            got = api.resolve(api_event("GET", "/v1/stores/demo/requests", None, keys["alice"]), None)
            if got["statusCode"] != 403:
                problems.append(f"tenant key read the audit log: {got['statusCode']}")
    threads.append(threading.Thread(target=audit_probe))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert problems == []
    assert all(seen[t] == ROUNDS for t in TENANTS)


def test_cosines_read_by_id_under_concurrent_searches_stay_each_tenants_own(api_and_keys, monkeypatch):
    """A search's second index read (the cosines of results its vector list did not reach) runs beside other
    tenants' searches: each answer carries its own tenant's records, with the similarities it has alone."""
    api, keys = api_and_keys
    # A vector list of one hit: every further result is past it, so every search reads cosines by id.
    search = EmbeddedIndex.search
    monkeypatch.setattr(EmbeddedIndex, "search", lambda self, store, q: dataclasses.replace(
        found := search(self, store, q), vector=found.vector[:1]))
    for t in TENANTS:
        for i, text in enumerate(("flies to Lisbon on Friday", "likes green tea with honey", "owns a red bicycle")):
            body = {"scope": {"app_id": "travel", "tenant_id": t, "run_id": f"r{i}"}, "text": f"{t} {text}.", "sync": True}
            assert api.resolve(api_event("POST", "/v1/stores/demo/memories", body, keys[t]), None)["statusCode"] == 200

    def ask(t: str) -> tuple[int, list[tuple[str, float]]]:
        found = api.resolve(api_event("POST", "/v1/stores/demo/search",
                                      {"query": "secret word, Lisbon, green tea, red bicycle", "top_k": 4,
                                       "scope": {"app_id": "travel", "tenant_id": t}}, keys[t]), None)
        return found["statusCode"], [(r["text"], r["similarity"]) for r in json.loads(found["body"]).get("results", [])]

    reads: list[str] = []
    real = EmbeddedIndex.similarities
    monkeypatch.setattr(EmbeddedIndex, "similarities",
                        lambda self, store, scope, vector, ids: reads.append(scope.tenant_id)
                        or real(self, store, scope, vector, ids))
    alone = {t: ask(t) for t in TENANTS}  # each tenant's answer with nothing else running
    assert all(code == 200 and len(results) == 4 for code, results in alone.values()), alone
    before = len(reads)
    assert sorted(set(reads)) == sorted(TENANTS)  # every tenant's search read cosines by id
    problems: list[str] = []
    start = threading.Barrier(len(TENANTS))

    def tenant_client(t: str) -> None:
        start.wait()
        for _ in range(ROUNDS):
            got = ask(t)
            if got != alone[t]:
                problems.append(f"{t}: {got} != {alone[t]}")

    threads = [threading.Thread(target=tenant_client, args=(t,)) for t in TENANTS]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert problems == []
    assert len(reads) - before == before * ROUNDS  # and they did so again each round, side by side
    assert all(text.startswith(t) for t, (_, results) in alone.items() for text, _ in results)
