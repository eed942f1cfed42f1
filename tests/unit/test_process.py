"""memlane.process.settle: the garbage collector settings of a served process (checked in a fresh
interpreter: the test process keeps its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SHARED = Path(__file__).parents[2] / "shared"


def test_settle_freezes_what_is_built_and_collects_the_young_generation_less_often() -> None:
    script = ("import gc, json; from memlane import process; before = gc.get_threshold(); process.settle(); "
              "frozen = gc.get_freeze_count(); kept = [object() for _ in range(10)]; process.settle(); "
              "print(json.dumps([before, gc.get_threshold(), frozen, gc.get_freeze_count()]))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SHARED)}).stdout
    before, after, frozen, frozen_again = json.loads(out)
    assert before[0] == 700 and after == [20_000, before[1], before[2]]
    assert frozen > 1000 and frozen_again == frozen  # a second call freezes nothing more
