"""The ingest function's rights on the queues, judged by the offline IAM evaluator: SAM's SQS event source
attaches AWSLambdaSQSQueueExecutionRole (receive and delete on every queue); the function's own policy narrows
that to the ingestion queue, so it can never consume (or delete) another queue's messages."""

from __future__ import annotations

import pytest

from tests.deploy.iam_eval import AWS_MANAGED
from tests.isolation import template_policies as tpl
from tests.isolation.iam_eval import Decision, Request, evaluate

SAM_SQS_POLICY = AWS_MANAGED["arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole"]


def decide(function: str, action: str, queue: str) -> Decision:
    own = tpl.function_role_policy(function)
    policy = {"Version": "2012-10-17", "Statement": [*own["Statement"], *SAM_SQS_POLICY]}
    return evaluate(policy, Request(action=action, resource=tpl.ARNS[queue]))


@pytest.mark.parametrize("action", ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"])
def test_ingest_consumes_the_ingestion_queue(action: str) -> None:
    assert decide("Ingest", action, "IngestQueue") == Decision.ALLOW


@pytest.mark.parametrize("queue", ["ExtractQueue", "IngestDeadLetterQueue"])
@pytest.mark.parametrize("action", ["sqs:ReceiveMessage", "sqs:DeleteMessage"])
def test_ingest_consumes_no_other_queue(action: str, queue: str) -> None:
    assert decide("Ingest", action, queue) == Decision.EXPLICIT_DENY


def test_extract_still_consumes_its_own_queue() -> None:
    assert decide("Extract", "sqs:ReceiveMessage", "ExtractQueue") == Decision.ALLOW
