"""The deadline of a synchronous request (domain/deadline.py) and where it comes from (issue 16)."""

from __future__ import annotations

import math

import pytest

from memlane import bootstrap
from memlane.api.routes.common import request_deadline
from memlane.config import Settings
from memlane.domain.deadline import HTTP_API_LIMIT_SECONDS, Deadline
from memlane.domain.errors import DeadlineExceeded
from memlane.services.deps import CoreSettings


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class Context:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_a_deadline_counts_down_and_is_checked_between_steps() -> None:
    clock = Clock()
    deadline = Deadline.after(10, clock=clock)
    assert (deadline.remaining(), deadline.budget(60), deadline.budget(4)) == (10, 10, 4)
    deadline.check("the first step")
    clock.now += 10
    assert deadline.expired() and deadline.budget(60) == 0
    with pytest.raises(DeadlineExceeded, match="before the second step") as raised:
        deadline.check("the second step")
    assert raised.value.code == "deadline_exceeded"


def test_no_deadline_never_expires() -> None:
    never = Deadline.never()
    assert not never.bounded and never.remaining() == math.inf and never.budget(60) == 60
    never.check("anything")


@pytest.mark.parametrize("remaining_ms,expected", [
    (120_000, 27.0),  # the Dream function (120 s): the HTTP API's limit caps it
    (10_000, 8.0),    # a Lambda with 10 s left: its remaining time, less the margin
    (1_000, 0.0),     # less than the margin: already passed
])
def test_a_request_deadline_is_the_lambdas_remaining_time_capped_less_the_margin(remaining_ms, expected) -> None:
    settings = CoreSettings(sync_deadline_seconds=29.0, sync_margin_seconds=2.0)
    deadline = request_deadline(Context(remaining_ms), settings)
    assert deadline.remaining() == pytest.approx(expected, abs=0.5)


def test_without_a_lambda_context_the_setting_alone_decides() -> None:
    deadline = request_deadline(None, CoreSettings(sync_deadline_seconds=45.0, sync_margin_seconds=5.0))
    assert deadline.remaining() == pytest.approx(40.0, abs=0.5)


def test_on_aws_the_sync_deadline_never_exceeds_the_http_apis_limit() -> None:
    assert bootstrap._sync_deadline(Settings.from_env(env={}, mode="aws", sync_deadline_seconds=120)) == \
        HTTP_API_LIMIT_SECONDS
    assert bootstrap._sync_deadline(Settings.from_env(env={}, mode="local", sync_deadline_seconds=120)) == 120
