"""Peers in the same LoCoMo run: open-source memory libraries driven through their own public API.

``mem0`` — Mem0 (pip install 'memlane[peers]', mem0ai 2.2.1) with ``infer=False`` (each turn stored as
given, no LLM), the same MiniLM embedder as every other method (as a Mem0 embedder class) and its
default local vector store (Qdrant's embedded mode, files in the run's data directory). Offline it is
semantic search only: its BM25 (fastembed's ``Qdrant/bm25``) and its spaCy lemmatizer and entity boost
fetch their models from the Hugging Face hub / GitHub on first use, which this benchmark does not allow;
Mem0 itself skips both with a warning when they are missing. Telemetry off (MEM0_TELEMETRY=False).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .locomo import Conversation, Params, Result, dated_text, raw_text


def _mem0_embedder(inner: Any) -> Any:
    from mem0.embeddings.base import EmbeddingBase

    class MiniLM(EmbeddingBase):  # Mem0's embedder interface over memlane's local model
        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return list(inner.embed([text])[0])

    return MiniLM()


class Mem0Turns:
    """Each turn added to Mem0 as one message (``Speaker (date): text``, as the other baselines index
    it; its dialog id in metadata), one Mem0 user per conversation; search with threshold 0 so it
    returns top_k. Charged, like the other baselines, for ``Speaker: text``: Mem0 returns the dated row
    it was given, and the date is not charged to it alone."""

    name = "mem0"
    grid: list[Params] = [{"threshold": 0.0}]  # nothing to tune offline: one semantic signal

    def __init__(self, embedder: Any, data_dir: Path, memory: Any = None) -> None:
        self.texts: dict[tuple[str, str], str] = {}
        if memory is not None:
            self.memory = memory
            return
        os.environ.setdefault("MEM0_TELEMETRY", "False")  # read when mem0 is imported: set before
        try:
            from mem0 import Memory
        except ImportError as exc:
            raise SystemExit("--methods mem0 needs Mem0: pip install 'memlane[peers]'") from exc
        data_dir.mkdir(parents=True, exist_ok=True)
        # Mem0 builds its default OpenAI clients at start; infer=False never calls them (no key, no network).
        self.memory = Memory.from_config({
            "vector_store": {"provider": "qdrant", "config": {"path": str(data_dir / "qdrant"), "on_disk": True,
                                                              "collection_name": "locomo",
                                                              "embedding_model_dims": embedder.dim}},
            "embedder": {"provider": "openai", "config": {"api_key": "unused-offline",
                                                          "embedding_dims": embedder.dim}},
            "llm": {"provider": "openai", "config": {"api_key": "unused-offline"}},
            "history_db_path": str(data_dir / "history.db"),
        })
        self.memory.embedding_model = _mem0_embedder(embedder)

    def prepare(self, conv: Conversation) -> None:
        for t in conv.turns:
            self.texts[(conv.sample_id, t.dia_id)] = raw_text(t)
            self.memory.add([{"role": "user", "name": t.speaker, "content": dated_text(t)}],
                            user_id=conv.sample_id, infer=False, metadata={"dia_id": t.dia_id})

    def search(self, conv: Conversation, query: str, k: int, params: Params | None = None) -> list[Result]:
        p = params or self.grid[0]
        found = self.memory.search(query, filters={"user_id": conv.sample_id}, top_k=k, threshold=p["threshold"])
        out = []
        for hit in found["results"]:
            dia = (hit.get("metadata") or {}).get("dia_id")
            if dia is not None:
                out.append(Result((dia,), self.texts[(conv.sample_id, dia)]))
        return out
