"""Issue 16: model calls are bounded. Bedrock clients get explicit connect/read timeouts and no SDK retries
of their own (the adapters retry a bounded number of times); under a request's deadline every attempt's
read timeout fits what is left, no retry starts once the budget is spent, and the OpenAI-compatible
client does the same with its per-request timeout. Fake clocks and clients: nothing sleeps."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from pydantic import BaseModel

from memlane import bootstrap
from memlane.adapters.bedrock.llm import BedrockLLM
from memlane.config import Settings
from memlane.domain.deadline import Deadline
from memlane.domain.errors import DeadlineExceeded
from tests.unit.adapters.test_openai import FakeResponse, FakeSession, Sleeps


class Answer(BaseModel):
    subject: str


def converse_answer() -> dict[str, Any]:
    return {"output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t1", "name": "Answer", "input": {"subject": "Alice"}}}]}},
        "stopReason": "tool_use"}


class Clock:
    """A monotonic clock the fake calls move forward."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeRuntime:
    """bedrock-runtime as built for one read timeout: each converse takes `took` seconds on `clock`, then
    answers or raises the next scripted error."""

    def __init__(self, config: Any, clock: Clock, took: float, script: list[Exception], built: list[Any]) -> None:
        self.config, self.clock, self.took, self.script = config, clock, took, script
        built.append(config)

    def converse(self, **_: Any) -> dict[str, Any]:
        self.clock.now += min(self.took, self.config.read_timeout)
        if self.script:
            raise self.script.pop(0)
        return converse_answer()


@pytest.fixture()
def fake_boto(monkeypatch: pytest.MonkeyPatch):
    """boto3.client replaced: records the Config of every client the composition root builds."""
    clock, built, script = Clock(), [], []
    state = {"took": 1.0}

    def client(service: str, *, region_name: str | None = None, config: Any = None, **_: Any) -> Any:
        return FakeRuntime(config, clock, state["took"], script, built)

    monkeypatch.setattr(boto3, "client", client)
    return clock, built, script, state


def test_bedrock_clients_get_explicit_timeouts_and_no_sdk_retries(fake_boto) -> None:
    _, built, _, _ = fake_boto
    llm = bootstrap._llm(Settings.from_env(env={}, llm="bedrock", model_connect_timeout_seconds=3,
                                                model_read_timeout_seconds=40))
    assert llm.generate(system="s", prompt="p", response_model=Answer).subject == "Alice"
    [config] = built
    assert (config.connect_timeout, config.read_timeout) == (3, 40)
    assert config.retries == {"max_attempts": 0, "mode": "standard"}  # `calls.call` retries, with backoff


def test_a_bedrock_call_under_a_deadline_reads_no_longer_than_what_is_left(fake_boto) -> None:
    clock, built, _, _ = fake_boto
    llm = bootstrap._llm(Settings.from_env(env={}, llm="bedrock", model_read_timeout_seconds=60))
    bounded = llm.within(Deadline(clock.now + 7.5, clock))

    assert bounded.generate(system="s", prompt="p", response_model=Answer).subject == "Alice"
    llm.generate(system="s", prompt="p", response_model=Answer)  # the unbounded adapter is unchanged
    bounded.generate(system="s", prompt="p", response_model=Answer)  # a client per read timeout, built once
    assert [c.read_timeout for c in built] == [5.0, 60]  # the largest step within 7.5 s; the configured one


def test_a_slow_bedrock_call_ends_with_deadline_exceeded_and_no_retry(fake_boto) -> None:
    clock, built, script, state = fake_boto
    state["took"] = 600.0  # a model that would hang for ten minutes
    script.extend(ReadTimeoutError(endpoint_url="https://bedrock-runtime") for _ in range(10))
    sleeps = Sleeps()
    llm = BedrockLLM("m", region="us-east-1", sleep=sleeps)
    start = clock.now

    with pytest.raises(DeadlineExceeded):
        llm.within(Deadline(clock.now + 12.0, clock)).generate(system="s", prompt="p", response_model=Answer)

    assert clock.now - start <= 12.0  # every attempt read within the budget
    assert sum(sleeps) <= 12.0


def test_bedrock_attempts_are_bounded_without_a_deadline(fake_boto) -> None:
    _, built, script, _ = fake_boto
    script.extend(ReadTimeoutError(endpoint_url="https://bedrock-runtime") for _ in range(10))
    llm = bootstrap._llm(Settings.from_env(env={}, llm="bedrock", model_max_attempts=2))
    llm._sleep = Sleeps()  # noqa: SLF001 — no real backoff in a unit test
    with pytest.raises(Exception) as raised:
        llm.generate(system="s", prompt="p", response_model=Answer)
    assert raised.value.code == "model_unavailable"
    assert len(script) == 8  # two attempts, not botocore's four


# -- OpenAI-compatible ----------------------------------------------------------------------------


def test_openai_calls_under_a_deadline_send_what_is_left_as_their_timeout() -> None:
    from memlane.adapters.openai.llm import OpenAICompatibleLLM

    clock = Clock()
    session = FakeSession(FakeResponse(200, {"choices": [{"message": {"content": '{"subject": "Alice"}'}}]}))
    llm = OpenAICompatibleLLM("http://llm", "m", session=session, timeout=60, connect_timeout=4)

    answer = llm.within(Deadline(clock.now + 9.0, clock)).generate(system="s", prompt="p", response_model=Answer)

    assert answer.subject == "Alice"
    assert session.calls[0]["timeout"] == (4, 9.0)


def test_openai_sends_nothing_once_the_deadline_has_passed() -> None:
    from memlane.adapters.openai.embedder import OpenAICompatibleEmbedder

    clock = Clock()
    session = FakeSession()
    embedder = OpenAICompatibleEmbedder("http://e", "m", dim=3, session=session)
    with pytest.raises(DeadlineExceeded):
        embedder.within(Deadline(clock.now, clock)).embed(["x"])
    assert session.calls == []
