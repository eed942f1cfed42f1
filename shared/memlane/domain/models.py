"""Domain models. Plain pydantic v2; no I/O."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidInput
from .scope import Scope

_STORE_NAME = re.compile(r"^[a-z0-9][a-z0-9\-]{0,62}$")


def validate_store_name(name: Any) -> str:
    # Lower case, digits and '-' only: a store name becomes an OpenSearch index name and a key part.
    if not isinstance(name, str) or not _STORE_NAME.fullmatch(name):
        raise InvalidInput("store name must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
                           code="invalid_store_name", field="name")
    return name


class MemoryType(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    EVENT = "event"
    PLAN = "plan"
    PROCEDURE = "procedure"
    SUMMARY = "summary"


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    DELETED = "deleted"


class TaskStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


class AccessPolicy(StrEnum):
    RECALL_AND_STORE = "recall_and_store"
    RECALL_ONLY = "recall_only"
    STORE_ONLY = "store_only"
    NONE = "none"

    @property
    def extracts(self) -> bool:
        return self in (AccessPolicy.RECALL_AND_STORE, AccessPolicy.STORE_ONLY)

    @property
    def recalls(self) -> bool:
        return self in (AccessPolicy.RECALL_AND_STORE, AccessPolicy.RECALL_ONLY)


class DreamMode(StrEnum):
    PROPOSAL = "proposal"
    SAFE_AUTO = "safe_auto"


class Store(BaseModel):
    """A memory store: an isolated namespace with its own settings."""

    name: str
    description: str = ""
    extract_instructions: str = ""
    embedding_model: str = ""
    embedding_dim: int = 0
    dream_mode: DreamMode = DreamMode.PROPOSAL
    dream_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    created_at: datetime


class Message(BaseModel):
    """A raw conversation turn. Never rewritten."""

    model_config = ConfigDict(frozen=True)

    message_id: str
    scope: Scope
    role: str
    content: str
    name: str | None = None
    created_at: datetime
    request_id: str


class Memory(BaseModel):
    """A durable, self-contained statement distilled from messages, with evidence links."""

    memory_id: str
    scope: Scope
    memory_type: MemoryType = MemoryType.FACT
    text: str
    evidence: list[str] = Field(default_factory=list)  # message ids
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None = None
    status: MemoryStatus = MemoryStatus.ACTIVE
    supersedes: str | None = None
    superseded_by: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    # Extra words for keyword search that are not part of the statement (speaker names, dates).
    keywords: str = ""
    request_id: str | None = None


class ExtractAction(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"


class TaskOutcome(BaseModel):
    action: ExtractAction
    memory_id: str
    text: str = ""
    target_id: str | None = None  # the memory an UPDATE superseded / a NOOP matched / a DELETE removed


class Task(BaseModel):
    """The asynchronous extraction job created by one add request."""

    request_id: str
    store: str
    scope: Scope
    status: TaskStatus = TaskStatus.PENDING
    created_at: datetime
    updated_at: datetime
    message_ids: list[str] = Field(default_factory=list)
    text: str | None = None  # plain-text adds carry their text here instead of messages
    metadata: dict[str, Any] = Field(default_factory=dict)
    extract: bool = True
    outcomes: list[TaskOutcome] = Field(default_factory=list)
    error: str | None = None
    attempts: int = 0

    @property
    def memory_ids(self) -> list[str]:
        return [o.memory_id for o in self.outcomes if o.action in (ExtractAction.ADD, ExtractAction.UPDATE)]


class ScopeInfo(BaseModel):
    """What the scope registry knows of one concrete scope."""

    scope: Scope
    access_policy: AccessPolicy = AccessPolicy.RECALL_AND_STORE
    first_seen: datetime
    last_activity: datetime
    message_count: int = 0


class Candidate(BaseModel):
    """A memory an extractor proposes, before it is compared with what the scope already holds."""

    text: str
    memory_type: MemoryType = MemoryType.FACT
    evidence: list[str] = Field(default_factory=list)
    event_time: datetime | None = None
    keywords: str = ""
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
