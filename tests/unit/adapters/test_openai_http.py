"""The OpenAI-compatible JSON client against a real HTTP server on 127.0.0.1 that misbehaves: it drips its
answer, sends more than the cap, or cuts the body short. Every answer is bounded in time and size, and a
broken transfer is a coded, retried failure, not an uncoded exception (500 internal_error)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest
from pydantic import BaseModel

from memlane.adapters.openai.http import JsonClient
from memlane.adapters.openai.llm import OpenAICompatibleLLM
from memlane.domain.deadline import Deadline
from memlane.domain.errors import DeadlineExceeded, DependencyFailed, Retryable
from tests.unit.adapters.test_openai import FakeSession, chat

Reply = Callable[[BaseHTTPRequestHandler], None]

# Each misbehaviour stops on its own well after the bounds asserted, so an unbounded client fails, not hangs.
BOUND_S = 5.0


class Server:
    """Answers every POST with `reply`; counts the requests."""

    def __init__(self, reply: Reply, protocol: str) -> None:
        self.requests = 0
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = protocol

            def handle(self) -> None:
                try:
                    super().handle()
                except OSError:  # the client hung up: what a bounded client does
                    pass

            def do_POST(self) -> None:
                server.requests += 1
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                reply(self)

            def log_message(self, *_: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(reply: Reply, protocol: str = "HTTP/1.1") -> Server:
        started.append(Server(reply, protocol))
        return started[-1]

    yield start
    for server in started:
        server.close()


def client(url: str, **kw: Any) -> JsonClient:
    kw = {"timeout": 1.0, "max_attempts": 1, **kw}
    return JsonClient(url, api_key=None, session=None, sleep=lambda _: None, **kw)


def drip(stop: threading.Event, length: bool) -> Reply:
    """A valid answer, one byte every 0.2 s: 40 bytes take 8 s."""
    answer = b'{"choices": []}'.rjust(40)

    def reply(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if length:
            h.send_header("Content-Length", str(len(answer)))
        h.end_headers()
        for byte in answer:
            if stop.wait(0.2):
                return
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
    return reply


# --- the whole answer is bounded in time ----------------------------------------------------------


@pytest.mark.parametrize("protocol,length", [("HTTP/1.1", True), ("HTTP/1.0", False)],
                         ids=["keep-alive-with-length", "close-delimited"])
def test_a_dripping_answer_times_out_after_the_read_timeout_in_total(serve, protocol: str, length: bool) -> None:
    stop = threading.Event()
    server = serve(drip(stop, length), protocol)
    start = time.monotonic()
    with pytest.raises(Retryable) as raised:
        client(server.url, timeout=1.0, max_attempts=2).post("chat/completions", {})
    elapsed = time.monotonic() - start
    stop.set()
    assert raised.value.code == "model_unavailable"  # as a silent slow model: retried, then unavailable
    assert "Timeout" in raised.value.message
    assert server.requests == 2
    assert elapsed < BOUND_S  # two attempts of 1 s each, not 2 x 8 s of dripping


def test_a_dripping_answer_stops_at_the_callers_deadline(serve) -> None:
    stop = threading.Event()
    server = serve(drip(stop, True))
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        client(server.url, timeout=60.0, max_attempts=3).within(Deadline.after(1.0)).post("embeddings", {})
    stop.set()
    assert time.monotonic() - start < BOUND_S
    assert server.requests == 1


def test_a_dripping_model_sends_the_sync_llm_call_to_its_deadline(serve) -> None:
    stop = threading.Event()
    server = serve(drip(stop, False))
    llm = OpenAICompatibleLLM(server.url, "m", timeout=60.0, sleep=lambda _: None)

    class Answer(BaseModel):
        subject: str

    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):  # the sync route answers 202 and its job finishes the work
        llm.within(Deadline.after(1.0)).generate(system="s", prompt="p", response_model=Answer)
    stop.set()
    assert time.monotonic() - start < BOUND_S


def test_a_prompt_answer_is_read_whole(serve) -> None:
    answer = json.dumps({"data": [{"index": 0, "embedding": [0.5] * 3000}]}).encode()

    def reply(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(answer)))
        h.end_headers()
        h.wfile.write(answer)

    server = serve(reply)
    http = client(server.url)
    assert http.post("embeddings", {}) == json.loads(answer)
    assert http.post("embeddings", {}) == json.loads(answer)  # and the kept-alive connection serves again


# --- the answer's size is capped ------------------------------------------------------------------


def big(length: bool) -> Reply:
    answer = json.dumps({"pad": "x" * 20_000}).encode()

    def reply(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        if length:
            h.send_header("Content-Length", str(len(answer)))
        else:
            h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        if length:
            h.wfile.write(answer)
            return
        for at in range(0, len(answer), 1000):
            piece = answer[at:at + 1000]
            h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        h.wfile.write(b"0\r\n\r\n")
    return reply


@pytest.mark.parametrize("length", [True, False], ids=["declared", "chunked"])
def test_an_answer_larger_than_the_cap_is_a_bad_answer_and_not_retried(serve, length: bool) -> None:
    server = serve(big(length))
    with pytest.raises(DependencyFailed) as raised:
        client(server.url, max_attempts=3, max_answer_bytes=4096).post("chat/completions", {})
    assert raised.value.code == "model_bad_response"
    assert server.requests == 1  # the same model would send the same answer again


def test_the_cap_is_above_a_batch_of_the_widest_embeddings() -> None:
    from memlane.adapters.openai.embedder import DEFAULT_BATCH_SIZE, OpenAICompatibleEmbedder

    def widest(texts: int) -> int:  # 8192 dimensions, every float as long as JSON writes one
        row = {"object": "embedding", "index": 0, "embedding": [-1.2345678901234567e-05] * 8192}
        return texts * (len(json.dumps(row)) + 2) + 50  # the rows, their separators and the envelope

    for batch in (1, DEFAULT_BATCH_SIZE, 512):
        cap = OpenAICompatibleEmbedder("http://e", "m", batch_size=batch)._http._max_answer_bytes  # noqa: SLF001
        assert widest(batch) < cap <= max(16 * 2**20, 2 * widest(batch))


# --- a broken transfer is an unavailable model ----------------------------------------------------


def truncated_chunked(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    h.wfile.write(b'100\r\n{"choices": [')  # a chunk of 256 bytes announced, 13 sent, then the connection closes
    h.wfile.flush()
    h.close_connection = True


def truncated_length(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "100")
    h.end_headers()
    h.wfile.write(b'{"choices": [')
    h.close_connection = True


def undecodable(h: BaseHTTPRequestHandler) -> None:
    body = b"not gzip at all"  # urllib3 ignores garbage after a first good member: this has none
    h.send_response(200)
    h.send_header("Content-Encoding", "gzip")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


@pytest.mark.parametrize("reply", [truncated_chunked, truncated_length, undecodable])
def test_a_broken_transfer_is_retried_then_the_model_is_unavailable(serve, reply: Reply) -> None:
    server = serve(reply)
    with pytest.raises(Retryable) as raised:
        client(server.url, max_attempts=2).post("chat/completions", {})
    assert raised.value.code == "model_unavailable"
    assert server.requests == 2


def test_a_broken_transfer_then_a_good_answer_succeeds(serve) -> None:
    answer = b'{"choices": []}'
    calls = []

    def reply(h: BaseHTTPRequestHandler) -> None:
        calls.append(1)
        if len(calls) == 1:
            return truncated_chunked(h)
        h.send_response(200)
        h.send_header("Content-Length", str(len(answer)))
        h.end_headers()
        h.wfile.write(answer)

    server = serve(reply)
    assert client(server.url, max_attempts=2).post("chat/completions", {}) == {"choices": []}


def test_a_rejected_request_keeps_its_error_text(serve) -> None:
    def reply(h: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"error": {"message": "bad key"}}).encode()
        h.send_response(401)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    server = serve(reply)
    with pytest.raises(DependencyFailed) as raised:
        client(server.url, max_attempts=3).post("chat/completions", {})
    assert raised.value.code == "model_request_rejected" and "bad key" in raised.value.message
    assert server.requests == 1


# --- the repair turn ------------------------------------------------------------------------------


def test_the_repair_turn_echoes_a_bounded_part_of_a_huge_invalid_answer() -> None:
    class Answer(BaseModel):
        subject: str

    huge = json.dumps({"subject": 1, "pad": "x" * 5_000_000})
    session = FakeSession(chat(huge), chat('{"subject": "Alice"}'))
    llm = OpenAICompatibleLLM("http://llm", "m", session=session, sleep=lambda _: None)  # type: ignore[arg-type]
    assert llm.generate(system="s", prompt="p", response_model=Answer).subject == "Alice"
    echoed = session.calls[1]["json"]["messages"][2]
    assert echoed["role"] == "assistant" and len(echoed["content"]) < 40_000
    assert echoed["content"].startswith(huge[:1000])
