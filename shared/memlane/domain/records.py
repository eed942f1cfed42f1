"""Records that share the search index with memories, as index documents.

A message is searchable as soon as it is added: its document has the message's id, text, scope and
time, and cites itself as evidence. It carries no memory type and is never superseded, so features
that work on memories (supersede chains, current heads, dream) leave it alone by its `record_type`.
"""

from __future__ import annotations

from .models import Memory, Message, RecordType


def message_document(message: Message) -> Memory:
    said = message.created_at
    return Memory(memory_id=message.message_id, scope=message.scope, record_type=RecordType.MESSAGE,
                  text=message.content, evidence=[message.message_id], created_at=said, updated_at=said,
                  observed_at=said, valid_from=said, metadata={"role": message.role},
                  keywords=message.name or "")  # the speaker's name, as a memory's hidden keywords carry it
