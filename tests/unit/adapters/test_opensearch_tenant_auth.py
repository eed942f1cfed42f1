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


def test_on_aws_a_tenants_requests_are_signed_with_its_own_sts_session() -> None:
    import boto3
    import requests
    from botocore.stub import ANY, Stubber

    from memlane.adapters.opensearch.tenant_auth import SigV4Clients, TenantSessions

    sts = boto3.client("sts", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
    stubber = Stubber(sts)
    stubber.add_response("assume_role", {"Credentials": {
        "AccessKeyId": "ASIATENANTALICE1", "SecretAccessKey": "s", "SessionToken": "t",
        "Expiration": "2030-01-01T00:00:00Z"}}, {
        "RoleArn": "arn:aws:iam::123456789012:role/TenantDataRole", "RoleSessionName": ANY,
        "Tags": [{"Key": "store", "Value": "s1"}, {"Key": "app", "Value": "app"}, {"Key": "tenant", "Value": "alice"}],
        "DurationSeconds": 900})
    sessions = TenantSessions("arn:aws:iam::123456789012:role/TenantDataRole", region="eu-west-1", sts_client=sts)
    clients = SigV4Clients("https://search.example.com", sessions.credentials_for, region="eu-west-1")
    with stubber:
        client = clients.client_for("s1", "app", "alice")
    stubber.assert_no_pending_responses()
    signed = client.transport.get_connection().session.auth(
        requests.Request("POST", "https://search.example.com/_msearch").prepare())
    assert signed.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=ASIATENANTALICE1/")
    assert signed.headers["X-Amz-Security-Token"] == "t"


def test_bootstrap_gives_tenants_their_own_credentials_when_configured(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")  # the functions' own credentials (no call is made)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    from memlane.adapters.opensearch.tenant_auth import SigV4Clients
    from memlane.bootstrap import _index
    from memlane.config import Settings

    key = base64.b64encode(KEY).decode()
    local = _index(Settings(index="opensearch", opensearch_url="http://admin:pw@127.0.0.1:9", opensearch_tenant_key=key,
                            data_dir=tmp_path))
    assert isinstance(local.tenant_clients, TokenClients)
    assert _index(Settings(index="opensearch", opensearch_url="http://127.0.0.1:9", data_dir=tmp_path)).tenant_clients \
        is None
    aws = _index(Settings(mode="aws", index="opensearch", opensearch_url="https://search.example.com",
                          tenant_role_arn="arn:aws:iam::123456789012:role/TenantDataRole", data_dir=tmp_path))
    assert isinstance(aws.tenant_clients, SigV4Clients)
