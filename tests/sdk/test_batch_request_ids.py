"""Every add of a batch is sent with a request id, so a batch resent after a lost answer replays what went in."""

from __future__ import annotations

import json

import httpx
import pytest

from memlane.sdk import Memlane

SCOPE = {"app_id": "a", "tenant_id": "t"}


@pytest.mark.parametrize("given", [{}, {"request_id": None}])
def test_an_add_without_its_own_request_id_is_sent_with_one(given: dict) -> None:
    """A trial (session 33): an add given `"request_id": None` lost the id made for it (the caller's None overwrote
    it), the server made one of its own, and the batch sent again after a dropped answer wrote the add twice."""
    sent: list[dict] = []

    def server(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        return httpx.Response(200, json={"results": [
            {"index": i, "outcome": "accepted", "status": 202, "request_id": a["request_id"]}
            for i, a in enumerate(body["adds"])], "accepted": len(body["adds"]), "replayed": 0, "refused": 0,
            "failed": 0})

    client = Memlane("http://memlane.test", transport=httpx.MockTransport(server))
    client.memories.add_batch("s", [{"scope": SCOPE, "text": "Ann likes tea.", **given},
                                    {"scope": SCOPE, "text": "Ann owns a cat.", "request_id": "mine"}])
    (body,) = sent
    first, second = body["adds"]
    assert isinstance(first["request_id"], str) and first["request_id"].startswith("sdk-")
    assert second["request_id"] == "mine"
