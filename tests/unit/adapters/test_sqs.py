"""The SQS queue adapter: the job as the message body, SDK errors translated by code."""

from __future__ import annotations

from typing import Any, Iterator

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber
from moto import mock_aws

from memlane.adapters.sqs.queue import SqsQueue
from memlane.domain.errors import DependencyFailed, Retryable
from memlane.ports import Job

REGION = "us-east-1"
URL = "https://sqs.us-east-1.amazonaws.com/123456789012/memlane-extract"
JOB = Job(kind="extract", store="demo", request_id="req-1")


@pytest.fixture()
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture()
def stubbed(credentials: None) -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("sqs", region_name=REGION)
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_enqueue_sends_the_job_json(credentials: None) -> None:
    with mock_aws():
        client = boto3.client("sqs", region_name=REGION)
        url = client.create_queue(QueueName="memlane-extract")["QueueUrl"]
        SqsQueue(url, client=client).enqueue(JOB)
        [message] = client.receive_message(QueueUrl=url)["Messages"]
    assert Job.model_validate_json(message["Body"]) == JOB


@pytest.mark.parametrize(("code", "status", "error"), [
    ("RequestThrottled", 400, Retryable),
    ("ThrottlingException", 400, Retryable),
    ("KmsThrottled", 400, Retryable),
    ("InternalError", 500, Retryable),
    ("AWS.SimpleQueueService.NonExistentQueue", 400, DependencyFailed),
    ("AccessDenied", 403, DependencyFailed),
    ("KmsDisabled", 400, DependencyFailed),
])
def test_sdk_errors_are_translated_by_code(stubbed: tuple[Any, Stubber], code: str, status: int,
                                          error: type[Exception]) -> None:
    client, stubber = stubbed
    stubber.add_client_error("send_message", service_error_code=code, http_status_code=status)
    with pytest.raises(error) as raised:
        SqsQueue(URL, client=client).enqueue(JOB)
    assert raised.value.details["aws_code"] == code


def test_unreachable_endpoint_is_retryable(credentials: None) -> None:
    class Unreachable:
        def send_message(self, **_: Any) -> None:
            raise EndpointConnectionError(endpoint_url=URL)

    with pytest.raises(Retryable):
        SqsQueue(URL, client=Unreachable()).enqueue(JOB)


def test_no_queue_configured_is_refused_on_use() -> None:
    with pytest.raises(DependencyFailed):
        SqsQueue("", client=object()).enqueue(JOB)
