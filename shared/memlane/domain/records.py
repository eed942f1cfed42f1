"""Records that share the search index with memories, as index documents.

A message is searchable as soon as it is added: its document has the message's id, text, scope and
time, and cites itself as evidence. It carries no memory type and is never superseded, so features
that work on memories (supersede chains, current heads, dream) leave it alone by its `record_type`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from .models import Memory, Message, RecordType

_LAST, _FIRST = "9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00.000000Z"


def utc_iso(value: datetime) -> str:
    """Fixed-width UTC ISO 8601 with a Z, so comparing the text compares the times (the embedded index's SQL, the
    OpenSearch documents). Naive means UTC. A time past the calendar's ends in UTC ("9999-12-31T23:59:59-14:00", a
    model's answer an older version kept) is that end: it is no longer refused on write, and such rows must still
    index (`fsck --repair` stopped on them)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    except OverflowError:
        return _LAST if value.year > 1 else _FIRST


def message_document(message: Message) -> Memory:
    said = message.created_at
    return Memory(memory_id=message.message_id, scope=message.scope, record_type=RecordType.MESSAGE,
                  text=message.content, evidence=[message.message_id], created_at=said, updated_at=said,
                  observed_at=said, valid_from=said, metadata={"role": message.role},
                  keywords=message.name or "")  # the speaker's name, as a memory's hidden keywords carry it
