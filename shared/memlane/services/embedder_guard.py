"""The store's embedder, enforced: vectors of two models are not comparable, so a process whose embedder
is not the one a store's vectors were made with refuses that store's writes and searches.

A store records the model's name and dimension and a probe: a few fixed reference texts embedded one
at a time, the first PROBE_DIMS components of each kept as integers (x 1000). Two embedders agree when
name and dimension are equal and every probe vector points the same way (cosine >= PROBE_AGREEMENT).
A cosine rather than a hash of rounded floats: the same model on another CPU or ONNX build differs in
the last bits, and a rounding boundary would turn that into a refusal of every write to the store. The
name alone misses a changed model behind an unchanged name (a new model file, an OpenAI-compatible
endpoint serving another model); the probe catches it. The fingerprint is a short hash of the probe,
for people and logs.

A store recorded before probes gets one from the first process that uses it under the same model name.
`memlane reindex STORE` moves a store to the running process's embedder (services/reindex.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import weakref
from dataclasses import dataclass, field

from ..domain.errors import ConditionFailed, Conflict
from ..domain.models import Store
from ..ports import Embedder, origin
from .deps import Deps

REFERENCE_TEXTS = (
    "A cat is sleeping on the warm windowsill.",
    "Quarterly revenue grew by four percent.",
    "The night train to Lisbon leaves at nine.",
)
PROBE_DIMS = 64  # enough to tell models apart, small enough to keep in the store's catalog record
PROBE_SCALE = 1000
PROBE_AGREEMENT = 0.99


@dataclass(frozen=True)
class Identity:
    name: str
    dim: int
    probe: list[list[int]]
    # The last store probe found to agree with this one: every search compares again, most often the same probe.
    agreed: list[list[list[int]]] = field(default_factory=list, compare=False)

    def agrees(self, stored: list[list[int]]) -> bool:
        if self.agreed and self.agreed[0] == stored:
            return True
        if not _agree(stored, self.probe):
            return False
        self.agreed[:] = [stored]
        return True

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.probe, separators=(",", ":")).encode()).hexdigest()[:16]


_known: "weakref.WeakKeyDictionary[Embedder, Identity]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def identity(embedder: Embedder) -> Identity:
    """The embedder's name, dimension and probe; computed once per embedder (per process) — one view of it bounded
    by a request's deadline is the same model (a warm-container trial: every sync request probed it again, three
    model calls each, and a keyword search failed with the model throttled)."""
    key = origin(embedder)
    with _lock:
        known = _known.get(key)
    if known is not None:
        return known
    # One text per call: a batch may pad, and padding may move the last bits.
    vectors = [embedder.embed([text])[0] for text in REFERENCE_TEXTS]
    found = Identity(embedder.name, embedder.dim,
                     [[round(x * PROBE_SCALE) for x in v[:PROBE_DIMS]] for v in vectors])
    with _lock:
        _known[key] = found
    return found


def recorded(store: Store, embedder: Embedder) -> Store:
    """`store` with the embedder's identity recorded (a new store, or a reindex)."""
    mine = identity(embedder)
    return store.model_copy(update={"embedding_model": mine.name, "embedding_dim": mine.dim,
                                    "embedding_fingerprint": mine.fingerprint, "embedding_probe": mine.probe})


def ensure(deps: Deps, store: Store, *, probe: bool = True) -> Store:
    """Refuse (409 embedder_mismatch) unless this process embeds as the store's vectors were embedded.
    A store without a probe yet gets this process's, if the name and dimension agree. `probe=False`
    compares name and dimension only, with no model call: an asynchronous add, which embeds nothing
    itself (its extraction checks the probe), stays available when the model endpoint is not."""
    for _ in range(3):
        if not _names_agree(store, deps.embedder):
            raise _mismatch(store, deps.embedder, None)
        if not probe:
            return store
        mine = identity(deps.embedder)
        if store.embedding_probe is not None:
            if not mine.agrees(store.embedding_probe):
                raise _mismatch(store, deps.embedder, mine)
            return store
        try:
            return deps.repo.update_store(recorded(store, deps.embedder))  # conditioned on the version read
        except ConditionFailed:
            store = deps.repo.get_store(store.name)  # another process recorded it first: compare with that
    raise Conflict(f"store '{store.name}' is being changed; retry", code="busy")


def _names_agree(store: Store, embedder: Embedder) -> bool:
    # A store recorded without a model (very old) takes the first one that uses it.
    return not store.embedding_model or (store.embedding_model, store.embedding_dim) == (embedder.name, embedder.dim)


def _agree(stored: list[list[int]], mine: list[list[int]]) -> bool:
    if len(stored) != len(mine):
        return False
    return all(_cosine(a, b) >= PROBE_AGREEMENT for a, b in zip(stored, mine))


def _cosine(a: list[int], b: list[int]) -> float:
    if len(a) != len(b):
        return 0.0
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b)) / norm if norm else 0.0


def _mismatch(store: Store, embedder: Embedder, mine: Identity | None) -> Conflict:
    theirs = f"{store.embedding_model} ({store.embedding_dim} dims"
    theirs += f", fingerprint {store.embedding_fingerprint})" if store.embedding_fingerprint else ")"
    ours = f"{embedder.name} ({embedder.dim} dims" + (f", fingerprint {mine.fingerprint})" if mine else ")")
    return Conflict(
        f"store '{store.name}' holds vectors of {theirs}; this process embeds with {ours}. Their vectors are not "
        f"comparable, so it neither writes to nor searches the store. Run it with the store's model, or move the "
        f"store to this one: memlane reindex {store.name}", code="embedder_mismatch",
        store_model=store.embedding_model, process_model=embedder.name)
