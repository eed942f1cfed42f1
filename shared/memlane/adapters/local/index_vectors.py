"""The embedded index's vectors: unit-length float32 embeddings, and the per-tenant matrices that
exact kNN scores (kept in memory by index_cache.TenantCache).

A tenant's matrix is read once (rows ordered by docs.id), replaced whenever that tenant's documents
change, and dropped whole when another process writes to the file (see `EmbeddedIndex._vectors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...domain.errors import InvalidInput


def unit_vector(values: Sequence[float], dim: int, what: str) -> np.ndarray:
    try:
        vec = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} must be a list of numbers", code="invalid_vector") from None
    if vec.shape != (dim,):
        raise InvalidInput(f"{what} has dimension {vec.shape[0] if vec.ndim == 1 else vec.shape}, "
                           f"the store's is {dim}", code="dimension_mismatch")
    if not np.all(np.isfinite(vec)):
        raise InvalidInput(f"{what} contains NaN or infinite values", code="invalid_vector")
    # Normalise anyway: cosine = dot only holds for unit vectors, and embedders round.
    norm = float(np.linalg.norm(vec))
    return (vec / np.float32(norm)) if norm > 0 else vec


@dataclass(frozen=True)
class Vectors:
    """One tenant's embeddings, rows ordered by docs.id. Replaced, never mutated."""

    ids: np.ndarray  # int64, ascending
    matrix: np.ndarray  # float32 (n, dim)

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes
