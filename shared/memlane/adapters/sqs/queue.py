"""The `Queue` port over one SQS standard queue (the extraction queue of template.yaml).

A job is sent as its JSON; the extract Lambda reads it back with the same model. Delivery is
at least once, which the jobs tolerate (extraction is idempotent). SDK errors are translated
here, once, by error code, into the domain's errors.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError, ReadTimeoutError

from ...domain.errors import DependencyFailed, MemlaneError, Retryable
from ...ports import Job, QueueHealth, Table, Write

log = logging.getLogger(__name__)
_DEPTH_TTL = 5.0  # seconds a queue depth reading is reused
_DEPTH_ATTRIBUTES = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                     "ApproximateNumberOfMessagesDelayed")

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
        self._depth: tuple[float, int | None] | None = None

    def enqueue(self, job: Job, *, delay: float = 0) -> None:
        if not self.queue_url:
            raise DependencyFailed("no SQS queue is configured (MEMLANE_QUEUE_URL)", code="queue_failed")
        extra = {"DelaySeconds": min(900, int(delay))} if delay > 0 else {}  # SQS delays at most 15 minutes
        try:
            self.client.send_message(QueueUrl=self.queue_url, MessageBody=job.model_dump_json(), **extra)
        except (ClientError, BotoCoreError) as err:
            raise translate_error(err) from err

    def commit(self, table: Table, writes: Sequence[Write], job: Job, *, delay: float = 0) -> None:
        # No transaction spans DynamoDB and SQS: commit, then send. A crash in between leaves the task
        # in the open-task registry, and the sweeper (services/sweep.py) sends its job again.
        table.transact(writes)
        self.enqueue(job, delay=delay)

    def discard(self, job: Job) -> None:
        """SQS cannot take back a message: the job runs and finds its task finished."""

    def depth(self) -> int:
        """Messages waiting, delayed or in flight. Unknown (no permission, SQS down) counts as 0:
        back-pressure is best effort and must never refuse, or fail, an add by itself."""
        known = self._known_depth()
        return known if known is not None else 0

    def health(self) -> QueueHealth:
        # SQS reports no age of its oldest message (a CloudWatch metric does) and the dead letters are
        # in another queue (its alarm watches it); the extract function is invoked by SQS, not run here.
        return QueueHealth(depth=self._known_depth(), oldest_pending_seconds=None, dead=None, worker_alive=None)

    def _known_depth(self) -> int | None:
        now = time.monotonic()  # cached a few seconds: a burst of adds costs one call
        if self._depth is None or now - self._depth[0] > _DEPTH_TTL:
            try:
                attrs = self._attributes()
                value: int | None = sum(int(attrs.get(name, 0)) for name in _DEPTH_ATTRIBUTES)
            except MemlaneError as error:
                log.warning("SQS queue depth unknown: %s", error.message)
                value = None
            self._depth = (now, value)
        return self._depth[1]

    def _attributes(self) -> dict[str, str]:
        if not self.queue_url:
            raise DependencyFailed("no SQS queue is configured (MEMLANE_QUEUE_URL)", code="queue_failed")
        try:
            return self.client.get_queue_attributes(QueueUrl=self.queue_url,
                                                    AttributeNames=list(_DEPTH_ATTRIBUTES)).get("Attributes", {})
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
