"""Embeddings over the OpenAI `POST /embeddings` API (OpenAI, Ollama's /v1, vLLM, LiteLLM, ...)."""

from __future__ import annotations

import copy
import math
import time
from typing import Any, Sequence

import requests

from ...domain.deadline import Deadline
from ...domain.errors import DependencyFailed
from ...ports import origin
from ..backoff import DEFAULT_MAX_ATTEMPTS, Sleep
from .http import DEFAULT_MAX_ANSWER_BYTES, JsonClient

DEFAULT_BATCH_SIZE = 64
# An answer's cap grows with the batch: 8192 dimensions at 32 bytes a float as JSON, per text (http.py).
_MAX_ANSWER_BYTES_PER_TEXT = 8192 * 32


class OpenAICompatibleEmbedder:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, dim: int | None = None,
                 session: requests.Session | None = None, timeout: float = 30, *,
                 connect_timeout: float | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, request_dimensions: bool = False,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, sleep: Sleep = time.sleep) -> None:
        self.name = model
        self._model = model
        self._dim = dim
        # Only models with a configurable size (text-embedding-3-*) accept "dimensions"; others reject it.
        self._request_dimensions = request_dimensions and dim is not None
        self._batch_size = max(1, batch_size)
        self._http = JsonClient(base_url, api_key=api_key, session=session, timeout=timeout,
                                connect_timeout=connect_timeout, max_attempts=max_attempts, sleep=sleep,
                                max_answer_bytes=max(DEFAULT_MAX_ANSWER_BYTES,
                                                     self._batch_size * _MAX_ANSWER_BYTES_PER_TEXT))

    def within(self, deadline: Deadline) -> "OpenAICompatibleEmbedder":
        """This adapter with each request and retry bounded by `deadline` (ports.Budgeted)."""
        bounded = copy.copy(self)
        bounded._http = self._http.within(deadline)
        bounded.origin = origin(self)  # one model: its identity is probed once (services/embedder_guard.py)
        return bounded

    @property
    def dim(self) -> int:
        # Unknown until the server has answered once: ask with a probe rather than guess,
        # because the index must be created with the right dimension.
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(self._embed_batch(list(texts[start:start + self._batch_size])))
        return out

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self._model, "input": texts}
        if self._request_dimensions:
            body["dimensions"] = self._dim
        data = self._http.post("embeddings", body)
        try:
            rows = sorted(data["data"], key=lambda row: row["index"])
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (KeyError, TypeError, ValueError) as e:
            raise DependencyFailed(f"embeddings response of unexpected shape: {e!r}", code="model_bad_response") from e
        if len(vectors) != len(texts):
            raise DependencyFailed(f"asked for {len(texts)} embeddings, got {len(vectors)}", code="model_bad_response")
        for vec in vectors:
            if self._dim is None:
                self._dim = len(vec)
            if len(vec) != self._dim:
                raise DependencyFailed(f"model {self._model} returned dimension {len(vec)}, expected {self._dim}",
                                       code="embedding_dimension_mismatch")
        return [_normalise(v) for v in vectors]


def _normalise(vec: list[float]) -> list[float]:
    # Some servers (Ollama, many vLLM models) return raw, unnormalised vectors; the port promises unit length.
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        raise DependencyFailed("embedding model returned a zero vector", code="model_bad_response")
    return [x / norm for x in vec]
