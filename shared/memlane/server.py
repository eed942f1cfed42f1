"""`memlane serve`: the API over real HTTP on the embedded adapters, with the extraction worker.

Each HTTP request is turned into the API Gateway HTTP API (v2) event the Lambdas receive and
handed to the same resolver, so local mode runs exactly the routes that AWS runs.
"""

from __future__ import annotations

import base64
import io
import ipaddress
import json
import logging
import queue
import re
import selectors
import socket
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .api.app import build_api
from .api.app import Api
from .bootstrap import LocalService, auth_mode, build_local
from .config import Settings
from .domain.limits import MAX_BODY_BYTES
from .services import dream
from .services.access import AuthMode

log = logging.getLogger("memlane.server")
MAX_HEADER_BYTES = 65_536  # request line and headers together
LINGER_BYTES = 262_144  # read and dropped after an early answer, so the client sees it
_DIGITS = re.compile(r"[0-9]{1,15}")


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

        def __init__(self, sock: socket.socket, client_address: Any, rfile: io.BufferedReader, server: Any):
            # Not BaseRequestHandler.__init__: the server drives one request at a time and keeps the socket.
            self.request = self.connection = sock
            self.client_address, self.server, self.rfile = client_address, server, rfile
            self.wfile = _SocketWriter(sock)
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
            try:
                if length and self.expects_continue:  # only now: a refused client never sends its body
                    self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = self.rfile.read(length) if length else b""
            except TimeoutError:
                return self._refuse(408, "request_timeout", "the body did not arrive in time")
            if len(body) < length:
                self.close_connection = True  # the client went away mid-body: nobody to answer
                return
            event = http_event(self.command, self.path, headers, body, self.client_address[0])
            try:
                result = api.resolve(event, _LambdaContext())
            except Exception:  # noqa: BLE001 — the last boundary: answer 500, never drop the connection
                log.exception("unhandled error on %s %s", self.command, self.path)
                return self._refuse(500, "internal_error", "internal error", close=False)
            self._answer(result, close=False)

        def _answer(self, result: dict[str, Any], *, close: bool) -> None:
            payload = result.get("body") or ""
            data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
            self._reply(result["statusCode"], result.get("headers") or {}, data, close=close)

        def _refuse(self, status: int, code: str, message: str, *, close: bool = True) -> None:
            body = json.dumps({"error": {"code": code, "message": message}}).encode()
            if self.command and hasattr(self, "headers") and status != 500:  # a parsed request is audited
                event = http_event(self.command, self.path, dict(self.headers), b"", self.client_address[0])
                api.record_refusal(event, {"statusCode": status, "body": body.decode()})
            self._reply(status, {"Content-Type": "application/json"}, body, close=close)

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

        def log_message(self, fmt: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), fmt % args)

    return Handler


class _SocketWriter(io.BufferedIOBase):
    """Writes straight to the socket (sendall: no partial writes)."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class _BufferedSocket(io.RawIOBase):
    """The bytes the accept loop already read, then the socket. `draining` stops at what is buffered."""

    def __init__(self, sock: socket.socket, prefix: bytes):
        self._sock, self._prefix, self.draining = sock, prefix, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n], self._prefix = self._prefix[:n], self._prefix[n:]
            return n
        return 0 if self.draining else self._sock.recv_into(buffer)


class _Connection:
    __slots__ = ("sock", "address", "buffer", "deadline")

    def __init__(self, sock: socket.socket, address: Any, deadline: float):
        self.sock, self.address, self.buffer, self.deadline = sock, address, b"", deadline


class BoundedHTTPServer:
    """An HTTP/1.1 server with a fixed pool of worker threads.

    One thread accepts connections and reads their headers (non-blocking, under a deadline); only a
    request whose headers are complete is handed to a worker, so idle, slow or stalled connections hold
    no thread. A worker reads the body under a socket timeout and answers; a kept-alive connection goes
    back to the accept thread between requests. When every worker is busy and the queue in front of them
    is full, the answer is an immediate 503 with Retry-After, never another thread.
    """

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, workers: int = 16,
                 queue_size: int = 64, max_connections: int = 512, io_timeout: float = 10.0,
                 header_timeout: float = 10.0, keepalive_timeout: float = 15.0):
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.create_server(address, family=family, backlog=128)
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self.handler, self.workers = handler, workers
        self.max_connections, self.io_timeout = max_connections, io_timeout
        self.header_timeout, self.keepalive_timeout = header_timeout, keepalive_timeout
        self._jobs: queue.Queue[_Connection | None] = queue.Queue(queue_size)
        self._returned: queue.SimpleQueue[_Connection] = queue.SimpleQueue()
        self._waiting: dict[socket.socket, _Connection] = {}  # connections the accept thread watches
        self._open = 0
        self.active = 0  # workers serving a request now
        self._open_lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- accept thread --------------------------------------------------------------------------
    def serve_forever(self) -> None:
        self._threads = [threading.Thread(target=self._work, name=f"memlane-http-{i}", daemon=True)
                         for i in range(self.workers)]
        for thread in self._threads:
            thread.start()
        selector = selectors.DefaultSelector()
        selector.register(self.socket, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.25):
                    if key.fileobj is self.socket:
                        self._accept(selector)
                    elif key.fileobj is self._wake_r:
                        self._drain_wakeups()
                    else:
                        self._read_headers(selector, key.data)
                while True:
                    try:
                        conn = self._returned.get_nowait()
                    except queue.Empty:
                        break
                    self._watch(selector, conn)
                self._expire(selector)
        finally:
            for conn in list(self._waiting.values()):
                self._forget(selector, conn)
                self._close(conn)
            for _ in self._threads:
                self._jobs.put(None)
            for thread in self._threads:
                thread.join(self.io_timeout + 5)
            selector.close()
            self._stopped.set()

    def _accept(self, selector: selectors.BaseSelector) -> None:
        while True:
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # EMFILE and the like: the socket stays readable, so do not spin
                log.error("accept failed: %s", error)
                time.sleep(0.05)
                return
            conn = _Connection(sock, address, time.monotonic() + self.header_timeout)
            with self._open_lock:
                self._open += 1
                over = self._open > self.max_connections
            if over:
                self._busy(conn)
            else:
                self._watch(selector, conn)

    def _watch(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        conn.sock.setblocking(False)
        if b"\r\n\r\n" in conn.buffer:  # a pipelined request is already here
            self._dispatch(conn)
            return
        self._waiting[conn.sock] = conn
        selector.register(conn.sock, selectors.EVENT_READ, conn)

    def _forget(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        self._waiting.pop(conn.sock, None)
        try:
            selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass

    def _read_headers(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._forget(selector, conn)
            self._close(conn)
            return
        conn.buffer += data
        if b"\r\n\r\n" in conn.buffer:
            self._forget(selector, conn)
            self._dispatch(conn)
        elif len(conn.buffer) > MAX_HEADER_BYTES:
            self._forget(selector, conn)
            self._quick_refusal(conn, 431, "request_header_fields_too_large",
                                f"headers exceed {MAX_HEADER_BYTES} bytes")

    def _dispatch(self, conn: _Connection) -> None:
        try:
            self._jobs.put_nowait(conn)
        except queue.Full:
            self._busy(conn)

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for conn in [c for c in self._waiting.values() if c.deadline < now]:
            self._forget(selector, conn)
            if conn.buffer:  # stopped in the middle of its headers
                self._quick_refusal(conn, 408, "request_timeout", "the request headers did not arrive in time")
            else:  # an idle kept-alive connection
                self._close(conn)

    def _busy(self, conn: _Connection) -> None:
        self._quick_refusal(conn, 503, "server_busy", "the server is at capacity: retry shortly",
                            {"Retry-After": "1"})

    def _quick_refusal(self, conn: _Connection, status: int, code: str, message: str,
                       headers: dict[str, str] | None = None) -> None:
        """An answer from the accept thread: small, non-blocking, best effort, then close."""
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Content-Type: application/json",
                 f"Content-Length: {len(body)}", "Connection: close",
                 *(f"{k}: {v}" for k, v in (headers or {}).items())]
        try:
            conn.sock.send(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        except OSError:
            pass
        self._close(conn)

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    # -- workers --------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            conn = self._jobs.get()
            if conn is None:
                return
            with self._open_lock:
                self.active += 1
            try:
                keep = self._serve_one(conn)
            except Exception:  # noqa: BLE001 — a worker outlives any one connection
                log.exception("connection from %s failed", conn.address)
                keep = False
            finally:
                with self._open_lock:
                    self.active -= 1
            if keep and not self._stop.is_set():
                conn.deadline = time.monotonic() + self.keepalive_timeout
                self._returned.put(conn)
                try:
                    self._wake_w.send(b"\0")
                except OSError:
                    pass
            else:
                self._linger_close(conn)

    def _serve_one(self, conn: _Connection) -> bool:
        """Handle the request at the head of the buffer; True when the connection stays open."""
        conn.sock.settimeout(self.io_timeout)
        raw = _BufferedSocket(conn.sock, conn.buffer)
        rfile = io.BufferedReader(raw)
        handler = self.handler(conn.sock, conn.address, rfile, self)  # type: ignore[call-arg]
        try:
            handler.handle_one_request()
        except (ConnectionError, TimeoutError):
            return False
        if handler.close_connection:
            return False
        raw.draining = True
        conn.buffer = rfile.read()  # a pipelined next request, if the client sent one already
        return True

    def _linger_close(self, conn: _Connection) -> None:
        """Close after an answer the client may still be sending a body to: stop writing, read (and drop)
        a little of what is in flight, so the answer is not lost to a reset; bounded in time and bytes."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
            conn.sock.settimeout(0.5)
            deadline, dropped = time.monotonic() + 1.0, 0
            while time.monotonic() < deadline and dropped < LINGER_BYTES:
                chunk = conn.sock.recv(65536)
                if not chunk:
                    break
                dropped += len(chunk)
        except OSError:
            pass
        self._close(conn)

    def _close(self, conn: _Connection) -> None:
        try:
            conn.sock.close()
        finally:
            with self._open_lock:
                self._open -= 1

    @property
    def queued(self) -> int:
        """Requests whose headers are in, waiting for a worker."""
        return self._jobs.qsize()

    # -- lifecycle ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()
        self._wake_r.close()
        self._wake_w.close()


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


class LocalServer:
    """The HTTP server, the worker and the dream scheduler of one local service."""

    def __init__(self, service: LocalService, host: str, port: int, *, auth: AuthMode = "none",
                 audit_retention_days: int = 30, dream_interval: float = 0, api: Api | None = None, **http: Any):
        if auth == "none" and not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
            raise SystemExit(f"refusing to serve {host} without authentication: create an API key first "
                             "(memlane keys create ...) or bind to 127.0.0.1")
        # One API for every server thread: it keeps no request state outside the calling thread.
        api = api or build_api(service.deps, auth=auth, audit_retention_days=audit_retention_days)
        self.service = service
        self.dreams = DreamScheduler(service, dream_interval) if dream_interval > 0 else None
        # `http` tunes the server: workers, queue_size, max_connections, io_timeout, header_timeout,
        # keepalive_timeout (see BoundedHTTPServer).
        self.httpd = BoundedHTTPServer((host, port), make_handler(api, auth), **http)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self.service.start_worker()
        if self.dreams:
            self.dreams.start()
        try:
            self.httpd.serve_forever()
        finally:
            if self.dreams:
                self.dreams.stop()
            self.service.close()
            self.httpd.server_close()

    def shutdown(self) -> None:
        self.httpd.shutdown()


def serve(settings: Settings) -> None:
    service = build_local(settings)
    auth = auth_mode(settings, service.deps)
    server = LocalServer(service, settings.host, settings.port, auth=auth,
                         audit_retention_days=settings.audit_retention_days,
                         dream_interval=settings.dream_interval_seconds)
    print(f"memlane {server.url} (data in {settings.data_dir.resolve()}, embedder {service.deps.embedder.name})",
          flush=True)
    if auth == "none":
        print("no API keys configured: serving loopback only, every local caller is admin "
              "(create one with `memlane keys create`)", flush=True)
    else:
        print(f"authentication: {auth}", flush=True)
    server.serve_forever()
