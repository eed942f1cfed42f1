"""Amazon Titan Text Embeddings V2 on Bedrock (InvokeModel).

Titan V2 takes one text per call, so a batch is embedded by a few concurrent calls. boto3
clients are thread-safe; the pool is sized well below Bedrock's default request quota.
"""

from __future__ import annotations

import copy
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ...domain.deadline import Deadline
from ...domain.errors import DependencyFailed
from ...ports import origin
from ..backoff import DEFAULT_MAX_ATTEMPTS, CallLimits, Sleep
from .calls import Clients, call

TITAN_V2_DIMENSIONS = (256, 512, 1024)


class BedrockEmbedder:
    def __init__(self, model_id: str = "amazon.titan-embed-text-v2:0", dim: int = 1024, client: Any = None,
                 max_workers: int = 4, *, region: str | None = None,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, limits: CallLimits | None = None,
                 sleep: Sleep = time.sleep) -> None:
        if "titan-embed-text-v2" in model_id and dim not in TITAN_V2_DIMENSIONS:
            raise ValueError(f"Titan Text Embeddings V2 supports dimensions {TITAN_V2_DIMENSIONS}, not {dim}")
        self.name = model_id
        self.dim = dim
        self._model_id = model_id
        self._clients = Clients("bedrock-runtime", region, limits or CallLimits(max_attempts=max_attempts), client)
        self._max_workers = max(1, max_workers)
        self._sleep = sleep
        self._deadline = Deadline.never()

    def within(self, deadline: Deadline) -> "BedrockEmbedder":
        """This embedder with every call and retry bounded by `deadline` (ports.Budgeted)."""
        bounded = copy.copy(self)
        bounded._deadline = deadline
        bounded.origin = origin(self)
        return bounded

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if len(texts) <= 1 or self._max_workers == 1:
            return [self._embed_one(t) for t in texts]
        with ThreadPoolExecutor(max_workers=min(self._max_workers, len(texts))) as pool:
            return list(pool.map(self._embed_one, texts))  # map keeps the input order

    def _embed_one(self, text: str) -> list[float]:
        body = json.dumps({"inputText": text, "dimensions": self.dim, "normalize": True})
        response = call(
            lambda client: client.invoke_model(modelId=self._model_id, body=body,
                                               contentType="application/json", accept="application/json"),
            self._clients, what=f"bedrock invoke_model {self._model_id}", deadline=self._deadline, sleep=self._sleep)
        try:
            vector = [float(x) for x in json.loads(response["body"].read())["embedding"]]
        except (KeyError, TypeError, ValueError) as e:
            raise DependencyFailed(f"{self._model_id} answered with an unexpected body: {e!r}",
                                   code="model_bad_response") from e
        if len(vector) != self.dim:
            raise DependencyFailed(f"{self._model_id} returned dimension {len(vector)}, expected {self.dim}",
                                   code="embedding_dimension_mismatch")
        # Titan already normalises; renormalising is cheap and makes float rounding a non-issue.
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            raise DependencyFailed(f"{self._model_id} returned a zero vector", code="model_bad_response")
        return [x / norm for x in vector]

