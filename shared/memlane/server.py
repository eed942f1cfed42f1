"""`memlane serve`: the API over real HTTP on the embedded adapters, with the extraction worker — or, over
shared engines (a DynamoDB-compatible table, OpenSearch, an SQS-compatible queue), one of several servers, with
or without a worker of its own (memlane/worker.py; docs/deploy.md#scaling-out-without-aws).

Each HTTP request is turned into the API Gateway HTTP API (v2) event the Lambdas receive and
handed to the same resolver, so local mode runs exactly the routes that AWS runs.
"""

from __future__ import annotations

import base64
import io
import ipaddress
import json
import logging
import re
import signal
import socket
import threading
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .api.app import build_api
from .api.app import Api
from .api.audit import operation
from . import bootstrap, process
from .bootstrap import DataDirInUse, LocalService, Misconfigured, auth_mode, build_local
from .domain.schema import SchemaMismatch
from .config import Settings
from .domain.limits import MAX_BODY_BYTES
from .httpd import BoundedHTTPServer, SocketWriter
from .services import audit, dream, sweep
from .services.access import AuthMode
from .services.deps import Deps
from .worker import QueueWorker

log = logging.getLogger("memlane.server")
_DIGITS = re.compile(r"[0-9]{1,15}")


class _LambdaContext:
    function_name = "memlane-local"
    memory_limit_in_mb = 0
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:memlane-local"
    aws_request_id = ""

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def http_event(method: str, raw_path: str, headers: dict[str, str], body: bytes, source_ip: str) -> dict[str, Any]:
    """An API Gateway HTTP API (payload v2.0) event for one HTTP request. Its path is percent-decoded segment by
    segment, as API Gateway decodes an HTTP API's `rawPath`: an id with `@`, `:` or `+` is the same id however a
    client encoded it. A segment holding an encoded `/` stays encoded: no id holds one, and decoded it would route
    the request elsewhere (`st%2Fthreads%2Fr1` read as a thread), so it is refused as an id (400)."""
    parts = urlsplit(raw_path)
    path = "/".join(_decoded(segment) for segment in parts.path.split("/"))
    query: dict[str, list[str]] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        query.setdefault(key, []).append(value)
    # Bytes that are not UTF-8 become lone surrogates, which the body's parser refuses (400): never replaced
    # by U+FFFD and stored as if the caller had sent that.
    text = body.decode("utf-8", errors="surrogateescape")
    request_id = str(uuid.uuid4())
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": parts.query,
        "headers": {k.lower(): v for k, v in headers.items()},
        # API Gateway joins repeated parameters with commas
        "queryStringParameters": {k: ",".join(v) for k, v in query.items()} or None,
        "requestContext": {
            "accountId": "local", "apiId": "local", "domainName": "localhost", "requestId": request_id,
            "routeKey": "$default", "stage": "$default", "time": "", "timeEpoch": 0,
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": source_ip,
                     "userAgent": headers.get("User-Agent", "")},
        },
        "body": text if body else None,
        "isBase64Encoded": False,
    }


def _decoded(segment: str) -> str:
    decoded = unquote(segment, errors="surrogateescape")  # bytes not UTF-8: lone surrogates, which ids refuse
    return segment if "/" in decoded else decoded


def host_allowed(host: str | None, port: int) -> bool:
    """Keyless mode answers only requests addressed to a loopback name with this server's port: a page
    on evil.example whose name was rebound to 127.0.0.1 sends `Host: evil.example` and is refused."""
    if host is None:
        return True  # HTTP/1.0 without Host: no browser sends that
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        given = rest[1:] if rest.startswith(":") else (None if not rest else "bad")
    else:
        name, sep, given_port = host.rpartition(":") if ":" in host else (host, "", "")
        given = given_port if sep else None
    if given is None:
        if port != 80:
            return False
    elif given != str(port):
        return False
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def content_length(values: list[str]) -> int:
    """The one Content-Length of a request: digits only, every copy the same (RFC 9110 §8.6)."""
    found = {v.strip() for value in values for v in value.split(",")}
    if len(found) != 1 or not all(_DIGITS.fullmatch(v) for v in found):
        raise ValueError(f"Content-Length must be one non-negative number, got {', '.join(values)!r}")
    return int(found.pop())


def make_handler(api: Api, auth: AuthMode) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """One request on a connection whose headers are already buffered (see `BoundedHTTPServer`)."""

        server_version = "memlane"
        protocol_version = "HTTP/1.1"
        body_here = 0  # bytes past the headers already buffered (BoundedHTTPServer sets them)
        continued = False  # this request's body was awaited already (100 Continue sent if asked)
        awaited = 0  # set to the body's length when it is to be gathered off the worker (`await_body`)

        def __init__(self, sock: socket.socket, client_address: Any, rfile: io.BufferedReader, server: Any):
            # Not BaseRequestHandler.__init__: the server drives one request at a time and keeps the socket.
            self.request = self.connection = sock
            self.client_address, self.server, self.rfile = client_address, server, rfile
            self.wfile = SocketWriter(sock)
            self.close_connection, self.expects_continue = True, False

        def _serve(self) -> None:
            if self.request_version == "HTTP/0.9":
                return self.send_error(400, "HTTP/0.9 is not served")
            if len(self.headers.get_all("Host") or []) > 1:
                return self._refuse(400, "bad_request", "one Host header, please")
            if auth == "none" and not host_allowed(self.headers.get("Host"), self.server.server_address[1]):
                return self._refuse(421, "host_not_allowed", "this server answers only to a loopback Host "
                                    "(localhost or 127.0.0.1 with its port)")
            if self.headers.get("Transfer-Encoding") is not None:
                # Chunked bodies are refused rather than decoded: every client memlane knows sends a length,
                # and one framing rule leaves no room for smuggling between the two.
                return self._refuse(411, "length_required", "send the body with a Content-Length, not chunked")
            lengths = self.headers.get_all("Content-Length") or []
            try:
                length = content_length(lengths) if lengths else 0
            except ValueError as error:
                return self._refuse(400, "invalid_content_length", str(error))
            if length > MAX_BODY_BYTES:
                return self._refuse(413, "payload_too_large", f"body exceeds {MAX_BODY_BYTES} bytes")
            headers = dict(self.headers)
            if length:
                # The caller is identified from the headers before a byte of the body is read.
                refused = api.refuse_unauthenticated(http_event(self.command, self.path, headers, b"",
                                                                self.client_address[0]))
                if refused is not None:
                    return self._answer(refused, close=True)
            if length > self.body_here:
                # Accepted, its body not all here: the accept thread gathers it (a slow body holds no worker),
                # then a worker serves the whole request. 100 Continue only now: a refused client sends none.
                if self.expects_continue and not self.continued:
                    self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                if not self.server.await_body(length):
                    return self._refuse(503, "server_busy", "the server is at capacity: retry shortly",
                                        headers={"Retry-After": "1"})
                self.awaited = length
                return
            body = self.rfile.read(length) if length else b""
            event = http_event(self.command, self.path, headers, body, self.client_address[0])
            try:
                result = api.resolve(event, _LambdaContext())
            except Exception:  # noqa: BLE001 — the last boundary: answer 500, never drop the connection
                log.exception("unhandled error on %s", operation(self.command, urlsplit(self.path).path))
                return self._refuse(500, "internal_error", "internal error", close=False)
            self._answer(result, close=False)

        def _answer(self, result: dict[str, Any], *, close: bool) -> None:
            payload = result.get("body") or ""
            data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
            self._reply(result["statusCode"], result.get("headers") or {}, data, close=close)

        def _refuse(self, status: int, code: str, message: str, *, close: bool = True,
                    headers: dict[str, str] | None = None) -> None:
            body = json.dumps({"error": {"code": code, "message": message}}).encode()
            if self.command and hasattr(self, "headers") and status != 500:  # a parsed request is audited
                event = http_event(self.command, self.path, dict(self.headers), b"", self.client_address[0])
                api.record_refusal(event, {"statusCode": status, "body": body.decode()})
            self._reply(status, {"Content-Type": "application/json", **(headers or {})}, body, close=close)

        def _reply(self, status: int, headers: dict[str, str], data: bytes, *, close: bool) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("content-length", "connection"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")  # also sets close_connection
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def handle_expect_100(self) -> bool:
            # The stdlib answers `Expect: 100-continue` while parsing; wait until the request is accepted.
            self.expects_continue = True
            return True

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            # The stdlib's own refusals (bad request line, too many headers, ...) in the API's JSON shape.
            if self.request_version == "HTTP/0.9":  # nobody speaks 0.9: answer with a status line anyway
                self.request_version = "HTTP/1.0"
            phrase = HTTPStatus(code).phrase
            self._refuse(code, phrase.lower().replace(" ", "_").replace("-", "_"), message or phrase)

        def __getattr__(self, name: str) -> Any:
            # Every method (TRACE, OPTIONS, ...) reaches the resolver, which answers 404 for unknown
            # routes, instead of the stdlib's bare 501 page.
            if name.startswith("do_"):
                return self._serve
            raise AttributeError(name)

        # The access log names each request's route and status, never its ids or query: a thread id, a tenant, a
        # memory id are what an erasure takes out of the data, and no erasure reaches a log (docs/security.md).
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            path = urlsplit(self.path).path if getattr(self, "path", None) else "/"
            log.info("%s %s %s", self.address_string(), operation(self.command or "-", path), code)

        def log_message(self, fmt: str, *args: Any) -> None:
            # The stdlib's own errors quote the raw request line ("Bad request syntax (...)"): only their kind.
            log.info("%s %s", self.address_string(), fmt % tuple("..." if isinstance(a, str) else a for a in args))

    return Handler


class SharedService:
    """A server over shared engines (DynamoDB-compatible table, OpenSearch, SQS-compatible queue): no data dir,
    so any number run side by side; its worker, when it runs one, consumes the shared queue as
    `memlane worker` does."""

    def __init__(self, deps: Deps, worker: QueueWorker | None, shutdown_grace: float = 20.0):
        self.deps, self.worker, self.shutdown_grace = deps, worker, shutdown_grace

    def start_worker(self) -> None:
        if self.worker:
            self.worker.start()

    def sweep(self) -> "sweep.SweepReport":
        report = sweep.sweep(self.deps)
        report.expired = audit.expire(self.deps)  # a DynamoDB-compatible engine may have no TTL of its own
        return report

    def close(self) -> None:
        if self.worker:
            self.worker.stop(self.shutdown_grace)


def build_shared(settings: Settings) -> SharedService:
    source = bootstrap.build_job_source(settings) if settings.worker else None
    deps = bootstrap.build(settings)
    worker = None
    if source is not None:
        worker = QueueWorker(deps, source, threads=settings.worker_threads,
                             visibility=settings.worker_visibility_seconds, poll=settings.worker_poll_seconds,
                             max_attempts=settings.worker_max_attempts, grace=settings.shutdown_grace_seconds,
                             report_every=settings.worker_report_seconds, say=lambda line: log.info("%s", line))
    return SharedService(deps, worker, settings.shutdown_grace_seconds)


Service = LocalService | SharedService


class DreamScheduler:
    """Runs the dream scheduler every `interval` seconds: due scopes get a dream job on the local queue."""

    def __init__(self, service: Service, interval: float):
        self.service, self.interval = service, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> int:
        return len(dream.schedule(self.service.deps))

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                try:
                    queued = self.tick()
                    if queued:
                        log.info("dream scheduler queued %d dream(s)", queued)
                except Exception:  # noqa: BLE001 — the scheduler must outlive a failed run; the next one retries
                    log.exception("dream scheduler run failed")

        self._thread = threading.Thread(target=loop, name="memlane-dream-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout)


class Sweeper:
    """Runs the sweeper (services/sweep.py) every `interval` seconds: tasks whose job was lost are queued again."""

    def __init__(self, service: Service, interval: float):
        self.service, self.interval = service, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> None:
        try:
            self.service.sweep()
        except Exception:  # noqa: BLE001 — a failed sweep is retried by the next one
            log.exception("sweep failed")

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                self.tick()

        self._thread = threading.Thread(target=loop, name="memlane-sweeper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout)


class LocalServer:
    """The HTTP server, the workers, the sweeper and the dream scheduler of one local service."""

    def __init__(self, service: Service, host: str, port: int, *, auth: AuthMode = "none",
                 audit_retention_days: int = 30, dream_interval: float = 0, sweep_interval: float = 0,
                 api: Api | None = None, **http: Any):
        if auth == "none" and not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
            raise SystemExit(f"refusing to serve {host} without authentication: create an API key first "
                             "(memlane keys create ...) or bind to 127.0.0.1")
        # One API for every server thread: it keeps no request state outside the calling thread.
        api = api or build_api(service.deps, auth=auth, audit_retention_days=audit_retention_days)
        self.service = service
        self.dreams = DreamScheduler(service, dream_interval) if dream_interval > 0 else None
        self.sweeper = Sweeper(service, sweep_interval)
        self.sweep_interval = sweep_interval
        # `http` tunes the server: workers, queue_size, max_connections, io_timeout, header_timeout,
        # keepalive_timeout (see BoundedHTTPServer).
        self.httpd = BoundedHTTPServer((host, port), make_handler(api, auth), **http)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self.sweeper.tick()  # at start: anything left unfinished by the last run is queued again
        self.service.start_worker()
        if self.dreams:
            self.dreams.start()
        if self.sweep_interval > 0:
            self.sweeper.start()
        try:
            self.httpd.serve_forever()
        finally:
            # Stop taking requests (done), then jobs: running ones get the grace period, the rest are
            # handed back to the queue; then the data dir is released for the next owner.
            if self.dreams:
                self.dreams.stop()
            self.sweeper.stop()
            self.service.close()
            self.httpd.server_close()

    def shutdown(self) -> None:
        self.httpd.shutdown()

    def stop_on_signals(self) -> None:
        """SIGTERM / SIGINT stop the server gracefully; a second one stops it at once."""
        def graceful(signum: int, _frame: Any) -> None:
            log.warning("%s: stopping (running jobs get %.0fs)", signal.Signals(signum).name,
                        self.service.shutdown_grace)
            signal.signal(signal.SIGTERM, hurry)
            signal.signal(signal.SIGINT, hurry)
            # shutdown() waits for serve_forever, which runs on this very thread: ask from another one.
            threading.Thread(target=self.shutdown, name="memlane-shutdown", daemon=True).start()

        def hurry(signum: int, _frame: Any) -> None:
            raise KeyboardInterrupt  # leases left behind are released by the next owner at start

        signal.signal(signal.SIGTERM, graceful)
        signal.signal(signal.SIGINT, graceful)


def serve(settings: Settings) -> None:
    service: Service
    try:
        if bootstrap.shared_engines(settings):
            service = build_shared(settings)
        elif not settings.worker:
            raise Misconfigured("without its worker (--no-worker, MEMLANE_WORKER=false) a server needs shared "
                                "engines that `memlane worker` processes reach too, and "
                                + "; ".join(bootstrap.not_shared(settings)))
        else:
            service = build_local(settings)
    except DataDirInUse:
        raise  # the CLI says it and exits 4, as for --local
    except SchemaMismatch as mismatch:  # MEMLANE_SCHEMA_POLICY refused to start: say exactly why
        raise SystemExit(f"memlane serve: {mismatch.message}") from None
    auth = auth_mode(settings, service.deps)
    try:
        server = LocalServer(service, settings.host, settings.port, auth=auth,
                             audit_retention_days=settings.audit_retention_days,
                             dream_interval=settings.dream_interval_seconds,
                             sweep_interval=settings.sweep_interval_seconds)
    except BaseException:
        service.close()
        raise
    if isinstance(service, SharedService):
        runs = f"worker: {settings.worker_threads} thread(s)" if service.worker else "no worker (memlane worker runs jobs)"
        print(f"memlane {server.url} (shared engines: table {settings.table_name}, queue {settings.queue_url}, "
              f"{runs}; embedder {service.deps.embedder.name})", flush=True)
    else:
        print(f"memlane {server.url} (data in {settings.data_dir.resolve()}, embedder {service.deps.embedder.name})",
              flush=True)
    if auth == "none":
        print("no API keys configured: serving loopback only, every local caller is admin "
              "(create one with `memlane keys create`)", flush=True)
    else:
        print(f"authentication: {auth}", flush=True)
    if threading.current_thread() is threading.main_thread():
        server.stop_on_signals()
    process.settle()
    server.serve_forever()
