"""Fault injection: `memlane serve` killed (os._exit) at every named crash point and at random
schedules, restarted, and checked: no message lost, no task stuck, no duplicate, table = index.

MEMLANE_FAULT_SCHEDULES sets how many random schedules run (default 200: CI's budget)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from memlane.faults import POINTS

from .harness import run_schedule, seed

pytestmark = pytest.mark.faults
RANDOM_SCHEDULES = int(os.environ.get("MEMLANE_FAULT_SCHEDULES", "200"))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("template") / "data"
    seed(data)
    return data


@pytest.mark.parametrize("point", POINTS)
def test_crash_at_each_point(point, template, tmp_path):
    crashed = 0
    for hit in (1, 2):  # the first time the point is reached, and a later one (other state around it)
        outcome = run_schedule(template, tmp_path / f"{hit}", f"{point}@{hit}", seed_=hit, steps=12)
        assert outcome.problems == [], "\n".join(outcome.problems)
        crashed += outcome.crashed
    # Every point must be reachable by the workload, or the test proves nothing about it.
    assert crashed >= 1, f"the workload never reached {point}"


def test_crash_at_random_schedules(template, tmp_path):
    rng = random.Random(15)
    crashed = accepted = 0
    for n in range(RANDOM_SCHEDULES):
        schedule = f"any@{rng.randrange(1, 25)}"
        outcome = run_schedule(template, tmp_path / str(n), schedule, seed_=n)
        assert outcome.problems == [], "\n".join(outcome.problems)
        crashed += outcome.crashed
        accepted += outcome.accepted
    print(f"{RANDOM_SCHEDULES} schedules: {crashed} crashed, {accepted} adds accepted, 0 problems")
    assert crashed >= RANDOM_SCHEDULES // 2  # most schedules really crash
