"""Tenant credentials for OpenSearch, without an engine: the token the security plugin checks, and
the per-tenant client cache (tests/integration/test_opensearch_confinement.py runs them for real)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from memlane.adapters.opensearch.tenant_auth import TENANT_ROLE, TokenClients, tenant_token, without_userinfo

KEY = b"k" * 32


def _decode(part: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_the_token_names_the_tenant_and_is_signed_with_the_key() -> None:
    token = tenant_token(KEY, "s1", "app", "Alice@x", now=1_000, seconds=900)
    header, claims, signature = token.split(".")
    assert _decode(header) == {"alg": "HS256", "typ": "JWT"}
    got = _decode(claims)
    assert (got["store"], got["app"], got["tenant"], got["roles"]) == ("s1", "app", "Alice@x", [TENANT_ROLE])
    assert got["exp"] == 1_900 and got["nbf"] <= 1_000
    expected = hmac.new(KEY, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)) == expected


def test_a_tenant_client_never_carries_the_services_login() -> None:
    assert without_userinfo("http://admin:secret@127.0.0.1:9200") == "http://127.0.0.1:9200"
    assert without_userinfo("https://search.example.com") == "https://search.example.com"
    clients = TokenClients("http://admin:secret@127.0.0.1:9200", base64.b64encode(KEY).decode())
    client = clients.client_for("s1", "app", "alice")
    connection = client.transport.get_connection()
    assert "secret" not in repr(connection.host) and "admin" not in repr(connection.host)
    assert connection.headers["authorization"].startswith("Bearer ")


def test_clients_are_cached_per_tenant_renewed_before_expiry_and_bounded() -> None:
    now = [1_000.0]
    clients = TokenClients("http://127.0.0.1:9200", base64.b64encode(KEY).decode(), seconds=900,
                           clock=lambda: now[0], max_clients=2)
    alice = clients.client_for("s1", "app", "alice")
    assert clients.client_for("s1", "app", "alice") is alice
    assert clients.client_for("s1", "app", "bob") is not alice
    now[0] += 900 - 180  # within the renewal margin: a fresh token
    renewed = clients.client_for("s1", "app", "alice")
    assert renewed is not alice
    clients.client_for("s1", "app", "carol")  # a third tenant evicts the least recently used (bob)
    assert clients.client_for("s1", "app", "alice") is renewed


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError):
        TokenClients("http://127.0.0.1:9200", base64.b64encode(b"short").decode())
