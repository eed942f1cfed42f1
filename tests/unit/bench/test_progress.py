"""Progress of the benchmarks: a live bar on a terminal, whole lines (no carriage return) into a log file."""

from __future__ import annotations

import os
import sys

from memlane.bench.common import Progress

from ...terminal import stderr_of

UPDATES = [sys.executable, "-m", "memlane.cli", "bench", "updates", "--embedder", "hashing", "--paths", "rules",
           "--kinds", "allergy"]


def test_into_a_pipe_progress_is_a_few_whole_lines() -> None:
    read, write = os.pipe()
    with os.fdopen(write, "w") as stream:
        bar = Progress(1000, "cases", stream=stream)
        for i in range(1000):
            bar.update(1, f"case {i}")
        bar.close()
    text = os.fdopen(read).read()
    assert "\r" not in text
    lines = text.splitlines()
    assert 10 <= len(lines) <= 11 and lines[-1].startswith("progress: 1000/1000 (100%)")
    assert lines[0].startswith("progress: 100/1000 (10%)")


def test_on_a_terminal_progress_is_one_line_redrawn() -> None:
    import pty

    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as stream:
        bar = Progress(10, "cases", stream=stream)
        for _ in range(10):
            bar.update(1)
        bar.close()
        stream.flush()
        text = _drain(master)
    os.close(master)
    assert text.count("\r") >= 2 and "100.0%" in text and "progress:" not in text


def test_a_bench_run_into_a_log_file_writes_no_carriage_return() -> None:
    env = {**os.environ, "MEMLANE_EMBEDDER": "hashing"}
    code, logged = stderr_of(UPDATES, terminal=False, env=env)
    assert code == 0, logged
    assert "\r" not in logged and "progress: " in logged


def test_a_bench_run_on_a_terminal_draws_its_bar() -> None:
    env = {**os.environ, "MEMLANE_EMBEDDER": "hashing"}
    code, shown = stderr_of(UPDATES, terminal=True, env=env)
    assert code == 0, shown
    assert "\r[" in shown


def _drain(fd: int) -> str:
    """Everything written to the pty so far: one read returns only what the line discipline passed on at
    that moment (under load, the first redraw alone)."""
    import select

    chunks = []
    while select.select([fd], [], [], 0.5)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()
