"""Extraction jobs running side by side share model calls, and each keeps its own outcome.

The worker's jobs embed through a CoalescingEmbedder (bootstrap wraps the local model in one): the jobs
of several tenants queued together meet in one model call. What each job writes, and whether it fails,
must be exactly what it would be alone: the same memories as a run without sharing, and a job whose
text the model refuses fails (retried, then FAILED) without failing the jobs it shared a call with.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Sequence

from memlane.adapters.embedders.coalescing import CoalescingEmbedder
from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.domain.errors import DependencyFailed
from memlane.domain.models import TaskStatus
from memlane.services import ingest, stores

ADDS = {
    "u1": "I moved to Lisbon in May. I love hiking in the hills on Sundays.",
    "u2": "My daughter Ana started violin lessons. We adopted a grey cat named Pixel.",
    "u3": "The poison word makes the model fail. I also like pottery classes.",
    "u4": "I work as a nurse at the city hospital. My brother Tom lives in Oslo.",
    "u5": "I am allergic to peanuts. My favourite band is Radiohead.",
}


class RecordingModel:
    """Hashing vectors; refuses any text with 'poison'; records each call. While `gate` is set, its first
    call waits until `queued` callers are waiting behind it, so the test sees calls meet."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()
        self.gate: tuple[CoalescingEmbedder, int] | None = None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.gate is not None:
            outer, queued = self.gate
            self.gate = None
            outer.wait_for_queued(queued, timeout=10)
        with self.lock:
            self.calls.append(list(texts))
        if any("poison" in t for t in texts):
            raise DependencyFailed("the model refused a text", code="embedder_failed")
        return self.inner.embed(texts)


def _service(path: Path, embedder: object, workers: int):  # type: ignore[no-untyped-def]
    settings = Settings.from_env(env={}, data_dir=path, reranker="none", worker_threads=workers,
                                 worker_max_attempts=2)
    service = build_local(settings, embedder=embedder)  # type: ignore[arg-type]
    stores.create(service.deps, name="demo")
    return service


def _add_all(service) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {tenant: ingest.add(service.deps, "demo", text=text,
                               scope={"app_id": "app", "tenant_id": tenant, "agent_id": "bot", "run_id": "r1"}).request_id
            for tenant, text in ADDS.items()}


def _finished(service, ids: dict[str, str]):  # type: ignore[no-untyped-def]
    tasks = {t: service.deps.repo.locate_task("demo", rid, "app", t) for t, rid in ids.items()}
    return tasks if all(task.status.finished for task in tasks.values()) else None


def _outcomes(task) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(o.action.value, o.text) for o in task.outcomes]


def test_jobs_share_model_calls_and_keep_their_own_outcomes(tmp_path: Path) -> None:
    # Alone: one worker, the model called job by job.
    alone = _service(tmp_path / "alone", RecordingModel(), workers=1)
    try:
        ids = _add_all(alone)
        alone.drain(timeout=60)
        reference = _finished(alone, ids)
        assert reference is not None
    finally:
        alone.close()

    model = RecordingModel()
    shared = CoalescingEmbedder(model)
    service = _service(tmp_path / "shared", shared, workers=4)
    try:
        ids = _add_all(service)
        model.calls.clear()  # the adds' own message embeddings ran before the worker started
        model.gate = (shared, 2)
        service.start_worker()
        deadline = time.monotonic() + 60
        while (tasks := _finished(service, ids)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tasks is not None, "the jobs never finished"
    finally:
        service.close()

    assert tasks["u3"].status == TaskStatus.FAILED and reference["u3"].status == TaskStatus.FAILED
    for tenant in ("u1", "u2", "u4", "u5"):
        assert tasks[tenant].status == TaskStatus.SUCCEEDED, (tenant, tasks[tenant].error)
        assert _outcomes(tasks[tenant]) == _outcomes(reference[tenant]) != []
    # At least one model call carried the texts of several jobs (the tenants' words tell them apart).
    marks = {"u1": "Lisbon", "u2": "Pixel", "u3": "poison", "u4": "nurse", "u5": "peanuts"}
    tenants_per_call = [{t for t, w in marks.items() if any(w in text for text in call)} for call in model.calls]
    assert max(len(t) for t in tenants_per_call) >= 2, tenants_per_call
