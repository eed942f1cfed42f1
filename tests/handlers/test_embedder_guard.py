"""On AWS too, a function whose embedder is not the store's refuses it: a search function deployed with
another Titan dimension answers 409 embedder_mismatch (not a 5xx, not a search over incomparable vectors)."""

from __future__ import annotations

import json

from tests.handlers.conftest import Aws, Bedrock
from tests.handlers.events import load_event


def test_a_function_with_another_embedding_dimension_refuses_the_store(aws: Aws, bedrock: Bedrock, store: str) -> None:
    aws.monkeypatch.setenv("MEMLANE_EMBED_DIM", "512")  # the store was made at 256
    search = aws.load("search")

    response = search(load_event("search", "search"))

    assert response["statusCode"] == 409, response
    error = json.loads(response["body"])["error"]
    assert error["code"] == "embedder_mismatch"
    assert "(256 dims" in error["message"] and "(512 dims" in error["message"]
    assert "memlane reindex demo" in error["message"]
