"""`memlane serve`: the API over real HTTP on the embedded adapters, with the extraction worker.

Each HTTP request is turned into the API Gateway HTTP API (v2) event the Lambdas receive and
handed to the same resolver, so local mode runs exactly the routes that AWS runs.
"""

from __future__ import annotations

import base64
import ipaddress
import socket
import json
import logging
import signal
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .api.app import build_api
from .api.app import Api
from .bootstrap import DataDirInUse, LocalService, auth_mode, build_local
from .config import Settings
from .domain.limits import MAX_BODY_BYTES
from .services import dream
from .services.access import AuthMode

log = logging.getLogger("memlane.server")


class _LambdaContext:
    function_name = "memlane-local"
    memory_limit_in_mb = 0
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:memlane-local"
    aws_request_id = ""

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def http_event(method: str, raw_path: str, headers: dict[str, str], body: bytes, source_ip: str) -> dict[str, Any]:
    """An API Gateway HTTP API (payload v2.0) event for one HTTP request."""
    parts = urlsplit(raw_path)
    query: dict[str, list[str]] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        query.setdefault(key, []).append(value)
    text = body.decode("utf-8", errors="replace")
    request_id = str(uuid.uuid4())
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path,
        "rawQueryString": parts.query,
        "headers": {k.lower(): v for k, v in headers.items()},
        # API Gateway joins repeated parameters with commas
        "queryStringParameters": {k: ",".join(v) for k, v in query.items()} or None,
        "requestContext": {
            "accountId": "local", "apiId": "local", "domainName": "localhost", "requestId": request_id,
            "routeKey": "$default", "stage": "$default", "time": "", "timeEpoch": 0,
            "http": {"method": method, "path": parts.path, "protocol": "HTTP/1.1", "sourceIp": source_ip,
                     "userAgent": headers.get("User-Agent", "")},
        },
        "body": text if body else None,
        "isBase64Encoded": False,
    }


def make_handler(api: Api) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "memlane"
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._reply(413, {"content-type": "application/json"},
                            json.dumps({"error": {"code": "payload_too_large",
                                                  "message": f"body exceeds {MAX_BODY_BYTES} bytes"}}).encode())
                self.close_connection = True
                return
            body = self.rfile.read(length) if length else b""
            event = http_event(self.command, self.path, dict(self.headers), body, self.client_address[0])
            try:
                result = api.resolve(event, _LambdaContext())
            except Exception:  # noqa: BLE001 — the last boundary: answer 500, never drop the connection
                log.exception("unhandled error on %s %s", self.command, self.path)
                self._reply(500, {"content-type": "application/json"},
                            b'{"error": {"code": "internal_error", "message": "internal error"}}')
                return
            payload = result.get("body") or ""
            data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
            self._reply(result["statusCode"], result.get("headers") or {}, data)

        def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("content-length", "connection"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def __getattr__(self, name: str) -> Any:
            # Every method (TRACE, OPTIONS, ...) reaches the resolver, which answers 404 for unknown
            # routes, instead of the stdlib's bare 501 page.
            if name.startswith("do_"):
                return self._serve
            raise AttributeError(name)

        def log_message(self, fmt: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), fmt % args)

    return Handler


class DreamScheduler:
    """Runs the dream scheduler every `interval` seconds: due scopes get a dream job on the local queue."""

    def __init__(self, service: LocalService, interval: float):
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

    def __init__(self, service: LocalService, interval: float):
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

    def __init__(self, service: LocalService, host: str, port: int, *, auth: AuthMode = "none",
                 audit_retention_days: int = 30, dream_interval: float = 0, sweep_interval: float = 0):
        if auth == "none" and not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
            raise SystemExit(f"refusing to serve {host} without authentication: create an API key first "
                             "(memlane keys create ...) or bind to 127.0.0.1")
        # One API for every server thread: it keeps no request state outside the calling thread.
        api = build_api(service.deps, auth=auth, audit_retention_days=audit_retention_days)
        self.service = service
        self.dreams = DreamScheduler(service, dream_interval) if dream_interval > 0 else None
        self.sweeper = Sweeper(service, sweep_interval)
        self.sweep_interval = sweep_interval
        self.httpd = ThreadingHTTPServer((host, port), make_handler(api))
        self.httpd.daemon_threads = True

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
            self.httpd.serve_forever(poll_interval=0.1)  # how soon a stop request is seen
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
    try:
        service = build_local(settings)
    except DataDirInUse as busy:
        raise SystemExit(f"memlane serve: {busy}") from None
    auth = auth_mode(settings, service.deps)
    try:
        server = LocalServer(service, settings.host, settings.port, auth=auth,
                             audit_retention_days=settings.audit_retention_days,
                             dream_interval=settings.dream_interval_seconds,
                             sweep_interval=settings.sweep_interval_seconds)
    except BaseException:
        service.close()
        raise
    print(f"memlane {server.url} (data in {settings.data_dir.resolve()}, embedder {service.deps.embedder.name})",
          flush=True)
    if auth == "none":
        print("no API keys configured: serving loopback only, every local caller is admin "
              "(create one with `memlane keys create`)", flush=True)
    else:
        print(f"authentication: {auth}", flush=True)
    if threading.current_thread() is threading.main_thread():
        server.stop_on_signals()
    server.serve_forever()
