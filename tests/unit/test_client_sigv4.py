"""The client signs its requests with SigV4 for the deployed API (API Gateway IAM auth): a tiny server here
recomputes each signature with botocore from what it received, as API Gateway does, and refuses a
request whose body, path or query was changed after signing."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from memlane import cli
from memlane.client import ApiError, MemlaneClient, region_of

KEY, SECRET, TOKEN = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-1"


class Verifier(BaseHTTPRequestHandler):
    """Recomputes the SigV4 signature of each request from the received method, path, query, signed
    headers and body; answers 403 unless it matches, else echoes what it verified."""

    tamper: dict[str, Any] = {}
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = self.tamper.get("body", body)
        path = self.tamper.get("path", self.path)
        auth = self.headers.get("Authorization", "")
        ok, why = verify(self.command, f"http://{self.headers['Host']}{path}", dict(self.headers.items()), body, auth)
        self.seen.append({"ok": ok, "why": why, "auth": auth})
        status, answer = (200, {"stores": [], "results": [], "tasks": []}) if ok else (403, {"message": why})
        raw = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_PATCH = do_DELETE = _handle


def verify(method: str, url: str, headers: dict[str, str], body: bytes, auth: str) -> tuple[bool, str]:
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False, "not signed"
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key_id, date, region, service, _ = parts["Credential"].split("/")
    if (key_id, service) != (KEY, "execute-api"):
        return False, f"credential {key_id} for {service}"
    if headers.get("X-Amz-Security-Token") != TOKEN:
        return False, "no session token"
    signed = parts["SignedHeaders"].split(";")
    wanted = {name: value for name, value in headers.items() if name.lower() in signed}
    request = AWSRequest(method=method, url=url, data=body, headers=wanted)
    request.context["timestamp"] = headers["X-Amz-Date"]
    signer = SigV4Auth(Credentials(KEY, SECRET, TOKEN), "execute-api", region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    return (expected == parts["Signature"], "signature mismatch" if expected != parts["Signature"] else region)


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name, value in {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": TOKEN,
                        "AWS_DEFAULT_REGION": "eu-central-1"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_REGION", "MEMLANE_API_REGION", "MEMLANE_SIGV4", "MEMLANE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    Verifier.tamper, Verifier.seen = {}, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Verifier)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_signed_request_verifies_with_its_body_and_query(server: str) -> None:
    client = MemlaneClient(server, auth="sigv4", region="us-west-2")
    client.search("demo", "where does alice live", {"app_id": "travel-app", "tenant_id": "alice"})
    client.list_tasks("demo", "travel-app", "alice", limit=5)
    assert [s["ok"] for s in Verifier.seen] == [True, True], Verifier.seen
    assert Verifier.seen[0]["why"] == "us-west-2"


def test_a_tampered_body_fails_verification(server: str) -> None:
    Verifier.tamper = {"body": b'{"query": "everything", "scope": {"app_id": "travel-app", "tenant_id": "bob"}}'}
    client = MemlaneClient(server, auth="sigv4", region="us-west-2")
    with pytest.raises(ApiError) as refused:
        client.search("demo", "where does alice live", {"app_id": "travel-app", "tenant_id": "alice"})
    assert refused.value.status == 403
    assert Verifier.seen[-1]["why"] == "signature mismatch"


def test_a_tampered_query_fails_verification(server: str) -> None:
    client = MemlaneClient(server, auth="sigv4", region="us-west-2")
    Verifier.tamper = {"path": "/v1/stores/demo/tasks?app_id=travel-app&tenant_id=bob"}
    with pytest.raises(ApiError):
        client.list_tasks("demo", "travel-app", "alice")
    assert Verifier.seen[-1]["why"] == "signature mismatch"


def test_an_unsigned_request_is_refused(server: str) -> None:
    with pytest.raises(ApiError) as refused:
        MemlaneClient(server).list_stores()
    assert refused.value.status == 403


def test_the_region_comes_from_the_api_url_else_the_standard_chain(server: str) -> None:
    assert region_of("https://a1b2c3.execute-api.ap-southeast-2.amazonaws.com") == "ap-southeast-2"
    assert region_of("https://memory.example.com") is None
    MemlaneClient(server, auth="sigv4").list_stores()
    assert Verifier.seen[-1]["why"] == "eu-central-1"  # AWS_DEFAULT_REGION: botocore's chain


def test_the_cli_signs_with_sigv4(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--url", server, "--sigv4", "--json", "stores", "list"]) == 0
    assert Verifier.seen[-1]["ok"] is True
    assert json.loads(capsys.readouterr().out) == {"stores": []}  # what the server answered, unchanged


def test_api_key_mode_stays(server: str) -> None:
    with pytest.raises(ApiError):  # the verifier refuses what is not signed
        MemlaneClient(server, api_key="ml_secret").list_stores()
    assert Verifier.seen[-1]["auth"] == "Bearer ml_secret"
