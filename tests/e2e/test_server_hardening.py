"""The local HTTP server under hostile clients: real sockets against a LocalServer in a thread.

Each test names the attack (issue 15, finding 10): a lying Content-Length, chunked bodies, stalled
connections, a rebinding Host header, and an unauthenticated body that must not even be read."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest

from memlane.api.app import build_api
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.domain.limits import MAX_BODY_BYTES
from memlane.server import LocalServer
from memlane.services import access

pytestmark = pytest.mark.e2e


@contextmanager
def running(tmp_path, *, keyed: bool, wrap: Callable[[Any], Any] | None = None,
            **options) -> Iterator[tuple[LocalServer, dict[str, str]]]:
    """A LocalServer in a thread; `wrap` wraps its API."""
    service = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none"))
    keys = {}
    if keyed:
        keys["admin"] = access.create_api_key(service.deps, "ops", {}, admin=True)
    auth = "api_key" if keyed else "none"
    api = wrap(build_api(service.deps, auth=auth)) if wrap else None
    server = LocalServer(service, "127.0.0.1", 0, auth=auth, api=api, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, keys
    finally:
        server.shutdown()
        thread.join(10)


def connect(server: LocalServer, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(server.httpd.server_address[:2], timeout=timeout)


_readers: "weakref.WeakKeyDictionary[socket.socket, Any]" = weakref.WeakKeyDictionary()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP response: status, headers (lower-case), body. Bytes past it stay for the next call."""
    reader = _readers.setdefault(sock, sock.makefile("rb"))
    status_line = reader.readline()
    if not status_line:
        raise ConnectionError("closed before a response")
    status = int(status_line.split()[1])
    headers = {}
    while (line := reader.readline().decode("latin-1").strip()):
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return status, headers, reader.read(int(headers.get("content-length", "0")))


def request(server: LocalServer, raw: bytes) -> tuple[int, dict[str, str], dict]:
    with connect(server) as sock:
        sock.sendall(raw)
        status, headers, body = read_response(sock)
    return status, headers, json.loads(body) if body else {}


def head(method: str, path: str, port: int, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def port_of(server: LocalServer) -> int:
    return server.httpd.server_address[1]


@pytest.mark.parametrize("lengths", [["-1"], ["abc"], ["12", "13"], ["1e3"], ["+5"], ["99999999999999999999999"]])
def test_a_bad_content_length_is_answered_400_and_the_body_is_not_read(tmp_path, lengths):
    with running(tmp_path, keyed=False) as (server, _):
        raw = head("POST", "/v1/stores", port_of(server), *(f"Content-Length: {v}" for v in lengths))
        with connect(server, timeout=5) as sock:
            # the start of a body that never ends: a server that reads it waits (and times out here)
            sock.sendall(raw + b'{"name": "x' + b"x" * 1000)
            status, headers, body = read_response(sock)
            assert status == 400
            assert json.loads(body)["error"]["code"] == "invalid_content_length"
            assert headers.get("connection") == "close"
            assert _readers[sock].read() == b""  # and the connection is closed: the rest is never read
        # nothing was parsed: no store was created from whatever the body said
        assert request(server, head("GET", "/v1/stores", port_of(server)))[2]["stores"] == []


def test_a_body_over_the_cap_is_refused_before_it_is_read(tmp_path):
    with running(tmp_path, keyed=False) as (server, _):
        status, headers, body = request(server, head("POST", "/v1/stores", port_of(server),
                                                     f"Content-Length: {MAX_BODY_BYTES + 1}"))
        assert status == 413 and body["error"]["code"] == "payload_too_large"


def test_chunked_bodies_are_refused_with_411(tmp_path):
    with running(tmp_path, keyed=False) as (server, _):
        payload = json.dumps({"name": "chunky"}).encode()
        raw = head("POST", "/v1/stores", port_of(server), "Transfer-Encoding: chunked") \
            + f"{len(payload):x}\r\n".encode() + payload + b"\r\n0\r\n\r\n"
        status, _, body = request(server, raw)
        assert status == 411 and body["error"]["code"] == "length_required"
        assert request(server, head("GET", "/v1/stores", port_of(server)))[2]["stores"] == []


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}",
                                  "localhost:1", "10.0.0.1:{port}"])
def test_keyless_mode_refuses_a_foreign_host_header(tmp_path, host):
    """DNS rebinding: a browser page on evil.example resolved to 127.0.0.1 sends Host: evil.example."""
    with running(tmp_path, keyed=False) as (server, _):
        port = port_of(server)
        raw = (f"GET /v1/stores HTTP/1.1\r\nHost: {host.format(port=port)}\r\n\r\n").encode()
        status, _, body = request(server, raw)
        assert status == 421 and body["error"]["code"] == "host_not_allowed"
        for good in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            raw = (f"GET /v1/stores HTTP/1.1\r\nHost: {good}\r\n\r\n").encode()
            assert request(server, raw)[0] == 200
        # the refusal is in the audit log
        status, _, log = request(server, head("GET", "/v1/stores/~global/requests?status=421", port))
        assert status == 200 and [r["operation"] for r in log["requests"]] == ["GET /v1/stores"]


def test_an_unauthenticated_body_is_refused_from_its_headers_without_being_read(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="memlane.audit")
    with running(tmp_path, keyed=True) as (server, keys):
        # a body within the cap, but its bytes never sent: the answer must come from the headers alone
        raw = head("POST", "/v1/stores", port_of(server), f"Content-Length: {MAX_BODY_BYTES}")
        with connect(server, timeout=5) as sock:
            sock.sendall(raw + b'{"name": ')
            status, headers, body = read_response(sock)
        assert status == 401 and json.loads(body)["error"]["code"] == "missing_api_key"
        assert headers.get("connection") == "close"
        wrong = head("POST", "/v1/stores", port_of(server), "Authorization: Bearer ml_nope",
                     f"Content-Length: {MAX_BODY_BYTES}")
        with connect(server, timeout=5) as sock:
            sock.sendall(wrong)
            status, _, body = read_response(sock)
        assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
        # unidentified callers write no audit rows (anyone could fill the log); the refusals reach the server log
        admin = head("GET", "/v1/stores/~global/requests?status=401", port_of(server),
                     f"Authorization: Bearer {keys['admin']}")
        status, _, log = request(server, admin)
        assert status == 200 and log["requests"] == []
        refused = [r.getMessage() for r in caplog.records if r.name == "memlane.audit"]
        assert len([m for m in refused if m.startswith("refused POST /v1/stores: 401")]) == 2, refused


def test_stalled_connections_do_not_stop_a_normal_request(tmp_path):
    with running(tmp_path, keyed=False) as (server, _):
        stalled = []
        try:
            for i in range(300):
                sock = connect(server)
                if i % 2:  # half say nothing at all, half stop in the middle of their headers
                    sock.sendall(b"POST /v1/stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
                stalled.append(sock)
            status, _, body = request(server, head("POST", "/v1/stores", port_of(server), "Content-Length: 16")
                                      + b'{"name": "demo"}')
            assert status == 201 and body["name"] == "demo"
            assert threading.active_count() < 100  # a bounded pool, not a thread per connection
        finally:
            for sock in stalled:
                sock.close()


def test_a_stalled_body_is_timed_out_and_frees_its_worker(tmp_path):
    with running(tmp_path, keyed=False, workers=2, io_timeout=0.5) as (server, _):
        stalled = []
        try:
            for _ in range(4):  # each holds a worker while its body never arrives
                sock = connect(server)
                sock.sendall(head("POST", "/v1/stores", port_of(server), "Content-Length: 100") + b"{")
                stalled.append(sock)
            for sock in stalled:  # every one is answered (408) instead of held for ever
                status, _, _ = read_response(sock)
                assert status == 408
            assert request(server, head("GET", "/v1/stores", port_of(server)))[0] == 200
        finally:
            for sock in stalled:
                sock.close()


class _Held:
    """The service's API, with `GET /health?hold` held until `release` is set: a worker kept busy."""

    def __init__(self, api: Any, release: threading.Event):
        self.api, self.release = api, release

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def resolve(self, event: dict, context: Any) -> dict:
        if event["rawPath"] == "/health" and "hold" in (event["queryStringParameters"] or {}):
            self.release.wait(10)
        return self.api.resolve(event, context)


def test_past_the_pool_and_its_queue_the_answer_is_503_with_retry_after(tmp_path):
    release = threading.Event()
    with running(tmp_path, keyed=False, wrap=lambda api: _Held(api, release), workers=1, queue_size=1) as (server, _):
        held = []
        try:
            # one request on the worker, then one waiting in the queue
            for attr in ("active", "queued"):
                sock = connect(server)
                sock.sendall(head("GET", "/health?hold", port_of(server)))
                held.append(sock)
                deadline = time.monotonic() + 5
                while getattr(server.httpd, attr) < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
            status, headers, body = request(server, head("GET", "/v1/stores", port_of(server)))
            assert status == 503 and body["error"]["code"] == "server_busy" and headers["retry-after"] == "1"
            release.set()
            assert [read_response(sock)[0] for sock in held] == [200, 200]
        finally:
            release.set()
            for sock in held:
                sock.close()


def test_bodies_sent_slowly_hold_no_worker(tmp_path):
    """16 workers, 40 clients each trickling its body a byte at a time (a third asking 100 Continue first): a
    request of another client is answered at once, and each trickled body, once whole, is served."""
    with running(tmp_path, keyed=False) as (server, _):
        port, body = port_of(server), b'{"name": "s00"}'
        slow = []
        try:
            for i in range(40):
                sock = connect(server)
                extra = ["Expect: 100-continue"] if i % 3 == 0 else []
                sock.sendall(head("POST", "/v1/stores", port, f"Content-Length: {len(body)}", *extra))
                if extra:
                    assert read_response(sock)[0] == 100
                slow.append(sock)
            for at in range(len(body) - 1):  # all but the last byte, one at a time
                for sock in slow:
                    sock.sendall(body[at:at + 1])
                t0 = time.monotonic()
                assert request(server, head("GET", "/health", port))[0] == 200
                assert time.monotonic() - t0 < 2
            for i, sock in enumerate(slow):
                sock.sendall(body[-1:])
                status, _, answer = read_response(sock)
                assert status in (201, 409), answer  # one store named s00: the first creates it
            assert server.httpd._body_bytes == 0
        finally:
            for sock in slow:
                sock.close()


def test_tenants_trickling_their_bodies_at_once_each_get_their_own_writes_back(tmp_path):
    """Six tenants' clients at once, each sending explicit writes whose bodies arrive in pieces (every other one
    asking 100 Continue first), while each reads its memories back: every write is stored once, under its
    own tenant, and no tenant reads another's."""
    with running(tmp_path, keyed=False, workers=2) as (server, _):
        port = port_of(server)
        assert request(server, head("POST", "/v1/stores", port, "Content-Length: 16") + b'{"name": "demo"}')[0] == 201
        errors: list[str] = []

        def client(tenant: str) -> None:
            try:
                for n in range(4):
                    body = json.dumps({"scope": {"app_id": "app", "tenant_id": tenant}, "infer": False,
                                       "memories": [{"text": f"{tenant} marker note {n}"}]}).encode()
                    extra = ["Expect: 100-continue"] if n % 2 else []
                    with connect(server) as sock:
                        sock.sendall(head("POST", "/v1/stores/demo/memories", port, f"Content-Length: {len(body)}",
                                          *extra))
                        if extra:
                            assert read_response(sock)[0] == 100
                        for at in range(0, len(body), 40):
                            sock.sendall(body[at:at + 40])
                            time.sleep(0.01)
                        status, _, answer = read_response(sock)
                        assert status in (200, 201), answer
                    mine = f"/v1/stores/demo/memories?app_id=app&tenant_id={tenant}"
                    status, _, page = request(server, head("GET", mine, port))
                    texts = sorted(m["text"] for m in page["memories"])
                    assert status == 200 and texts == [f"{tenant} marker note {i}" for i in range(n + 1)], texts
            except Exception as error:  # noqa: BLE001 — reported by the test thread
                errors.append(f"{tenant}: {error!r}")

        threads = [threading.Thread(target=client, args=(f"t{i}",)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == [] and server.httpd._body_bytes == 0


def test_a_body_trickled_past_the_deadline_is_408_however_steadily_it_comes(tmp_path):
    import select

    with running(tmp_path, keyed=False, workers=1, io_timeout=1.0) as (server, _):
        with connect(server) as sock:
            sock.sendall(head("POST", "/v1/stores", port_of(server), "Content-Length: 100") + b"{")
            t0 = time.monotonic()
            while not select.select([sock], [], [], 0.2)[0] and time.monotonic() - t0 < 5:
                sock.sendall(b" ")  # a byte well within any per-read timeout, the whole body never
            status, _, _ = read_response(sock)
            assert status == 408 and time.monotonic() - t0 < 3
        assert request(server, head("GET", "/health", port_of(server)))[0] == 200


def test_past_the_body_buffer_a_body_is_refused_503(tmp_path):
    with running(tmp_path, keyed=False, body_buffer=150) as (server, _):
        first, second = connect(server), connect(server)
        try:
            first.sendall(head("POST", "/v1/stores", port_of(server), "Content-Length: 100") + b"{")
            deadline = time.monotonic() + 5
            while server.httpd._body_bytes < 100 and time.monotonic() < deadline:
                time.sleep(0.01)
            second.sendall(head("POST", "/v1/stores", port_of(server), "Content-Length: 100") + b"{")
            status, headers, body = read_response(second)
            assert status == 503 and headers["retry-after"] == "1"
            assert json.loads(body)["error"]["code"] == "server_busy"
            first.sendall(b'"name": "demo"}'.ljust(99))
            assert read_response(first)[0] == 201
        finally:
            first.close(), second.close()


def test_keep_alive_serves_several_requests_on_one_connection(tmp_path):
    with running(tmp_path, keyed=False) as (server, _):
        with connect(server) as sock:
            for _ in range(3):
                sock.sendall(head("GET", "/v1/stores", port_of(server)))
                status, _, body = read_response(sock)
                assert status == 200 and json.loads(body) == {"stores": [], "next_cursor": None}
            # two requests in one write (pipelined) are both answered, in order
            sock.sendall(head("GET", "/health", port_of(server)) + head("GET", "/v1/stores", port_of(server)))
            assert json.loads(read_response(sock)[2])["status"] == "ok"
            assert "stores" in json.loads(read_response(sock)[2])


def test_expect_100_continue_is_granted_only_to_an_authenticated_caller(tmp_path):
    """curl sends `Expect: 100-continue` with large bodies: a stranger gets 401, not an invitation."""
    with running(tmp_path, keyed=True) as (server, keys):
        stranger = head("POST", "/v1/stores", port_of(server), "Expect: 100-continue", "Content-Length: 16")
        with connect(server, timeout=5) as sock:
            sock.sendall(stranger)
            assert read_response(sock)[0] == 401
        admin = head("POST", "/v1/stores", port_of(server), "Expect: 100-continue", "Content-Length: 16",
                     f"Authorization: Bearer {keys['admin']}")
        with connect(server, timeout=5) as sock:
            sock.sendall(admin)
            assert read_response(sock)[0] == 100
            sock.sendall(b'{"name": "demo"}')
            status, _, body = read_response(sock)
            assert status == 201 and json.loads(body)["name"] == "demo"


def test_two_host_headers_are_refused(tmp_path):
    with running(tmp_path, keyed=False) as (server, _):
        port = port_of(server)
        raw = f"GET /v1/stores HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\n\r\n".encode()
        status, _, body = request(server, raw)
        assert status == 400 and body["error"]["code"] == "bad_request"


@pytest.mark.parametrize("raw, status, code", [
    (b"BLAH\r\n\r\n", 400, "bad_request"),
    (b"GET /health\r\n\r\n", 400, "bad_request"),  # HTTP/0.9: no status line would come back
    (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n", 431,
     "request_header_fields_too_large"),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431, "request_header_fields_too_large"),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000, 431, "request_header_fields_too_large"),  # and no end
])
def test_malformed_requests_get_a_status_line_and_a_json_code(tmp_path, raw, status, code):
    with running(tmp_path, keyed=False) as (server, _):
        with connect(server) as sock:
            try:
                sock.sendall(raw)
            except OSError:
                pass
            got, _, body = read_response(sock)
        assert got == status and json.loads(body)["error"]["code"] == code


def test_past_the_connection_limit_a_new_connection_gets_503(tmp_path):
    with running(tmp_path, keyed=False, max_connections=5) as (server, _):
        idle = [connect(server) for _ in range(5)]
        try:
            with connect(server) as extra:
                status, headers, body = read_response(extra)  # answered without sending anything
            assert status == 503 and headers["retry-after"] == "1"
            assert json.loads(body)["error"]["code"] == "server_busy"
        finally:
            for sock in idle:
                sock.close()
        deadline = time.monotonic() + 5  # the closed ones are counted out again
        status = 0
        while status != 200 and time.monotonic() < deadline:
            status = request(server, head("GET", "/v1/stores", port_of(server)))[0]
        assert status == 200


LONE = '"\\ud800"'  # a JSON escape of a lone surrogate: no character, no UTF-8 form
NOT_UNICODE = [
    ("POST", "/v1/stores/demo/memories", '{"scope":{"app_id":"a","tenant_id":"t","run_id":"r9"},"request_id":"s-add",'
     '"metadata":{"k":%s},"messages":[{"role":"user","content":"I like green tea"}]}' % LONE),
    ("POST", "/v1/stores/demo/memories", '{"scope":{"app_id":"a","tenant_id":"t"},"infer":false,"memories":'
     '[{"text":"explicit","memory_id":"m2","metadata":{"k":%s}}]}' % LONE),
    ("PATCH", "/v1/stores/demo/memories/m1", '{"app_id":"a","tenant_id":"t","metadata":{"k":%s}}' % LONE),
    ("POST", "/v1/stores/demo/search", '{"query":"tea","scope":{"app_id":"a","tenant_id":"t"},"filters":{"k":%s}}' % LONE),
    ("POST", "/v1/stores/demo/threads", '{"thread_id":"th","scope":{"app_id":"a","tenant_id":"t"},"metadata":{"k":%s}}'
     % LONE),
    ("PUT", "/v1/stores/demo/access-policy", '{"access_policy":"none","scope":{"app_id":"a","tenant_id":"t",'
     '"agent_id":"b","run_id":%s}}' % LONE),
]


@pytest.mark.parametrize("method,path,body", NOT_UNICODE, ids=[f"{m} {p}" for m, p, _ in NOT_UNICODE])
def test_a_lone_surrogate_anywhere_in_a_body_is_400_and_writes_nothing_but_its_audit_row(tmp_path, caplog,
                                                                                          method, path, body):
    """Metadata and filter values are free JSON: a lone surrogate there reached the size check's encode()
    and answered 500 (a batch said `failed`: send it again); a refused scope's audit row was not written."""
    with running(tmp_path, keyed=False) as (server, _):
        port = port_of(server)
        send = lambda m, p, b: request(server, head(m, p, port, f"Content-Length: {len(b)}") + b)  # noqa: E731
        assert send("POST", "/v1/stores", b'{"name":"demo"}')[0] == 201
        assert send("POST", "/v1/stores/demo/memories", b'{"scope":{"app_id":"a","tenant_id":"t"},"infer":false,'
                    b'"memories":[{"text":"seed","memory_id":"m1"}]}')[0] == 201
        with caplog.at_level(logging.ERROR, logger="memlane.audit"):
            status, _, answer = send(method, path, body.encode())
        assert status == 400 and answer["error"]["code"] == "invalid_input", answer
        assert "audit record not written" not in caplog.text
        listed = send("GET", "/v1/stores/demo/memories?app_id=a&tenant_id=t", b"")[2]["memories"]
        assert [(m["memory_id"], m["metadata"]) for m in listed] == [("m1", {})]
        assert send("GET", "/v1/stores/demo/tasks/s-add?app_id=a&tenant_id=t", b"")[0] == 404
        assert send("GET", "/v1/stores/demo/threads/th?app_id=a&tenant_id=t", b"")[0] == 404
        logged = send("GET", "/v1/stores/demo/requests?limit=100", b"")[2]["requests"]
        assert any(r["status"] == 400 and r["operation"].startswith(method) for r in logged)


def test_a_body_that_is_not_utf8_is_400_not_stored_with_replacement_characters(tmp_path):
    with running(tmp_path, keyed=False) as (server, _):
        port = port_of(server)
        assert request(server, head("POST", "/v1/stores", port, "Content-Length: 15") + b'{"name":"demo"}')[0] == 201
        body = b'{"scope":{"app_id":"a","tenant_id":"t"},"text":"caf\xe9 \xff\xfe"}'
        status, _, answer = request(server, head("POST", "/v1/stores/demo/memories", port,
                                                 f"Content-Length: {len(body)}") + body)
        assert status == 400 and answer["error"]["code"] == "invalid_input" and "UTF-8" in answer["error"]["message"]
        messages = request(server, head("GET", "/v1/stores/demo/messages?app_id=a&tenant_id=t&agent_id=__default__"
                                        "&run_id=__default__", port))[2]
        assert messages.get("messages", []) == []


def test_the_access_log_names_routes_not_the_ids_or_queries_of_a_request(tmp_path, caplog) -> None:
    """A deletion trial: the access log kept each request line — tenant, thread and memory ids, which an erasure
    takes out of the data but cannot take out of a log. It names the route's shape and the status."""
    caplog.set_level(logging.INFO)
    with running(tmp_path, keyed=True) as (server, keys):
        port = server.httpd.server_address[1]
        path = "/v1/stores/demo/threads/zqx-thread?app_id=app&tenant_id=zqx-ann"
        assert request(server, head("GET", path, port))[0] == 401  # refused before any grant: logged, not audited
        assert request(server, head("GET", path, port, f"Authorization: Bearer {keys['admin']}"))[0] == 404
        request(server, b"GARBAGE zqx-raw-line\r\n\r\n")
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("memlane"))
    assert "GET /v1/stores/{store}/threads/{id} 404" in logged and "GET /v1/stores/{store}/threads/{id} 401" in logged
    assert "zqx" not in logged
