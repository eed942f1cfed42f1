"""The created OpenSearch domain's endpoint, as the functions reach it: HTTPS, every request SigV4-signed.

An HTTPS server on loopback that does what Amazon OpenSearch Service does in front of the engine: it checks
each request's SigV4 signature with botocore (the access key must be one STS issued in the rehearsal, the
signature must match the request as received, ``x-amz-content-sha256`` must be the body's hash, the scope must
name service ``es`` and the stack's Region), asks the IAM judge whether the signer may call ``es:ESHttp<Method>``
on the path, and only then forwards the request to the real engine (scripts/engines.sh) with the engine's
own login. The default stack's domain has no fine-grained access control, so an allowed caller reaches the
engine as its one user, as on AWS.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import re
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
                   r"/aws4_request, ?SignedHeaders=(?P<signed>[^,]+), ?Signature=(?P<signature>[0-9a-f]{64})")
_HOP = {"host", "authorization", "connection", "content-length", "transfer-encoding", "accept-encoding"}


@dataclass
class Refusal:
    method: str
    path: str
    reason: str


@dataclass
class StandIn:
    """`secrets(access_key) -> (secret, token) | None`; `authorize(access_key, method, path) -> bool`."""

    engine_url: str
    region: str
    secrets: Callable[[str], tuple[str, str | None] | None]
    authorize: Callable[[str, str, str], bool]
    directory: Path
    refusals: list[Refusal] = field(default_factory=list)
    requests: int = 0

    def start(self) -> None:
        self.ca_file = _certificate(self.directory)
        engine = urlparse(self.engine_url)
        self._engine = f"{engine.scheme}://{engine.hostname}:{engine.port}"
        self._login = (engine.username or "", engine.password or "") if engine.username else None
        self._session = requests.Session()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, headers, answer = standin.handle(self.command, self.path, dict(self.headers.items()), body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer)

            do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.directory / "standin.pem", self.directory / "standin.key")
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:  # the domain's DomainEndpoint: host[:port], no scheme
        return f"localhost:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        self.requests += 1
        lowered = {k.lower(): v for k, v in headers.items()}
        problem, key = self._check_signature(method, path, lowered, body)
        if problem:
            self.refusals.append(Refusal(method, path, problem))
            return 403, {"content-type": "application/json"}, b'{"message":"' + problem.encode() + b'"}'
        if not self.authorize(key, method, path.split("?", 1)[0]):
            self.refusals.append(Refusal(method, path, f"{key} may not {method} {path} (IAM)"))
            return 403, {"content-type": "application/json"}, b'{"Message":"User is not authorized to perform this action"}'
        forward = {k: v for k, v in headers.items() if k.lower() not in _HOP and not k.lower().startswith("x-amz-")}
        response = self._session.request(method, self._engine + path, data=body, headers=forward, auth=self._login,
                                         timeout=60, stream=True)
        answer = response.raw.read(decode_content=False)
        keep = {k: v for k, v in response.headers.items() if k.lower() in ("content-type", "content-encoding")}
        return response.status_code, keep, answer

    def _check_signature(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[str, str]:
        match = _AUTH.fullmatch(headers.get("authorization", ""))
        if not match:
            return "missing or malformed SigV4 Authorization header", ""
        key = match["key"]
        if (match["service"], match["region"]) != ("es", self.region):
            return f"credential scope {match['region']}/{match['service']} is not {self.region}/es", key
        stamp = headers.get("x-amz-date", "")
        if not stamp.startswith(match["date"]):
            return "x-amz-date does not match the credential scope's date", key
        signed_at = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        if abs((datetime.datetime.now(datetime.timezone.utc) - signed_at).total_seconds()) > 300:
            return "the signature is more than 5 minutes old", key
        if headers.get("x-amz-content-sha256", hashlib.sha256(body).hexdigest()) != hashlib.sha256(body).hexdigest():
            return "x-amz-content-sha256 is not the hash of the body", key
        secret = self.secrets(key)
        if secret is None:
            return f"unknown access key {key}", key
        signed = match["signed"].split(";")
        if "host" not in signed or "host" not in headers:
            return "the host header is not signed", key
        request = AWSRequest(method=method, url=f"https://{headers['host']}{path}", data=body,
                             headers={h: headers[h] for h in signed if h in headers})
        request.context["timestamp"] = stamp
        signer = SigV4Auth(Credentials(key, secret[0], secret[1]), "es", self.region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if expected != match["signature"]:
            return "the request signature does not match (SigV4)", key
        if secret[1] is not None and headers.get("x-amz-security-token") != secret[1]:
            return "the session token is missing or wrong", key
        return "", key


def _certificate(directory: Path) -> Path:
    """A self-signed certificate for localhost; the returned file is what the functions trust."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "standin.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                              serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption()))
    pem = directory / "standin.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pem
