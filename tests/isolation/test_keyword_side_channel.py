"""Keyword ranking tells a tenant nothing about other tenants' words (docs/security.md, "Side channels").

The attack an adversarial review reproduced: a tenant writes two memories of its own, "<guess> filler" and
"<nonce> filler", searches "<guess> <nonce>" by keyword alone and reads which ranks first. When BM25 counts
how rare a word is over every document of the index, a guess other tenants' documents hold is less rare,
so it ranks lower: one bit about data the tenant cannot read. With each tenant's own statistics, the
answer (order and scores) is the same whatever other tenants hold."""

from __future__ import annotations

import json

import pytest

from memlane.api.app import build_api
from memlane.bootstrap import build
from memlane.config import Settings
from memlane.services import access

from .api_events import api_event


@pytest.fixture()
def call(tmp_path):
    deps = build(Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none"))
    keys = {t: access.create_api_key(deps, f"{t}-app", {"travel": [t]}) for t in ("mallory", "victim")}
    keys["admin"] = access.create_api_key(deps, "ops", {}, admin=True)
    api = build_api(deps, auth="api_key")

    def call(who: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        out = api.resolve(api_event(method, path, body, keys[who]), None)
        return out["statusCode"], json.loads(out["body"] or "null")

    for store in ("demo", "other"):
        assert call("admin", "POST", "/v1/stores", {"name": store})[0] == 201
    return call


def write(call, store: str, tenant: str, texts: list[str]) -> None:
    body = {"scope": {"app_id": "travel", "tenant_id": tenant}, "infer": False,
            "memories": [{"text": t} for t in texts]}
    status, out = call(tenant, "POST", f"/v1/stores/{store}/memories", body)
    assert status in (200, 201), out


def probe(call, guess: str) -> list[tuple[str, float]]:
    """mallory's keyword search for her two memories: (text, score) in rank order."""
    status, body = call("mallory", "POST", "/v1/stores/demo/search",
                        {"query": f"{guess} qzxv", "scope": {"app_id": "travel", "tenant_id": "mallory"},
                         "recipe": "keyword", "top_k": 10})
    assert status == 200, body
    return [(r["text"], round(r["score"], 12)) for r in body["results"]]


@pytest.mark.parametrize("where", ["same store", "another store"])
def test_what_another_tenant_holds_changes_no_keyword_rank_or_score(call, where: str) -> None:
    write(call, "demo", "mallory", ["4711 filler words", "qzxv filler words"])
    before = probe(call, "4711")
    assert {text for text, _ in before} == {"4711 filler words", "qzxv filler words"}
    # the victim's PIN, many times over: before the fix "4711" became common and ranked second
    write(call, "demo" if where == "same store" else "other", "victim",
          [f"my card PIN is 4711, note {i}" for i in range(40)])
    assert probe(call, "4711") == before
