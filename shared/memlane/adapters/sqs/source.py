"""The `JobSource` port over the SQS extraction queue: what `memlane worker` receives, extends and settles.

The Lambda's event source mapping does this for the extract function; a worker process does it itself:
long-poll receive with a visibility timeout, extend it while a job runs, delete when done, hand back on
failure or shutdown. SDK errors are translated once, by code (queue.translate_error).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from ...ports import Delivery, Job
from .queue import translate_error

MAX_BATCH = 10  # SQS returns at most 10 messages per receive
MAX_WAIT = 20  # and long-polls at most 20 s
MAX_VISIBILITY = 43_200  # 12 hours


class SqsJobSource:
    def __init__(self, queue_url: str, client: Any):
        self.queue_url, self.client = queue_url, client

    def receive(self, max_jobs: int, *, wait_seconds: int, visibility_seconds: int) -> list[Delivery]:
        try:
            answer = self.client.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=max(1, min(MAX_BATCH, max_jobs)),
                WaitTimeSeconds=max(0, min(MAX_WAIT, wait_seconds)),
                VisibilityTimeout=_visibility(visibility_seconds),
                AttributeNames=["ApproximateReceiveCount"])  # the older name: boto3 >= 1.34 and moto take it
        except (ClientError, BotoCoreError) as err:
            raise translate_error(err) from err
        return [_delivery(message) for message in answer.get("Messages", [])]

    def done(self, delivery: Delivery) -> None:
        self._call("delete_message", ReceiptHandle=delivery.handle)

    def extend(self, delivery: Delivery, visibility_seconds: int) -> None:
        self._call("change_message_visibility", ReceiptHandle=delivery.handle,
                   VisibilityTimeout=_visibility(visibility_seconds))

    def release(self, delivery: Delivery, delay_seconds: int = 0) -> None:
        self._call("change_message_visibility", ReceiptHandle=delivery.handle,
                   VisibilityTimeout=max(0, min(MAX_VISIBILITY, delay_seconds)))

    def max_receives(self) -> int | None:
        try:
            attrs = self.client.get_queue_attributes(QueueUrl=self.queue_url,
                                                     AttributeNames=["RedrivePolicy"]).get("Attributes", {})
        except (ClientError, BotoCoreError) as err:
            raise translate_error(err) from err
        policy = attrs.get("RedrivePolicy")
        return int(json.loads(policy)["maxReceiveCount"]) if policy else None

    def _call(self, operation: str, **params: Any) -> None:
        try:
            getattr(self.client, operation)(QueueUrl=self.queue_url, **params)
        except (ClientError, BotoCoreError) as err:
            raise translate_error(err) from err


def _visibility(seconds: int) -> int:
    return max(1, min(MAX_VISIBILITY, seconds))


def _delivery(message: dict[str, Any]) -> Delivery:
    receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
    found = dict(handle=message["ReceiptHandle"], message_id=message.get("MessageId", ""), receives=receives)
    try:
        return Delivery(job=Job.model_validate_json(message.get("Body", "")), **found)
    except ValidationError as invalid:  # a body that is not a job: settled by the worker, never run
        return Delivery(job=None, problem=f"not a job: {invalid.errors()[0]['msg']}", **found)
