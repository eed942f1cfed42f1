"""Extraction prompt and its response model."""

from typing import Collection

from pydantic import BaseModel, Field

from ..domain.models import ExtractRole, MemoryType

SYSTEM = """You extract long-term memories from a conversation for an AI agent's memory store.
A memory is one durable, self-contained statement about the user, other people, or the world as
the speakers describe it: facts, preferences, events, plans, procedures. Rules:
- Write each memory in the third person, naming the speaker ("Caroline adopted a dog"), never "I".
- Make each memory understandable without the conversation. Resolve pronouns.
- Resolve relative times ("yesterday", "last week") against the time the message was written and
  give `event_time` as an ISO date when the memory names a time.
- Skip greetings, small talk and questions that state nothing.
- Earlier messages, when shown, are context only: their memories were extracted already. Use them
  to understand the new messages (who "she" is, what a "yes" answers, which day is meant), never
  extract a memory from them alone.
- `evidence` lists the numbers of the messages the memory comes from: at least one new message
  (0, 1, ...), and an earlier one (-1 is the message just before the new ones, -2 the one before
  it) only when the memory is built from it together with a new one.
- `importance` is 0..1: how useful the memory is likely to be later.
Answer with JSON only, matching the schema."""

USER_TEMPLATE = """{instructions}{roles}
{context}New messages (number, time, speaker: text):
{transcript}

Extract the memories."""

CONTEXT_TEMPLATE = """Earlier messages of this conversation (negative numbers) — context only, already processed:
{transcript}

"""

_ROLES = {
    ExtractRole.USER: "what the user (and any named person speaking as a user) says",
    ExtractRole.ASSISTANT: "what the assistant states",
    ExtractRole.ASSISTANT_CONFIRMED: ("a statement of the assistant that the user confirms in the next message "
                                      "(\"yes\", \"right\", \"exactly\"), written as the user's fact"),
}


def roles_line(roles: Collection[str]) -> str:
    wanted = [text for role, text in _ROLES.items() if role in roles]
    return "Extract memories from: " + "; ".join(wanted) + " (and any document). Nothing else."


class ExtractedMemory(BaseModel):
    text: str = Field(min_length=1, max_length=2000)
    memory_type: MemoryType = MemoryType.FACT
    evidence: list[int] = Field(default_factory=list)
    event_time: str | None = None
    importance: float = Field(default=0.5, ge=0.0, le=1.0)


class ExtractionResult(BaseModel):
    memories: list[ExtractedMemory] = Field(default_factory=list, max_length=200)
