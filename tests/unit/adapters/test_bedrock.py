"""Bedrock embedder, LLM and reranker on real boto3 clients with botocore's Stubber (no network)."""

from __future__ import annotations

import io
import json
import threading
from typing import Any, Iterator

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from pydantic import BaseModel

from memlane.adapters.bedrock.embedder import BedrockEmbedder
from memlane.adapters.bedrock.llm import BedrockLLM
from memlane.adapters.bedrock.reranker import BedrockReranker, model_arn
from memlane.domain.errors import DependencyFailed, InvalidInput, Retryable
from memlane.ports import Embedder

REGION = "us-east-1"
TITAN = "amazon.titan-embed-text-v2:0"
CLAUDE = "anthropic.claude-3-5-haiku-20241022-v1:0"


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def runtime() -> Iterator[tuple[Any, Stubber]]:
    c = client("bedrock-runtime")
    with Stubber(c) as stubber:
        yield c, stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def agent_runtime() -> Iterator[tuple[Any, Stubber]]:
    c = client("bedrock-agent-runtime")
    with Stubber(c) as stubber:
        yield c, stubber
        stubber.assert_no_pending_responses()


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# --- embedder -------------------------------------------------------------------------------------


def titan_response(vector: list[float], tokens: int = 5) -> dict[str, Any]:
    data = json.dumps({"embedding": vector, "inputTextTokenCount": tokens}).encode()
    return {"body": StreamingBody(io.BytesIO(data), len(data)), "contentType": "application/json"}


def titan_request(text: str, dim: int = 256) -> dict[str, Any]:
    return {"modelId": TITAN, "contentType": "application/json", "accept": "application/json",
            "body": json.dumps({"inputText": text, "dimensions": dim, "normalize": True})}


def unit(i: int, dim: int = 256) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(dim)]


def test_embedder_sends_one_titan_request_per_text_and_keeps_the_order(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    for i, text in enumerate(["alpha", "beta"]):
        stubber.add_response("invoke_model", titan_response(unit(i)), titan_request(text))
    embedder = BedrockEmbedder(TITAN, dim=256, client=c, max_workers=1)
    assert embedder.embed(["alpha", "beta"]) == [unit(0), unit(1)]
    assert isinstance(embedder, Embedder) and (embedder.name, embedder.dim) == (TITAN, 256)


def test_embedder_retries_throttling_then_succeeds(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    stubber.add_client_error("invoke_model", service_error_code="ThrottlingException",
                             service_message="Too many requests", http_status_code=429)
    stubber.add_client_error("invoke_model", service_error_code="ModelNotReadyException", http_status_code=429)
    stubber.add_response("invoke_model", titan_response(unit(3)), titan_request("hello"))
    sleeps = Sleeps()
    assert BedrockEmbedder(TITAN, dim=256, client=c, sleep=sleeps).embed(["hello"]) == [unit(3)]
    assert len(sleeps) == 2


def test_embedder_gives_up_as_retryable_after_bounded_attempts(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    for _ in range(3):
        stubber.add_client_error("invoke_model", service_error_code="ServiceUnavailableException", http_status_code=503)
    with pytest.raises(Retryable) as err:
        BedrockEmbedder(TITAN, dim=256, client=c, max_attempts=3, sleep=Sleeps()).embed(["x"])
    assert err.value.details["aws_code"] == "ServiceUnavailableException"


@pytest.mark.parametrize(("code", "status", "error"), [
    ("ValidationException", 400, InvalidInput),
    ("AccessDeniedException", 403, DependencyFailed),
    ("ResourceNotFoundException", 404, DependencyFailed),
])
def test_embedder_translates_other_errors_once_without_retrying(runtime: tuple[Any, Stubber], code: str,
                                                                  status: int, error: type[Exception]) -> None:
    c, stubber = runtime
    stubber.add_client_error("invoke_model", service_error_code=code, http_status_code=status)
    sleeps = Sleeps()
    with pytest.raises(error):
        BedrockEmbedder(TITAN, dim=256, client=c, sleep=sleeps).embed(["x"])
    assert sleeps == []


def test_embedder_rejects_an_unsupported_titan_dimension() -> None:
    with pytest.raises(ValueError):
        BedrockEmbedder(TITAN, dim=384, client=object())


class ConcurrentFakeClient:
    """invoke_model answers from several threads at once; the embedding encodes the text."""

    def __init__(self) -> None:
        self.threads: set[str] = set()
        self.barrier = threading.Barrier(2, timeout=5)

    def invoke_model(self, **kw: Any) -> dict[str, Any]:
        self.threads.add(threading.current_thread().name)
        text = json.loads(kw["body"])["inputText"]
        if text in ("t0", "t1"):  # the first two calls are in flight together
            self.barrier.wait()
        return titan_response(unit(int(text[1:])))


def test_embedder_runs_calls_concurrently_and_maps_results_back_in_order() -> None:
    fake = ConcurrentFakeClient()
    texts = [f"t{i}" for i in range(8)]
    assert BedrockEmbedder(TITAN, dim=256, client=fake, max_workers=4).embed(texts) == [unit(i) for i in range(8)]
    assert len(fake.threads) > 1


# --- LLM ------------------------------------------------------------------------------------------


class Preference(BaseModel):
    subject: str
    likes: list[str]


def converse_tool_answer(tool_input: Any, tool_id: str = "tooluse_1") -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": tool_id, "name": "Preference", "input": tool_input}}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150},
        "metrics": {"latencyMs": 420},
    }


def tool_config() -> dict[str, Any]:
    return {
        "tools": [{"toolSpec": {"name": "Preference", "description": ANY,
                                "inputSchema": {"json": Preference.model_json_schema()}}}],
        "toolChoice": {"tool": {"name": "Preference"}},
    }


def test_llm_forces_a_tool_with_the_response_schema_and_validates_its_input(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    stubber.add_response("converse", converse_tool_answer({"subject": "Alice", "likes": ["tea"]}), {
        "modelId": CLAUDE,
        "system": [{"text": "Extract preferences."}],
        "messages": [{"role": "user", "content": [{"text": "Alice: I love tea"}]}],
        "toolConfig": tool_config(),
        "inferenceConfig": {"maxTokens": 512, "temperature": 0.0},
    })
    llm = BedrockLLM(CLAUDE, client=c, max_tokens=512)
    result = llm.generate(system="Extract preferences.", prompt="Alice: I love tea", response_model=Preference)
    assert result == Preference(subject="Alice", likes=["tea"]) and llm.name == CLAUDE


def test_llm_repairs_a_tool_input_that_fails_validation(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    bad = {"subject": "Alice", "likes": "tea"}  # a string where a list is required
    stubber.add_response("converse", converse_tool_answer(bad, "tooluse_bad"))
    repair_messages = [
        {"role": "user", "content": [{"text": "p"}]},
        {"role": "assistant",
         "content": [{"toolUse": {"toolUseId": "tooluse_bad", "name": "Preference", "input": bad}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_bad", "status": "error",
                                                     "content": [{"text": ANY}]}}]},
    ]
    stubber.add_response("converse", converse_tool_answer({"subject": "Alice", "likes": ["tea"]}, "tooluse_ok"),
                         {"modelId": CLAUDE, "system": ANY, "messages": repair_messages, "toolConfig": ANY,
                          "inferenceConfig": ANY})
    llm = BedrockLLM(CLAUDE, client=c)
    assert llm.generate(system="s", prompt="p", response_model=Preference).likes == ["tea"]


def test_llm_repair_message_names_the_invalid_field(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    seen: list[dict[str, Any]] = []
    c.meta.events.register("before-parameter-build.bedrock-runtime.Converse",
                           lambda params, **_: seen.append(json.loads(json.dumps(params))))
    stubber.add_response("converse", converse_tool_answer({"subject": "Alice"}))
    stubber.add_response("converse", converse_tool_answer({"subject": "Alice", "likes": []}))
    BedrockLLM(CLAUDE, client=c).generate(system="s", prompt="p", response_model=Preference)
    result = seen[1]["messages"][2]["content"][0]["toolResult"]
    assert result["status"] == "error" and "likes" in result["content"][0]["text"]


def test_llm_gives_up_with_dependency_failed_when_repairs_are_exhausted(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    stubber.add_response("converse", converse_tool_answer({"likes": ["tea"]}))
    stubber.add_response("converse", converse_tool_answer({"likes": ["tea"]}, "tooluse_2"))
    with pytest.raises(DependencyFailed) as err:
        BedrockLLM(CLAUDE, client=c, max_repairs=1).generate(system="s", prompt="p", response_model=Preference)
    assert err.value.code == "llm_invalid_output" and "subject" in err.value.message


def test_llm_asks_again_when_the_model_answers_with_text(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    stubber.add_response("converse", {
        "output": {"message": {"role": "assistant", "content": [{"text": "Alice likes tea."}]}},
        "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1}})
    stubber.add_response("converse", converse_tool_answer({"subject": "Alice", "likes": ["tea"]}))
    assert BedrockLLM(CLAUDE, client=c).generate(system="s", prompt="p", response_model=Preference).subject == "Alice"


def test_llm_retries_throttling_then_succeeds(runtime: tuple[Any, Stubber]) -> None:
    c, stubber = runtime
    stubber.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    stubber.add_response("converse", converse_tool_answer({"subject": "Alice", "likes": ["tea"]}))
    sleeps = Sleeps()
    assert BedrockLLM(CLAUDE, client=c, sleep=sleeps).generate(system="s", prompt="p", response_model=Preference)
    assert len(sleeps) == 1


# --- reranker -------------------------------------------------------------------------------------

RERANK_ARN = f"arn:aws:bedrock:{REGION}::foundation-model/amazon.rerank-v1:0"


def rerank_request(query: str, texts: list[str]) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
                    for t in texts],
        "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
            "numberOfResults": len(texts), "modelConfiguration": {"modelArn": RERANK_ARN}}},
    }


def test_reranker_maps_scores_back_to_the_input_order(agent_runtime: tuple[Any, Stubber]) -> None:
    c, stubber = agent_runtime
    texts = ["Paris is in France", "Alice likes tea", "Bob likes coffee"]
    # The API answers best first, by index into the sources.
    stubber.add_response("rerank", {"results": [
        {"index": 1, "relevanceScore": 0.91},
        {"index": 2, "relevanceScore": 0.12},
        {"index": 0, "relevanceScore": 0.01},
    ]}, rerank_request("what does Alice drink?", texts))
    reranker = BedrockReranker("amazon.rerank-v1:0", REGION, client=c)
    assert reranker.rerank("what does Alice drink?", texts) == [0.01, 0.91, 0.12]


def test_reranker_retries_throttling_then_succeeds(agent_runtime: tuple[Any, Stubber]) -> None:
    c, stubber = agent_runtime
    stubber.add_client_error("rerank", service_error_code="ThrottlingException", http_status_code=429)
    stubber.add_response("rerank", {"results": [{"index": 0, "relevanceScore": 0.5}]}, rerank_request("q", ["t"]))
    sleeps = Sleeps()
    assert BedrockReranker("amazon.rerank-v1:0", client=c, sleep=sleeps).rerank("q", ["t"]) == [0.5]
    assert len(sleeps) == 1


def test_reranker_translates_access_denied(agent_runtime: tuple[Any, Stubber]) -> None:
    c, stubber = agent_runtime
    stubber.add_client_error("rerank", service_error_code="AccessDeniedException", http_status_code=403)
    with pytest.raises(DependencyFailed):
        BedrockReranker(RERANK_ARN, client=c).rerank("q", ["t"])


def test_reranker_with_nothing_to_rank_makes_no_call(agent_runtime: tuple[Any, Stubber]) -> None:
    c, _ = agent_runtime
    assert BedrockReranker(client=c).rerank("q", []) == []


def test_model_arn_from_id_or_arn() -> None:
    assert model_arn("amazon.rerank-v1:0", "eu-central-1") == \
        "arn:aws:bedrock:eu-central-1::foundation-model/amazon.rerank-v1:0"
    assert model_arn("cohere.rerank-v3-5:0", "cn-north-1").startswith("arn:aws-cn:bedrock:cn-north-1::")
    assert model_arn(RERANK_ARN, "eu-west-1") == RERANK_ARN


def test_the_embedders_identity_probe_runs_once_for_every_deadline_bounded_view(runtime: tuple[Any, Stubber]) -> None:
    """A warm-container trial: each sync request bounds the embedder by its deadline (a copy), and the identity
    probe, cached per embedder object, ran again for every copy — three model calls a request, and a keyword search
    that failed when the model was throttled. The Stubber holds exactly three responses: a fourth call fails."""
    from memlane.adapters.embedders.recent import RecentVectors
    from memlane.domain.deadline import Deadline
    from memlane.ports import origin
    from memlane.services import embedder_guard

    c, stubber = runtime
    for i, text in enumerate(embedder_guard.REFERENCE_TEXTS):
        stubber.add_response("invoke_model", titan_response(unit(i)), titan_request(text))
    embedder = RecentVectors(BedrockEmbedder(TITAN, dim=256, client=c, max_workers=1), size=0)
    views = [embedder.within(Deadline.never()) for _ in range(3)]
    assert all(origin(v) is embedder and v.inner is not embedder.inner for v in views)
    assert origin(embedder.inner.within(Deadline.never())) is embedder.inner
    found = {embedder_guard.identity(v).fingerprint for v in views}
    assert len(found) == 1 and embedder_guard.identity(embedder).fingerprint in found
