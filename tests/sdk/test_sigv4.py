"""The SDK's SigV4 auth, sync and async, against the verifying server of tests/unit/test_client_sigv4.py
(it recomputes each signature as API Gateway does): the body, path and query as sent are what was signed."""

from __future__ import annotations

import asyncio

import pytest

from memlane.sdk import AsyncMemlane, Memlane, errors

from ..unit.test_client_sigv4 import Verifier, server  # noqa: F401 — the fixture


def test_sync_calls_are_signed_for_execute_api(server: str) -> None:  # noqa: F811
    client = Memlane(server, auth="sigv4", region="us-west-2")
    client.search("demo", "where does alice live", {"app_id": "travel-app", "tenant_id": "alice"})
    client.tasks.list("demo", app_id="travel-app", tenant_id="alice", limit=5).page()
    assert [s["ok"] for s in Verifier.seen] == [True, True], Verifier.seen
    assert Verifier.seen[0]["why"] == "us-west-2"


def test_async_calls_are_signed_and_a_tampered_body_is_refused(server: str) -> None:  # noqa: F811
    async def main() -> None:
        async with AsyncMemlane(server, auth="sigv4") as client:
            await client.stores.list().page()
            Verifier.tamper = {"body": b'{"query": "everything", "scope": {"app_id": "a", "tenant_id": "bob"}}'}
            with pytest.raises(errors.Forbidden):
                await client.search("demo", "where does alice live", {"app_id": "a", "tenant_id": "alice"})

    asyncio.run(main())
    assert [s["ok"] for s in Verifier.seen] == [True, False]
    assert Verifier.seen[0]["why"] == "eu-central-1"  # the standard chain's region (AWS_DEFAULT_REGION)


def test_without_auth_nothing_is_signed(server: str) -> None:  # noqa: F811
    with pytest.raises(errors.Forbidden):
        Memlane(server, api_key="ml_secret").stores.get("demo")
    assert Verifier.seen[-1]["auth"] == "Bearer ml_secret"
