"""Request and response models of the public HTTP API (they also make /openapi.json)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..domain import limits
from ..domain.models import AccessPolicy, DreamMode, Memory, MemoryType, Message, ScopeInfo, Store, Task
from ..services.search import SearchHit


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScopeIn(Strict):
    """Scope as sent by a caller. The scope rules (required fields, wildcards) are checked by the core."""

    app_id: str | None = Field(default=None, max_length=256)
    tenant_id: str | None = Field(default=None, max_length=256)
    agent_id: str | list[str] | None = None
    run_id: str | list[str] | None = None


class ScopeOut(BaseModel):
    app_id: str
    tenant_id: str
    agent_id: str
    run_id: str


class CreateStoreIn(Strict):
    name: str = Field(max_length=63)
    description: str = Field(default="", max_length=1000)
    extract_instructions: str = Field(default="", max_length=limits.MAX_INSTRUCTIONS_CHARS)
    dream_mode: DreamMode = DreamMode.PROPOSAL
    dream_threshold: float = Field(default=0.8, ge=0.0, le=1.0)


class StoreOut(BaseModel):
    name: str
    description: str
    extract_instructions: str
    embedding_model: str
    embedding_dim: int
    dream_mode: DreamMode
    dream_threshold: float
    created_at: datetime

    @classmethod
    def of(cls, store: Store) -> "StoreOut":
        return cls.model_validate(store.model_dump())


class StoreList(BaseModel):
    stores: list[StoreOut]
    next_cursor: str | None = None


class MessageIn(Strict):
    role: Literal["user", "assistant", "system", "tool", "document"]
    content: str = Field(min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    name: str | None = Field(default=None, max_length=limits.MAX_NAME_CHARS)
    created_at: datetime | None = None


class AddIn(Strict):
    scope: ScopeIn
    messages: list[MessageIn] | None = Field(default=None, max_length=limits.MAX_MESSAGES_PER_ADD)
    text: str | None = Field(default=None, min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    metadata: dict[str, Any] | None = None
    sync: bool = False
    request_id: str | None = Field(default=None, max_length=limits.MAX_REQUEST_ID_CHARS)
    access_policy: AccessPolicy | None = None


class MessageOut(BaseModel):
    message_id: str
    role: str
    content: str
    name: str | None = None
    created_at: datetime

    @classmethod
    def of(cls, m: Message) -> "MessageOut":
        return cls(message_id=m.message_id, role=m.role, content=m.content, name=m.name, created_at=m.created_at)


class MessageList(BaseModel):
    messages: list[MessageOut]
    next_cursor: str | None = None


class MemoryOut(BaseModel):
    memory_id: str
    text: str
    memory_type: MemoryType
    scope: ScopeOut
    status: str
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    importance: float
    evidence_ids: list[str] = Field(default_factory=list)
    supersedes: str | None = None
    superseded_by: str | None = None

    @classmethod
    def of(cls, m: Memory) -> "MemoryOut":
        return cls(memory_id=m.memory_id, text=m.text, memory_type=m.memory_type, scope=ScopeOut(**m.scope.as_dict()),
                   status=m.status, created_at=m.created_at, updated_at=m.updated_at, event_time=m.event_time,
                   metadata=m.metadata, importance=m.importance, evidence_ids=m.evidence, supersedes=m.supersedes,
                   superseded_by=m.superseded_by)


class MemoryList(BaseModel):
    memories: list[MemoryOut]
    next_cursor: str | None = None


class UpdateMemoryIn(Strict):
    app_id: str = Field(max_length=256)
    tenant_id: str = Field(max_length=256)
    text: str | None = Field(default=None, min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    metadata: dict[str, Any] | None = None
    memory_type: MemoryType | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)


class OutcomeOut(BaseModel):
    action: str
    memory_id: str
    text: str = ""
    target_id: str | None = None


class TaskOut(BaseModel):
    request_id: str
    status: str
    scope: ScopeOut
    created_at: datetime
    updated_at: datetime
    message_ids: list[str]
    memories: list[MemoryOut] = Field(default_factory=list)
    outcomes: list[OutcomeOut] = Field(default_factory=list)
    error: str | None = None
    attempts: int = 0

    @classmethod
    def of(cls, task: Task, memories: list[Memory] | None = None) -> "TaskOut":
        return cls(request_id=task.request_id, status=task.status, scope=ScopeOut(**task.scope.as_dict()),
                   created_at=task.created_at, updated_at=task.updated_at, message_ids=task.message_ids,
                   memories=[MemoryOut.of(m) for m in memories or []],
                   outcomes=[OutcomeOut(**o.model_dump()) for o in task.outcomes], error=task.error,
                   attempts=task.attempts)


class TaskList(BaseModel):
    tasks: list[TaskOut]
    next_cursor: str | None = None


class AddAccepted(BaseModel):
    request_id: str
    status: str


class SearchIn(Strict):
    query: str = Field(min_length=1, max_length=limits.MAX_QUERY_CHARS)
    scope: ScopeIn
    top_k: int = Field(default=limits.DEFAULT_TOP_K, ge=1, le=limits.MAX_TOP_K)
    min_similarity: float = Field(default=0.0, ge=0.0, le=1.0)
    include_evidence: bool = False
    include_superseded: bool = False
    filters: dict[str, Any] | None = None
    memory_types: list[MemoryType] | None = Field(default=None, max_length=6)
    time_from: datetime | None = None
    time_to: datetime | None = None
    recipe: str | None = Field(default=None, max_length=64)


class EvidenceOut(BaseModel):
    message_id: str
    role: str
    content: str
    name: str | None = None
    created_at: datetime


class SearchResultOut(BaseModel):
    memory_id: str
    text: str
    memory_type: MemoryType
    score: float
    similarity: float
    status: str
    scope: ScopeOut
    created_at: datetime
    event_time: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    evidence: list[EvidenceOut] | None = None

    @classmethod
    def of(cls, hit: SearchHit) -> "SearchResultOut":
        m = hit.memory
        evidence = None if hit.evidence is None else [EvidenceOut(**MessageOut.of(e).model_dump()) for e in hit.evidence]
        return cls(memory_id=m.memory_id, text=m.text, memory_type=m.memory_type, score=hit.score,
                   similarity=hit.similarity, status=m.status, scope=ScopeOut(**m.scope.as_dict()),
                   created_at=m.created_at, event_time=m.event_time, metadata=m.metadata, evidence=evidence)


class SearchOut(BaseModel):
    results: list[SearchResultOut]


class ScopeInfoOut(BaseModel):
    scope: ScopeOut
    access_policy: AccessPolicy
    first_seen: datetime
    last_activity: datetime
    message_count: int

    @classmethod
    def of(cls, info: ScopeInfo) -> "ScopeInfoOut":
        return cls(scope=ScopeOut(**info.scope.as_dict()), access_policy=info.access_policy,
                   first_seen=info.first_seen, last_activity=info.last_activity, message_count=info.message_count)


class ScopeList(BaseModel):
    scopes: list[ScopeInfoOut]
    next_cursor: str | None = None


class AccessPolicyIn(Strict):
    scope: ScopeIn
    access_policy: AccessPolicy


class AuditRecordOut(BaseModel):
    request_id: str
    store: str
    operation: str
    principal: str
    status: int
    error_code: str | None = None
    latency_ms: float
    app_id: str | None = None
    tenant_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    at: datetime


class AuditList(BaseModel):
    requests: list[AuditRecordOut]
    next_cursor: str | None = None


class EraseTenantIn(Strict):
    app_id: str = Field(max_length=256)
    tenant_id: str = Field(max_length=256)


class ErasureOut(BaseModel):
    erasure_id: str
    app_id: str
    tenant_id: str
    principal: str
    status: str
    created_at: datetime
    updated_at: datetime
    deleted_items: int
    deleted_documents: int
    stores: list[str]
    error: str | None = None


class RunDeleted(BaseModel):
    messages: int
    memories: int


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorBody
