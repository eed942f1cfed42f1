"""template.yaml and samconfig.toml after a review of the AWS deployment: one extraction job an invocation,
in-place engine upgrades of the domain, Extract confined to the queues it consumes, a production profile that
cannot overwrite the dev stack, and the alarm count the cost table bills."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.deploy.iam_eval import AWS_MANAGED
from tests.handlers.conftest import parameter_default
from tests.handlers.template import load_template, resource
from tests.isolation import template_policies as tpl
from tests.isolation.iam_eval import Decision, Request, evaluate

ROOT = Path(__file__).resolve().parents[2]
SAM_SQS_POLICY = AWS_MANAGED["arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole"]
OTHER_QUEUE = f"arn:aws:sqs:{tpl.REGION}:{tpl.ACCOUNT}:{tpl.STACK}-ScheduleFailureQueue-ABC123"


def test_extract_takes_one_job_an_invocation() -> None:
    """With BatchSize 5 the records ran one after another under one 300 s timeout: one slow job (Bedrock slowing
    down) timed the whole batch out, and its healthy batch-mates came back with their receive counts raised,
    toward the dead-letter queue. A batch of one is full on arrival: no batching window either."""
    [source] = resource("Extract")["Properties"]["Events"].values()
    assert source["Properties"]["BatchSize"] == 1
    assert "MaximumBatchingWindowInSeconds" not in source["Properties"]


def test_the_search_domain_upgrades_its_engine_in_place() -> None:
    """Without EnableVersionUpgrade a change of EngineVersion replaces the domain: a new, empty one at a new
    endpoint, the old one deleted (UpdateReplacePolicy: Delete)."""
    domain = resource("SearchDomain")
    assert domain["UpdatePolicy"] == {"EnableVersionUpgrade": True}
    assert domain["Properties"]["EngineVersion"].startswith("OpenSearch_")


def decide(action: str, queue: str) -> Decision:
    """Extract's role on `queue` (an ARN or a logical id of tpl.ARNS): its own policy plus what SAM's SQS event
    source attaches (AWSLambdaSQSQueueExecutionRole: receive and delete on every queue)."""
    own = tpl.function_role_policy("Extract")
    policy = {"Version": "2012-10-17", "Statement": [*own["Statement"], *SAM_SQS_POLICY]}
    return evaluate(policy, Request(action=action, resource=tpl.ARNS.get(queue, queue)))


@pytest.mark.parametrize("action", ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"])
def test_extract_still_consumes_the_extraction_queue(action: str) -> None:
    """The event source's poller works with the function's role: the deny must leave ExtractQueue alone."""
    assert decide(action, "ExtractQueue") == Decision.ALLOW


@pytest.mark.parametrize("action", ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"])
def test_extract_still_reaches_the_ingestion_dead_letters_for_an_erasure(action: str) -> None:
    """A tenant's erasure reads the ingestion dead letters through, deletes the tenant's and puts back the rest
    (adapters/sqs/dead_letters.py): the deny must not break it."""
    assert decide(action, "IngestDeadLetterQueue") == Decision.ALLOW


@pytest.mark.parametrize("queue", ["IngestQueue", pytest.param(OTHER_QUEUE, id="ScheduleFailureQueue")])
@pytest.mark.parametrize("action", ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"])
def test_extract_consumes_no_other_queue(action: str, queue: str) -> None:
    """SAM's poller policy lets Extract receive and delete on every queue of the account (Ingest had its deny,
    Extract none): a leaked Extract credential could drain producers' adds or any other queue."""
    assert decide(action, queue) == Decision.EXPLICIT_DENY


def test_the_production_profile_deploys_a_stack_of_its_own() -> None:
    """Both profiles named the stack `memlane`: `sam deploy --config-env production` in the dev stack's account
    and Region updated the dev stack in place (and the other way round)."""
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    dev, production = (config[env]["global"]["parameters"]["stack_name"] for env in ("default", "production"))
    assert production != dev
    assert production == "memlane-production"  # docs/deploy.md's commands name it


def test_the_cost_table_bills_the_alarms_the_template_creates() -> None:
    """docs/deploy.md billed 16 alarms while the template creates 18 (17 without the reranker's)."""
    alarms = [r for r in load_template()["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    with_reranker, conditional = len(alarms), sum(r.get("Condition") == "HasReranker" for r in alarms)
    assert conditional == 1  # RerankFallbackAlarm
    row = next(line for line in (ROOT / "docs/deploy.md").read_text().splitlines()
               if line.startswith("| CloudWatch alarms"))
    assert f"| {with_reranker} ≈ ${with_reranker / 10:.2f}" in row
    assert f"{with_reranker - conditional} with `RerankModelId=\"\"`" in row


def test_a_queued_add_is_retried_past_a_backlog_before_it_is_dead_lettered() -> None:
    """A review: 3 receives of 180 s dead-lettered a producer's add after 9 minutes of `queue_full` (extraction
    behind) or throttling, transient conditions the design itself makes; recovery was a redrive by hand."""
    hold = resource("IngestQueue")["Properties"]["VisibilityTimeout"]
    assert parameter_default("IngestMaxReceives") * hold >= 30 * 60

