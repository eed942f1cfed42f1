"""The `Queue` port over one SQS standard queue (the extraction queue of template.yaml).

A job is sent as its JSON; the extract Lambda reads it back with the same model. Delivery is
at least once, which the jobs tolerate (extraction is idempotent). SDK errors are translated
here, once, by error code, into the domain's errors.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError, ReadTimeoutError

from ...domain.errors import DependencyFailed, MemlaneError, Retryable
from ...ports import Job

# SQS's own throttling and server-side codes, plus the KMS ones it passes on for an encrypted queue.
# Both spellings of a code appear: the JSON protocol's and the legacy query protocol's.
_RETRYABLE_CODES = frozenset({
    "ThrottlingException", "RequestThrottled", "AWS.SimpleQueueService.RequestThrottled",
    "ServiceUnavailable", "InternalError", "InternalFailure", "KmsThrottled",
    "AWS.SimpleQueueService.KmsThrottled",
})


class SqsQueue:
    def __init__(self, queue_url: str, client: Any = None):
        # An empty URL is refused on use, not here: tools that never enqueue (`memlane grants`) still work.
        self.queue_url = queue_url
        if client is None:
            import boto3

            client = boto3.client("sqs")
        self.client = client

    def enqueue(self, job: Job) -> None:
        if not self.queue_url:
            raise DependencyFailed("no SQS queue is configured (MEMLANE_QUEUE_URL)", code="queue_failed")
        try:
            self.client.send_message(QueueUrl=self.queue_url, MessageBody=job.model_dump_json())
        except (ClientError, BotoCoreError) as err:
            raise translate_error(err) from err


def translate_error(err: Exception) -> MemlaneError:
    """Map an SDK error to the domain hierarchy, by error code."""
    if isinstance(err, (ConnectionError, HTTPClientError, ReadTimeoutError)):
        return Retryable(f"SQS unreachable: {err}", code="queue_unavailable")
    if not isinstance(err, ClientError):
        return DependencyFailed(f"SQS call failed: {err}", code="queue_failed")
    error = err.response.get("Error", {})
    code, message = error.get("Code", ""), error.get("Message", str(err))
    if code in _RETRYABLE_CODES:
        return Retryable(f"SQS is busy: {code}: {message}", code="queue_unavailable", aws_code=code)
    # Missing queue, access denied, KMS key disabled, ...: configuration faults a retry won't fix.
    return DependencyFailed(f"SQS error {code}: {message}", code="queue_failed", aws_code=code)
