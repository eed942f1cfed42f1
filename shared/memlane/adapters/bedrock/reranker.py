"""Reranking with a Bedrock rerank model (Amazon Rerank, Cohere Rerank) via bedrock-agent-runtime."""

from __future__ import annotations

import copy
import time
from typing import Any, Sequence

from ...domain.deadline import Deadline
from ...domain.errors import DependencyFailed
from ..backoff import DEFAULT_MAX_ATTEMPTS, CallLimits, Sleep
from .calls import Clients, call

MAX_SOURCES = 1000  # the API's limit of documents per request


def model_arn(model: str, region: str) -> str:
    """An ARN as given, or the foundation-model ARN of a model id such as "amazon.rerank-v1:0"."""
    if model.startswith("arn:"):
        return model
    partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    return f"arn:{partition}:bedrock:{region}::foundation-model/{model}"


class BedrockReranker:
    def __init__(self, model: str = "amazon.rerank-v1:0", region: str | None = None, client: Any = None, *,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, limits: CallLimits | None = None,
                 sleep: Sleep = time.sleep) -> None:
        self._clients = Clients("bedrock-agent-runtime", region, limits or CallLimits(max_attempts=max_attempts),
                                client)
        region = self._clients.region
        if not model.startswith("arn:") and not region:
            raise ValueError("a region is needed to turn a rerank model id into its ARN")
        self.name = model
        self._model_arn = model_arn(model, region or "")
        self._sleep = sleep
        self._deadline = Deadline.never()

    def within(self, deadline: Deadline) -> "BedrockReranker":
        """This reranker with every call and retry bounded by `deadline` (ports.Budgeted)."""
        bounded = copy.copy(self)
        bounded._deadline = deadline
        return bounded

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        scores: list[float] = []
        # Scores are absolute relevance (not relative to the batch), so chunks can be joined as they are.
        for start in range(0, len(texts), MAX_SOURCES):
            scores.extend(self._rerank_chunk(query, list(texts[start:start + MAX_SOURCES])))
        return scores

    def _rerank_chunk(self, query: str, texts: list[str]) -> list[float]:
        request: dict[str, Any] = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
            "sources": [{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
                        for t in texts],
            "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                "numberOfResults": len(texts), "modelConfiguration": {"modelArn": self._model_arn}}},
        }
        scores: list[float | None] = [None] * len(texts)
        while True:
            response = call(lambda client: client.rerank(**request), self._clients, what=f"bedrock rerank {self.name}",
                            deadline=self._deadline, sleep=self._sleep)
            for result in response.get("results", []):
                index = result.get("index")
                if not isinstance(index, int) or not 0 <= index < len(texts):
                    raise DependencyFailed(f"rerank returned an index out of range: {index!r}",
                                           code="model_bad_response")
                scores[index] = float(result["relevanceScore"])
            if not response.get("nextToken"):
                break
            request["nextToken"] = response["nextToken"]
        # Every text is asked for; one left out anyway ranks last rather than failing the search.
        floor = min((s for s in scores if s is not None), default=0.0)
        return [floor if s is None else s for s in scores]
