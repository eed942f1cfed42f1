"""The `DeadLetters` port over an SQS dead-letter queue: the ingestion queue's, where refused adds wait for an
operator to fix their cause and redrive them. A tenant's erasure drops the tenant's adds from it — redriven after
the erasure, they would write its data again (an AWS-path trial).

SQS finds a message only by receiving it: every message is received in turn and held out of sight while the
scan goes on, the tenant's deleted, the others made visible again at once when it ends.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from botocore.exceptions import BotoCoreError, ClientError

from ...domain.errors import Retryable
from .queue import translate_error
from .source import MAX_BATCH

log = logging.getLogger(__name__)

HOLD_SECONDS = 120  # a message read is out of sight this long: longer than a scan of MAX_MESSAGES
EMPTY_RECEIVES = 2  # long polls that find nothing before the queue is taken to be read through
MAX_MESSAGES = 10_000  # read at most this many in one scan (a Lambda's time); past it the scan fails


class SqsDeadLetters:
    def __init__(self, queue_url: str, client: Any, *, max_messages: int = MAX_MESSAGES):
        self.queue_url, self.client, self.max_messages = queue_url, client, max_messages

    def drop(self, matches: Callable[[str], bool]) -> int:
        held: list[str] = []
        dropped = empty = 0
        try:
            while empty < EMPTY_RECEIVES and len(held) + dropped < self.max_messages:
                messages = self.client.receive_message(
                    QueueUrl=self.queue_url, MaxNumberOfMessages=MAX_BATCH, WaitTimeSeconds=1,
                    VisibilityTimeout=HOLD_SECONDS).get("Messages", [])
                empty = 0 if messages else empty + 1
                for message in messages:
                    if matches(message.get("Body", "")):
                        self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
                        dropped += 1
                    else:
                        held.append(message["ReceiptHandle"])
        except (ClientError, BotoCoreError) as err:
            raise translate_error(err) from err
        finally:
            self._release(held)
        if empty < EMPTY_RECEIVES:
            # Not read through: an erasure that said it was done would leave adds of its tenant that a redrive
            # writes back (a review). It fails instead, and its job runs again (FAILED past its attempts).
            raise Retryable(f"the dead letters of {self.queue_url} were not read through: a scan reads at most "
                            f"{self.max_messages} messages ({dropped} of the tenant's dropped); drain or redrive the "
                            "queue's others first", code="dead_letters_unread")
        return dropped

    def _release(self, handles: list[str]) -> None:
        """The messages kept, visible again at once (best effort: missed, they show again after HOLD_SECONDS)."""
        for at in range(0, len(handles), MAX_BATCH):
            entries = [{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                       for i, h in enumerate(handles[at:at + MAX_BATCH])]
            try:
                self.client.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError) as err:
                log.warning("dead letters of %s: %d not made visible again (%s)", self.queue_url, len(entries), err)
