"""The rehearsal's OpenSearch endpoint (tests/deploy/opensearch_standin.py) refuses what Amazon OpenSearch Service
refuses: it must be able to fail. Requests are signed by requests-aws4auth, the signer memlane's adapter uses."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from requests_aws4auth import AWS4Auth

from tests.deploy.opensearch_standin import StandIn

KEY, SECRET, TOKEN = "ASIAREHEARSAL0001", "secret-of-the-function", "session-token"


@pytest.fixture()
def standin(tmp_path: Path) -> StandIn:
    asked: list[tuple[str, str, str]] = []
    s = StandIn(engine_url="http://127.0.0.1:9", region="us-west-2",
                secrets=lambda key: (SECRET, TOKEN) if key == KEY else None,
                authorize=lambda key, method, path: asked.append((key, method, path)) is not None,  # IAM: deny all
                directory=tmp_path)
    s.asked = asked  # type: ignore[attr-defined]
    return s


def signed(method: str, path: str, body: bytes, *, secret: str = SECRET, region: str = "us-west-2",
           key: str = KEY) -> tuple[dict[str, str], bytes]:
    auth = AWS4Auth(key, secret, region, "es", session_token=TOKEN)
    request = requests.Request(method, f"https://localhost:4443{path}", data=body,
                               headers={"content-type": "application/json"}).prepare()
    request = auth(request)
    return {"host": "localhost:4443", **request.headers}, body  # the Host header urllib3 adds when sending


def test_a_well_signed_request_reaches_the_iam_check(standin: StandIn) -> None:
    headers, body = signed("POST", "/memlane-demo/_search", b'{"query":{"match_all":{}}}')
    status, _, answer = standin.handle("POST", "/memlane-demo/_search", headers, body)
    assert status == 403 and b"not authorized" in answer  # the signature held; the (denying) policy decided
    assert standin.asked == [(KEY, "POST", "/memlane-demo/_search")]
    assert [r.reason for r in standin.refusals] == [f"{KEY} may not POST /memlane-demo/_search (IAM)"]


@pytest.mark.parametrize(("change", "reason"), [
    ({"secret": "another-secret"}, "the request signature does not match (SigV4)"),
    ({"region": "eu-west-1"}, "credential scope eu-west-1/es is not us-west-2/es"),
    ({"key": "ASIAUNKNOWN"}, "unknown access key ASIAUNKNOWN"),
])
def test_a_badly_signed_request_is_refused(standin: StandIn, change: dict[str, str], reason: str) -> None:
    headers, body = signed("GET", "/memlane-demo", b"", **change)
    status, _, _ = standin.handle("GET", "/memlane-demo", headers, body)
    assert status == 403
    assert [r.reason for r in standin.refusals] == [reason]
    assert standin.asked == []


def test_a_body_other_than_the_signed_one_is_refused(standin: StandIn) -> None:
    headers, _ = signed("POST", "/memlane-demo/_doc/1", b'{"text":"signed"}')
    status, _, _ = standin.handle("POST", "/memlane-demo/_doc/1", headers, b'{"text":"swapped"}')
    assert status == 403
    assert [r.reason for r in standin.refusals] == ["x-amz-content-sha256 is not the hash of the body"]


def test_an_unsigned_request_is_refused(standin: StandIn) -> None:
    status, _, _ = standin.handle("GET", "/", {"host": "localhost:4443"}, b"")
    assert status == 403
    assert [r.reason for r in standin.refusals] == ["missing or malformed SigV4 Authorization header"]
