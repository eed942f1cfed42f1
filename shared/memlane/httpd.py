"""A bounded HTTP/1.1 front end for the standard library's request handler.

`http.server.ThreadingHTTPServer` starts a thread per connection and blocks it on every read, so
stalled clients hold threads without end. Here one thread accepts connections and gathers their
headers and bodies without blocking; a worker reads no byte from the network.
"""

from __future__ import annotations

import io
import json
import logging
import queue
import selectors
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

log = logging.getLogger("memlane.server")
MAX_HEADER_BYTES = 65_536  # request line and headers together
LINGER_BYTES = 262_144  # read and dropped after an early answer, so the client sees it
BODY_BUFFER_BYTES = 64 * 1024 * 1024  # bodies being gathered, across connections; past it: 503


class SocketWriter(io.BufferedIOBase):
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
    __slots__ = ("sock", "address", "buffer", "deadline", "awaiting", "reserved", "continued")

    def __init__(self, sock: socket.socket, address: Any, deadline: float):
        self.sock, self.address, self.buffer, self.deadline = sock, address, b"", deadline
        self.awaiting = 0  # bytes the buffer must hold before the request goes back to a worker (its body's end)
        self.reserved = 0  # of the body buffer, while awaiting
        self.continued = False  # a worker accepted the request and is waiting for its body (100 Continue sent)


class BoundedHTTPServer:
    """An HTTP/1.1 server with a fixed pool of worker threads.

    One thread accepts connections and reads their headers (non-blocking, under a deadline); only a
    request whose headers are complete is handed to a worker, so idle, slow or stalled connections hold
    no thread. A worker judges the request from its headers (framing, size, caller); one it accepts whose
    body is not all here yet goes back to the accept thread (`await_body`), which gathers the body under
    `io_timeout` and hands the whole request to a worker again. A kept-alive connection goes back to the
    accept thread between requests. When every worker is busy and the queue in front of them is full, or
    the bodies being gathered pass `body_buffer` bytes, the answer is an immediate 503 with Retry-After.
    """

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, workers: int = 16,
                 queue_size: int = 64, max_connections: int = 512, io_timeout: float = 10.0,
                 header_timeout: float = 10.0, keepalive_timeout: float = 15.0,
                 body_buffer: int = BODY_BUFFER_BYTES):
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
        self.body_buffer, self._body_bytes = body_buffer, 0  # bodies being gathered: their most, now
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
                        self._read(selector, key.data)
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
        self._waiting[conn.sock] = conn
        selector.register(conn.sock, selectors.EVENT_READ, conn)
        self._advance(selector, conn)  # a pipelined request, or the body, may be here already

    def _forget(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        self._waiting.pop(conn.sock, None)
        try:
            selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        self._release(conn)

    def _release(self, conn: _Connection) -> None:
        """Its room in the body buffer, once its body is here or will never be."""
        if conn.reserved:
            with self._open_lock:
                self._body_bytes -= conn.reserved
            conn.reserved = 0

    def _read(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
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
        self._advance(selector, conn)

    def _advance(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        """To a worker once what it waits for is here: the headers, or the body of a request it accepted."""
        if conn.awaiting:
            if len(conn.buffer) >= conn.awaiting:
                self._forget(selector, conn)
                self._dispatch(conn)
        elif b"\r\n\r\n" in conn.buffer:
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
            if conn.awaiting:
                self._quick_refusal(conn, 408, "request_timeout", "the body did not arrive in time")
            elif conn.buffer:  # stopped in the middle of its headers
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
                if not conn.awaiting:  # an awaited body has its own deadline
                    conn.deadline = time.monotonic() + self.keepalive_timeout
                self._returned.put(conn)
                try:
                    self._wake_w.send(b"\0")
                except OSError:
                    pass
            else:
                self._linger_close(conn)

    def await_body(self, length: int) -> bool:
        """Room in the body buffer for a body a handler accepted but does not hold all of (False: full, answer
        503). The handler then sets its `awaited` to the length and returns: the request comes back to a worker
        once the accept thread has gathered the body."""
        with self._open_lock:
            if self._body_bytes + length > self.body_buffer:
                return False
            self._body_bytes += length
        return True

    def _serve_one(self, conn: _Connection) -> bool:
        """Handle the request at the head of the buffer; True when the connection stays open."""
        conn.sock.settimeout(self.io_timeout)
        raw = _BufferedSocket(conn.sock, conn.buffer)
        raw.draining = True  # the headers, and the body when the handler reads one, are in the buffer
        rfile = io.BufferedReader(raw)
        handler = self.handler(conn.sock, conn.address, rfile, self)  # type: ignore[call-arg]
        head = conn.buffer.find(b"\r\n\r\n") + 4
        handler.body_here, handler.continued = len(conn.buffer) - head, conn.continued
        try:
            handler.handle_one_request()
        except (ConnectionError, TimeoutError):
            return False
        finally:
            conn.reserved = getattr(handler, "awaited", 0)  # released once the body is here or never will be
        if conn.reserved:  # accepted, its body still on the way: the accept thread gathers it
            conn.awaiting, conn.continued = head + conn.reserved, True
            conn.deadline = time.monotonic() + self.io_timeout
            return True
        if handler.close_connection:
            return False
        conn.buffer = rfile.read()  # a pipelined next request, if the client sent one already
        conn.awaiting, conn.continued = 0, False
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
        self._release(conn)
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
