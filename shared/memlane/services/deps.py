"""What every service needs, handed in by the composition root (bootstrap.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..extractors import Extractor
from ..ports import Clock, Embedder, Index, Queue, Reranker, Table
from ..repository import Repository


@dataclass(frozen=True)
class CoreSettings:
    """Tunables of the core. Built from the environment by config.py, never read from it here."""

    default_recipe: str = "hybrid"
    duplicate_similarity: float = 0.95  # a candidate this close to an existing memory is a NOOP
    neighbours: int = 5  # existing memories a candidate is compared with
    max_extract_attempts: int = 5


@dataclass
class Deps:
    table: Table
    queue: Queue
    index: Index
    embedder: Embedder
    extractor: Extractor
    clock: Clock
    reranker: Reranker | None = None
    settings: CoreSettings = field(default_factory=CoreSettings)

    @property
    def repo(self) -> Repository:
        return Repository(self.table)
