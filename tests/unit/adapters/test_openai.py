"""OpenAI-compatible embedder and LLM against a scripted fake of requests.Session (no network)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest
import requests
from pydantic import BaseModel

from memlane.adapters.openai.embedder import OpenAICompatibleEmbedder
from memlane.adapters.openai.llm import OpenAICompatibleLLM
from memlane.domain.errors import DependencyFailed, Retryable
from memlane.ports import Embedder


@dataclass
class FakeResponse:
    status_code: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.body if isinstance(self.body, str) else json.dumps(self.body)

    def json(self) -> Any:
        return json.loads(self.text)

    def iter_content(self, chunk_size: int = 1) -> Iterator[bytes]:  # the client streams, to bound the answer
        data = self.text.encode()
        return (data[at:at + chunk_size] for at in range(0, len(data), chunk_size))

    def close(self) -> None:
        pass


class FakeSession:
    """Answers each POST with the next scripted response (or raises it, if it is an exception)."""

    def __init__(self, *script: FakeResponse | Exception) -> None:
        self.script = list(script)
        self.calls: list[dict[str, Any]] = []

    def post(self, url: str, *, json: Any, headers: dict[str, str], timeout: float,
             stream: bool = False) -> FakeResponse:
        self.calls.append({"url": url, "json": json, "headers": headers, "timeout": timeout, "stream": stream})
        nxt = self.script.pop(0)
        if isinstance(nxt, Exception):
            raise nxt
        return nxt


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def embeddings(*vectors: list[float], order: list[int] | None = None) -> FakeResponse:
    rows = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    if order:
        rows = [rows[i] for i in order]
    return FakeResponse(200, {"object": "list", "data": rows, "model": "m", "usage": {"prompt_tokens": 3}})


def chat(content: str | None) -> FakeResponse:
    return FakeResponse(200, {"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})


# --- embedder -------------------------------------------------------------------------------------


def make_embedder(session: FakeSession, sleeps: Sleeps | None = None, **kw: Any) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder("http://llm.local/v1/", "nomic-embed-text", session=session,  # type: ignore[arg-type]
                                    sleep=sleeps if sleeps is not None else Sleeps(), **kw)


def test_a_deadline_bounded_view_is_of_the_same_model() -> None:
    """Its identity is probed once per model, not per view (a warm-container trial: every sync request probed)."""
    from memlane.domain.deadline import Deadline
    from memlane.ports import origin

    embedder = make_embedder(FakeSession())
    view = embedder.within(Deadline.never())
    assert view is not embedder and origin(view) is embedder and origin(view.within(Deadline.never())) is embedder


def test_embedder_posts_batches_and_returns_unit_vectors_in_input_order() -> None:
    session = FakeSession(embeddings([3, 4], [0, 2], order=[1, 0]), embeddings([1, 1]))
    embedder = make_embedder(session, batch_size=2, api_key="sk-test")
    vecs = embedder.embed(["a", "b", "c"])
    assert vecs == [[0.6, 0.8], [0.0, 1.0], [pytest.approx(1 / math.sqrt(2)), pytest.approx(1 / math.sqrt(2))]]
    assert [c["json"]["input"] for c in session.calls] == [["a", "b"], ["c"]]
    assert session.calls[0]["url"] == "http://llm.local/v1/embeddings"
    assert session.calls[0]["json"]["model"] == "nomic-embed-text"
    assert session.calls[0]["headers"]["Authorization"] == "Bearer sk-test"
    assert "dimensions" not in session.calls[0]["json"]
    assert isinstance(embedder, Embedder) and embedder.dim == 2 and embedder.name == "nomic-embed-text"


def test_embedder_learns_its_dimension_with_a_probe_when_asked_first() -> None:
    session = FakeSession(embeddings([1, 0, 0]))
    assert make_embedder(session).dim == 3
    assert len(session.calls) == 1


def test_embedder_retries_429_with_backoff_then_succeeds() -> None:
    sleeps = Sleeps()
    session = FakeSession(FakeResponse(429, {"error": "slow down"}), FakeResponse(503, "busy", {"Retry-After": "2"}),
                          embeddings([1, 0]))
    assert make_embedder(session, sleeps).embed(["a"]) == [[1.0, 0.0]]
    assert len(session.calls) == 3
    assert len(sleeps) == 2 and sleeps[1] == 2.0  # the server's Retry-After wins over our jitter


def test_embedder_retries_connection_errors() -> None:
    session = FakeSession(requests.ConnectionError("refused"), embeddings([0, 1]))
    assert make_embedder(session).embed(["a"]) == [[0.0, 1.0]]


def test_embedder_gives_up_as_retryable_after_bounded_attempts() -> None:
    sleeps = Sleeps()
    session = FakeSession(*[FakeResponse(500, "oops")] * 3)
    with pytest.raises(Retryable):
        make_embedder(session, sleeps, max_attempts=3).embed(["a"])
    assert len(session.calls) == 3 and len(sleeps) == 2


def test_embedder_maps_other_4xx_to_dependency_failed_without_retrying() -> None:
    session = FakeSession(FakeResponse(401, {"error": {"message": "bad key"}}))
    with pytest.raises(DependencyFailed) as err:
        make_embedder(session).embed(["a"])
    assert err.value.details["status"] == 401 and len(session.calls) == 1


def test_embedder_refuses_a_dimension_other_than_configured() -> None:
    with pytest.raises(DependencyFailed):
        make_embedder(FakeSession(embeddings([1, 0, 0])), dim=2).embed(["a"])


def test_embedder_can_request_a_dimension() -> None:
    session = FakeSession(embeddings([1, 0]))
    make_embedder(session, dim=2, request_dimensions=True).embed(["a"])
    assert session.calls[0]["json"]["dimensions"] == 2


def test_embedder_rejects_a_malformed_answer() -> None:
    with pytest.raises(DependencyFailed):
        make_embedder(FakeSession(FakeResponse(200, {"nope": []}))).embed(["a"])
    with pytest.raises(DependencyFailed):
        make_embedder(FakeSession(FakeResponse(200, "<html>gateway</html>"))).embed(["a"])


# --- LLM ------------------------------------------------------------------------------------------


class Fact(BaseModel):
    text: str
    confidence: float


class Facts(BaseModel):
    facts: list[Fact]


def make_llm(session: FakeSession, **kw: Any) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM("http://llm.local/v1", "llama3.1", session=session, sleep=Sleeps(), **kw)  # type: ignore[arg-type]


GOOD = json.dumps({"facts": [{"text": "Alice likes tea", "confidence": 0.9}]})


def test_llm_asks_for_json_with_the_schema_and_validates_the_answer() -> None:
    session = FakeSession(chat(GOOD))
    result = make_llm(session).generate(system="Extract facts.", prompt="Alice: I love tea", response_model=Facts)
    assert result == Facts(facts=[Fact(text="Alice likes tea", confidence=0.9)])
    body = session.calls[0]["json"]
    assert session.calls[0]["url"] == "http://llm.local/v1/chat/completions"
    assert body["response_format"] == {"type": "json_object"} and body["model"] == "llama3.1"
    system = body["messages"][0]["content"]
    assert system.startswith("Extract facts.")
    assert json.dumps(Facts.model_json_schema(), separators=(",", ":")) in system
    assert body["messages"][1] == {"role": "user", "content": "Alice: I love tea"}


def test_llm_repairs_an_invalid_answer_on_the_second_try() -> None:
    bad = json.dumps({"facts": [{"text": "Alice likes tea", "confidence": "very"}]})
    session = FakeSession(chat(bad), chat("```json\n" + GOOD + "\n```"))
    result = make_llm(session).generate(system="s", prompt="p", response_model=Facts)
    assert result.facts[0].confidence == 0.9
    repair = session.calls[1]["json"]["messages"]
    assert repair[2] == {"role": "assistant", "content": bad}
    assert repair[3]["role"] == "user" and "facts.0.confidence" in repair[3]["content"]


def test_llm_gives_up_with_dependency_failed_when_repairs_are_exhausted() -> None:
    session = FakeSession(chat("not json at all"), chat('{"facts": "nope"}'), chat(GOOD))
    with pytest.raises(DependencyFailed) as err:
        make_llm(session, max_repairs=1).generate(system="s", prompt="p", response_model=Facts)
    assert err.value.code == "llm_invalid_output" and len(session.calls) == 2


def test_llm_treats_a_null_answer_as_invalid() -> None:
    session = FakeSession(chat(None), chat(GOOD))
    assert make_llm(session).generate(system="s", prompt="p", response_model=Facts).facts


def test_llm_retries_429_then_succeeds() -> None:
    session = FakeSession(FakeResponse(429, "rate limited"), chat(GOOD))
    assert make_llm(session).generate(system="s", prompt="p", response_model=Facts).facts[0].text == "Alice likes tea"
