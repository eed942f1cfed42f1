"""The runnable examples of docs/integrations.md run as a user would run them, against `memlane serve`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_langgraph_example_recalls_a_fact_from_an_earlier_thread(memlane_server) -> None:
    out = run_example("langgraph_memory.py", "--url", memlane_server.url)
    assert "thread-1: noted" in out
    assert "thread-2: you told me: My favourite city is Lisbon" in out


def test_langgraph_example_runs_in_process(tmp_path: Path) -> None:
    out = run_example("langgraph_memory.py", "--local", str(tmp_path / "data"))
    assert "thread-2: you told me: My favourite city is Lisbon" in out


def test_strands_example_recalls_in_a_new_session(memlane_server) -> None:
    out = run_example("strands_memory.py", "--url", memlane_server.url)
    assert "session-1: Noted: remembered" in out
    recalled = next(line for line in out.splitlines() if line.startswith("session-2: I remember:"))
    assert "- Alice is allergic to peanuts" in recalled


def test_strands_example_runs_in_process(tmp_path: Path) -> None:
    out = run_example("strands_memory.py", "--local", str(tmp_path / "data"))
    assert "session-2: I remember:" in out and "- Alice is allergic to peanuts" in out
