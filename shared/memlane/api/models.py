"""Request and response models of the public HTTP API (they also make /openapi.json)."""

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from ..domain import limits
from ..domain.models import DEFAULT_EXTRACT_ROLES, ExtractRole
from ..domain.models import (AccessPolicy, AuditRecord, DreamMode, Memory, MemoryType, Message, RecordType, ScopeInfo,
                             Store, Task, ThreadSummary)
from ..domain.models import (ActorProfile, DreamAction, DreamActionKind, DreamActionStatus, DreamTask, MemoryDraft,
                             MemoryOrigin, Profile, ProfileEntry, ProfileFact)
from ..services.memories import Deleted
from ..services.search import SearchHit


class ApiModel(BaseModel):
    """A model of the HTTP API. Its validator is built when first used, not when this module is imported: a
    Lambda function imports all of them and uses those of its own routes (cold start: docs/benchmarks.md §9)."""

    model_config = ConfigDict(defer_build=True)


class Strict(ApiModel):
    """A request body: no unknown field. Numbers and booleans are declared strict field by field
    (`top_k: "5"`, `sync: "yes"` are refused, not coerced); times and enums still parse from JSON strings."""

    model_config = ConfigDict(extra="forbid")


def utc_representable(value: datetime) -> datetime:
    """9999-12-31T23:59:59-14:00 parses, but its UTC instant is past year 9999: refuse it here."""
    if value.tzinfo is not None:
        try:
            value.astimezone(timezone.utc)
        except OverflowError:
            raise ValueError("the time is out of range once converted to UTC") from None
    return value


Instant = Annotated[datetime, AfterValidator(utc_representable)]


class ScopeIn(Strict):
    """Scope as sent by a caller. The scope rules (required fields, wildcards) are checked by the core."""

    app_id: str | None = Field(default=None, max_length=256)
    tenant_id: str | None = Field(default=None, max_length=256)
    agent_id: str | list[str] | None = None  # a list is bounded by the scope rules (domain/scope.py)
    run_id: str | list[str] | None = None


class ScopeOut(ApiModel):
    app_id: str
    tenant_id: str
    agent_id: str
    run_id: str


class CreateStoreIn(Strict):
    name: str = Field(max_length=63)
    description: str = Field(default="", max_length=1000)
    extract_instructions: str = Field(default="", max_length=limits.MAX_INSTRUCTIONS_CHARS)
    dream_mode: DreamMode = DreamMode.PROPOSAL
    dream_threshold: float = Field(default=0.8, ge=0.0, le=1.0, strict=True)
    keywords_from_assistant: bool = Field(default=False, strict=True)
    # Distinct values (checked by the core: 400 invalid_extract_roles); an unknown one is 400 invalid_input.
    extract_roles: list[ExtractRole] = Field(default_factory=lambda: list(DEFAULT_EXTRACT_ROLES), min_length=1,
                                             max_length=len(ExtractRole))
    summary_trigger_tokens: int = Field(default=limits.DEFAULT_SUMMARY_TRIGGER_TOKENS, strict=True,
                                        ge=limits.MIN_SUMMARY_TRIGGER_TOKENS, le=limits.MAX_SUMMARY_TRIGGER_TOKENS)
    summary_keep_recent: int = Field(default=limits.DEFAULT_SUMMARY_KEEP_RECENT, strict=True, ge=0,
                                     le=limits.MAX_SUMMARY_KEEP_RECENT)


class UpdateStoreIn(Strict):
    """The settings a store may change after it is made (not its name, nor what its vectors were made with)."""

    description: str | None = Field(default=None, max_length=1000)
    extract_instructions: str | None = Field(default=None, max_length=limits.MAX_INSTRUCTIONS_CHARS)
    dream_mode: DreamMode | None = None
    dream_threshold: float | None = Field(default=None, ge=0.0, le=1.0, strict=True)
    keywords_from_assistant: bool | None = Field(default=None, strict=True)
    extract_roles: list[ExtractRole] | None = Field(default=None, min_length=1, max_length=len(ExtractRole))
    summary_trigger_tokens: int | None = Field(default=None, strict=True, ge=limits.MIN_SUMMARY_TRIGGER_TOKENS,
                                               le=limits.MAX_SUMMARY_TRIGGER_TOKENS)
    summary_keep_recent: int | None = Field(default=None, strict=True, ge=0, le=limits.MAX_SUMMARY_KEEP_RECENT)


class StoreOut(ApiModel):
    name: str
    description: str
    extract_instructions: str
    embedding_model: str
    embedding_dim: int
    dream_mode: DreamMode
    dream_threshold: float
    keywords_from_assistant: bool = False
    extract_roles: list[ExtractRole] = Field(default_factory=lambda: list(DEFAULT_EXTRACT_ROLES))
    summary_trigger_tokens: int = limits.DEFAULT_SUMMARY_TRIGGER_TOKENS
    summary_keep_recent: int = limits.DEFAULT_SUMMARY_KEEP_RECENT
    created_at: datetime

    @classmethod
    def of(cls, store: Store) -> "StoreOut":
        return cls.model_validate(store.model_dump())


class StoreList(ApiModel):
    stores: list[StoreOut]
    next_cursor: str | None = None


class MessageIn(Strict):
    role: Literal["user", "assistant", "system", "tool", "document"]
    content: str = Field(min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    name: str | None = Field(default=None, max_length=limits.MAX_NAME_CHARS)
    created_at: Instant | None = None


class ExplicitMemoryIn(Strict):
    """A memory written as given (infer: false)."""

    text: str = Field(min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    memory_type: MemoryType | None = None
    memory_id: str | None = Field(default=None, max_length=limits.MAX_REQUEST_ID_CHARS)
    event_time: Instant | None = None
    metadata: dict[str, Any] | None = None


class AddIn(Strict):
    scope: ScopeIn
    messages: list[MessageIn] | None = Field(default=None, max_length=limits.MAX_MESSAGES_PER_ADD)
    text: str | None = Field(default=None, min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    metadata: dict[str, Any] | None = None
    sync: bool = Field(default=False, strict=True)
    request_id: str | None = Field(default=None, max_length=limits.MAX_REQUEST_ID_CHARS)
    access_policy: AccessPolicy | None = None
    # infer: false writes `memories` as given (no extraction, no consolidation); messages and text infer.
    infer: bool = Field(default=True, strict=True)
    memories: list[ExplicitMemoryIn] | None = Field(default=None, max_length=limits.MAX_MEMORIES_PER_WRITE)

    @model_validator(mode="after")
    def _one_kind_of_write(self) -> "AddIn":
        if self.memories is not None and (self.messages is not None or self.text is not None):
            raise ValueError("give memories (with infer: false) or messages / text, not both")
        if self.memories is not None and (self.sync or self.access_policy is not None or self.metadata is not None):
            raise ValueError("sync, access_policy and metadata belong to messages / text adds; give metadata per memory")
        return self


class MessageOut(ApiModel):
    message_id: str
    role: str
    content: str
    name: str | None = None
    created_at: datetime

    @classmethod
    def of(cls, m: Message) -> "MessageOut":
        return cls(message_id=m.message_id, role=m.role, content=m.content, name=m.name, created_at=m.created_at)


class MessageList(ApiModel):
    messages: list[MessageOut]
    next_cursor: str | None = None


class MemoryOut(ApiModel):
    memory_id: str
    text: str
    memory_type: MemoryType
    origin: MemoryOrigin = MemoryOrigin.EXTRACTED
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
    observed_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None

    @classmethod
    def of(cls, m: Memory) -> "MemoryOut":
        return cls(memory_id=m.memory_id, text=m.text, memory_type=m.memory_type, origin=m.origin,
                   scope=ScopeOut(**m.scope.as_dict()), status=m.status, created_at=m.created_at, updated_at=m.updated_at, event_time=m.event_time,
                   metadata=m.metadata, importance=m.importance, evidence_ids=m.evidence, supersedes=m.supersedes,
                   superseded_by=m.superseded_by, observed_at=m.observed_at, valid_from=m.valid_from,
                   valid_to=m.valid_to)


class RedactedOut(ApiModel):
    """Records rewritten so that none keeps a copy of deleted content."""

    tasks: int
    dream_actions: int
    profiles: int


class MemoryDeletedOut(ApiModel):
    """The receipt of a memory delete: the memory and its text are gone; no tombstone keeps the text."""

    memory_id: str
    scope: ScopeOut
    status: str = "deleted"
    deleted_at: datetime
    redacted: RedactedOut
    merged: list[str] = []  # the memories a dream had merged into it (the same fact), deleted with it

    @classmethod
    def of(cls, d: Deleted) -> "MemoryDeletedOut":
        return cls(memory_id=d.memory_id, scope=ScopeOut(**d.scope.as_dict()), deleted_at=d.deleted_at,
                   redacted=RedactedOut(**vars(d.redacted)), merged=d.merged)


class MemoryList(ApiModel):
    memories: list[MemoryOut]
    next_cursor: str | None = None


class UpdateMemoryIn(Strict):
    app_id: str = Field(max_length=256)
    tenant_id: str = Field(max_length=256)
    text: str | None = Field(default=None, min_length=1, max_length=limits.MAX_CONTENT_CHARS)
    metadata: dict[str, Any] | None = None
    memory_type: MemoryType | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0, strict=True)


class OutcomeOut(ApiModel):
    action: str
    memory_id: str
    text: str = ""
    target_id: str | None = None
    target_ids: list[str] = Field(default_factory=list)
    reason: str = ""
    confidence: float | None = None
    action_id: str | None = None  # undo with POST /v1/stores/{store}/dream-actions/{action_id}/undo
    superseded: bool = False


class TaskOut(ApiModel):
    request_id: str
    kind: str = "extract"  # "extract" (an add), "summarize" (a forced summary refresh) or "explicit" (infer: false)
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
        return cls(request_id=task.request_id, kind=task.kind, status=task.status, scope=ScopeOut(**task.scope.as_dict()),
                   created_at=task.created_at, updated_at=task.updated_at, message_ids=task.message_ids,
                   memories=[MemoryOut.of(m) for m in memories or []],
                   outcomes=[OutcomeOut(**o.model_dump()) for o in task.outcomes], error=task.error,
                   attempts=task.attempts)


class TaskList(ApiModel):
    tasks: list[TaskOut]
    next_cursor: str | None = None


class AddAccepted(ApiModel):
    request_id: str
    status: str


class ExplicitWriteOut(ApiModel):
    """Memories written as given (infer: false): 201 when this request wrote any, 200 for a replay."""

    memories: list[MemoryOut]
    created: int


class SearchIn(Strict):
    query: str = Field(min_length=1, max_length=limits.MAX_QUERY_CHARS)
    scope: ScopeIn
    top_k: int = Field(default=limits.DEFAULT_TOP_K, ge=1, le=limits.MAX_TOP_K, strict=True)
    min_similarity: float = Field(default=0.0, ge=0.0, le=1.0, strict=True)
    include_evidence: bool = Field(default=False, strict=True)
    include_superseded: bool = Field(default=False, strict=True)
    filters: dict[str, Any] | None = None
    memory_types: list[MemoryType] | None = Field(default=None, max_length=6)
    time_from: Instant | None = None
    time_to: Instant | None = None
    as_of: Instant | None = None  # what held at that time (superseded memories included as they were)
    recipe: str | None = Field(default=None, max_length=64)
    # Which records: memories (the default), messages (searchable as soon as they are added), summaries.
    record_types: list[RecordType] | None = Field(default=None, min_length=1, max_length=len(RecordType))
    # With one scope.run_id (the thread asking): true stays in it, false reaches the tenant's other
    # threads too (if the asking thread's access policy recalls). Absent: the scope's runs as given.
    exact_thread_match: bool | None = Field(default=None, strict=True)

    @model_validator(mode="after")
    def _ordered_range(self) -> "SearchIn":
        if self.time_from and self.time_to and _utc(self.time_from) > _utc(self.time_to):
            raise ValueError("time_from must not be after time_to")
        return self


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class EvidenceOut(ApiModel):
    message_id: str
    role: str
    content: str
    name: str | None = None
    created_at: datetime


class SearchResultOut(ApiModel):
    memory_id: str  # the record's id: a memory's, a message's (its message_id), a summary's
    record_type: RecordType = RecordType.MEMORY
    text: str
    memory_type: MemoryType | None = None  # memories only
    role: str | None = None  # messages only: who said it
    name: str | None = None
    origin: MemoryOrigin = MemoryOrigin.EXTRACTED
    score: float
    similarity: float
    status: str
    scope: ScopeOut
    created_at: datetime
    event_time: datetime | None = None
    observed_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    evidence: list[EvidenceOut] | None = None

    @classmethod
    def of(cls, hit: SearchHit) -> "SearchResultOut":
        m = hit.memory
        evidence = None if hit.evidence is None else [EvidenceOut(**MessageOut.of(e).model_dump()) for e in hit.evidence]
        said = hit.message
        return cls(memory_id=m.memory_id, record_type=m.record_type, text=m.text,
                   memory_type=m.memory_type if m.record_type == RecordType.MEMORY else None,
                   role=said.role if said else None, name=said.name if said else None, origin=m.origin, score=hit.score,
                   similarity=hit.similarity, status=m.status, scope=ScopeOut(**m.scope.as_dict()),
                   created_at=m.created_at, event_time=m.event_time, observed_at=m.observed_at,
                   valid_from=m.valid_from, valid_to=m.valid_to, supersedes=m.supersedes,
                   superseded_by=m.superseded_by, metadata=m.metadata, evidence=evidence)


class SearchOut(ApiModel):
    results: list[SearchResultOut]


class ScopeInfoOut(ApiModel):
    scope: ScopeOut
    access_policy: AccessPolicy
    first_seen: datetime
    last_activity: datetime
    message_count: int

    @classmethod
    def of(cls, info: ScopeInfo) -> "ScopeInfoOut":
        return cls(scope=ScopeOut(**info.scope.as_dict()), access_policy=info.access_policy,
                   first_seen=info.first_seen, last_activity=info.last_activity, message_count=info.message_count)


class ScopeList(ApiModel):
    scopes: list[ScopeInfoOut]
    next_cursor: str | None = None


class AccessPolicyIn(Strict):
    scope: ScopeIn
    access_policy: AccessPolicy


class AuditList(ApiModel):
    requests: list[AuditRecord]  # the domain record is the public shape: nothing in it is internal
    next_cursor: str | None = None


class EraseTenantIn(Strict):
    app_id: str = Field(max_length=256)
    tenant_id: str = Field(max_length=256)


class ErasureOut(ApiModel):
    erasure_id: str
    app_id: str
    tenant_id: str
    principal: str
    status: str
    created_at: datetime
    updated_at: datetime
    deleted_items: int
    deleted_documents: int
    deleted: dict[str, dict[str, int]] = Field(default_factory=dict)  # per store: counts per record kind
    stores: list[str]
    dead_letters: int = 0  # the tenant's queued adds dropped from the ingestion dead-letter queue (AWS)
    error: str | None = None


class RunDeleted(ApiModel):
    messages: int
    memories: int
    summaries: int = 0  # the thread's summary (table item and index document)
    tasks_redacted: int
    dream_actions_redacted: int
    profiles_recomputed: int


# -- thread summaries -------------------------------------------------------------------------
class SummarySentenceOut(ApiModel):
    text: str
    evidence: list[str]  # the message ids it comes from


class SummaryOut(ApiModel):
    """A thread's rolling summary, with what it covers: the thread's messages up to `covered_until`
    (`covered_messages` of them); the most recent ones are left out on purpose."""

    thread_id: str
    scope: ScopeOut
    text: str
    sentences: list[SummarySentenceOut]
    open_items: list[str]
    decisions: list[str]
    evidence: list[str]
    covered_until: str | None
    covered_messages: int
    tokens: int
    tokenizer: str | None = None
    origin: str  # "llm" or "extractive"
    created_at: datetime
    updated_at: datetime
    age_seconds: float  # since the last refresh
    version: int

    @classmethod
    def of(cls, summary: ThreadSummary, *, now: datetime, tokenizer: str | None) -> "SummaryOut":
        return cls(thread_id=summary.scope.run_id, scope=ScopeOut(**summary.scope.as_dict()), text=summary.text,
                   sentences=[SummarySentenceOut(**s.model_dump()) for s in summary.sentences],
                   open_items=summary.open_items, decisions=summary.decisions, evidence=summary.evidence,
                   covered_until=summary.covered_until, covered_messages=summary.covered_messages,
                   tokens=summary.tokens, tokenizer=tokenizer, origin=summary.origin, created_at=summary.created_at,
                   updated_at=summary.updated_at,
                   age_seconds=round(max(0.0, (now - summary.updated_at).total_seconds()), 3),
                   version=summary.version)


class SummaryRefreshAccepted(ApiModel):
    """A forced refresh, queued: poll GET /v1/stores/{store}/tasks/{request_id} like an extraction."""

    request_id: str
    kind: str
    status: str
    scope: ScopeOut


# -- dream ------------------------------------------------------------------------------------
class DreamScopeIn(Strict):
    """A tenant, optionally narrowed to one agent and one run ('*' or absent = all)."""

    app_id: str | None = Field(default=None, max_length=256)
    tenant_id: str | None = Field(default=None, max_length=256)
    agent_id: str | None = Field(default=None, max_length=256)
    run_id: str | None = Field(default=None, max_length=256)


class DreamIn(Strict):
    scope: DreamScopeIn
    mode: DreamMode | None = None  # default: the store's dream_mode
    threshold: float | None = Field(default=None, ge=0.0, le=1.0, strict=True)  # default: the store's
    kinds: list[DreamActionKind] | None = Field(default=None, max_length=len(DreamActionKind))  # default: all
    sync: bool = Field(default=False, strict=True)


class DreamScopeOut(ApiModel):
    app_id: str
    tenant_id: str
    agent_id: str | None = None
    run_id: str | None = None


class MemoryDraftOut(ApiModel):
    text: str
    memory_type: MemoryType
    scope: ScopeOut
    evidence_ids: list[str] = Field(default_factory=list)
    event_time: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, d: MemoryDraft) -> "MemoryDraftOut":
        return cls(text=d.text, memory_type=d.memory_type, scope=ScopeOut(**d.scope.as_dict()),
                   evidence_ids=d.evidence, event_time=d.event_time, metadata=d.metadata)


class ProfileEntryOut(ApiModel):
    name: str
    value: str
    confidence: float
    evidence_ids: list[str] = Field(default_factory=list)  # memory ids
    since: datetime | None = None
    previous: list[str] = Field(default_factory=list)


class ProfileSkillOut(ApiModel):
    memory_id: str
    title: str


class ProfileOut(ApiModel):
    app_id: str
    tenant_id: str
    agent_id: str | None = None
    subject: str
    attributes: list[ProfileEntryOut]
    preferences: list[ProfileEntryOut]
    skills: list[ProfileSkillOut]
    summary: str
    version: int
    updated_at: datetime | None = None
    task_id: str | None = None
    action_id: str | None = None

    @classmethod
    def of(cls, p: Profile) -> "ProfileOut":
        def entries(items: list[ProfileEntry]) -> list[ProfileEntryOut]:
            return [ProfileEntryOut(name=e.name, value=e.value, confidence=e.confidence, evidence_ids=e.evidence,
                                    since=e.since, previous=e.previous) for e in items]

        return cls(app_id=p.app_id, tenant_id=p.tenant_id, agent_id=p.agent_id, subject=p.subject,
                   attributes=entries(p.attributes), preferences=entries(p.preferences),
                   skills=[ProfileSkillOut(memory_id=s.memory_id, title=s.title) for s in p.skills],
                   summary=p.summary, version=p.version, updated_at=p.updated_at, task_id=p.task_id,
                   action_id=p.action_id)


class DreamActionOut(ApiModel):
    action_id: str
    task_id: str
    kind: DreamActionKind
    status: DreamActionStatus
    confidence: float
    rationale: str
    scope: ScopeOut
    target_ids: list[str] = Field(default_factory=list)  # memories it supersedes or deletes
    keep_id: str | None = None  # the memory that stays
    before: list[MemoryOut] = Field(default_factory=list)  # the memories involved, as proposed
    after: MemoryDraftOut | None = None  # what the surviving / new memory says
    profile: ProfileOut | None = None
    created_ids: list[str] = Field(default_factory=list)
    undoable: bool = False
    created_at: datetime
    updated_at: datetime
    decided_at: datetime | None = None
    error: str | None = None

    @classmethod
    def of(cls, a: DreamAction) -> "DreamActionOut":
        return cls(action_id=a.action_id, task_id=a.task_id, kind=a.kind, status=a.status, confidence=a.confidence,
                   rationale=a.rationale, scope=ScopeOut(**a.scope.as_dict()), target_ids=a.target_ids,
                   keep_id=a.keep_id, before=[MemoryOut.of(m) for m in a.before],
                   after=MemoryDraftOut.of(a.after) if a.after else None,
                   profile=ProfileOut.of(a.profile) if a.profile else None, created_ids=a.created_ids,
                   undoable=a.status == DreamActionStatus.APPLIED and not a.error, created_at=a.created_at,
                   updated_at=a.updated_at, decided_at=a.decided_at, error=a.error)


class DreamActionList(ApiModel):
    actions: list[DreamActionOut]
    next_cursor: str | None = None


class DreamTaskOut(ApiModel):
    task_id: str
    status: str
    scope: DreamScopeOut
    mode: DreamMode
    threshold: float
    kinds: list[DreamActionKind]
    trigger: str
    engine: str
    stats: dict[str, int] = Field(default_factory=dict)
    action_ids: list[str] = Field(default_factory=list)
    actions: list[DreamActionOut] | None = None  # with sync=true
    created_at: datetime
    updated_at: datetime
    error: str | None = None
    attempts: int

    @classmethod
    def of(cls, t: DreamTask, actions: list[DreamAction] | None = None) -> "DreamTaskOut":
        return cls(task_id=t.task_id, status=t.status, scope=DreamScopeOut(**t.scope.model_dump()), mode=t.mode,
                   threshold=t.threshold, kinds=t.kinds, trigger=t.trigger, engine=t.engine, stats=t.stats,
                   action_ids=t.action_ids,
                   actions=None if actions is None else [DreamActionOut.of(a) for a in actions],
                   created_at=t.created_at, updated_at=t.updated_at, error=t.error, attempts=t.attempts)


class DreamTaskList(ApiModel):
    tasks: list[DreamTaskOut]
    next_cursor: str | None = None


# -- threads ----------------------------------------------------------------------------------
class ThreadScopeIn(Strict):
    """The thread's tenant and agent; the thread id is its run_id."""

    app_id: str | None = Field(default=None, max_length=256)
    tenant_id: str | None = Field(default=None, max_length=256)
    agent_id: str | None = Field(default=None, max_length=256)


class ThreadIn(Strict):
    thread_id: str | None = Field(default=None, max_length=256)  # default: a new id
    scope: ThreadScopeIn
    access_policy: AccessPolicy | None = None
    metadata: dict[str, Any] | None = None


class SummaryStateOut(ApiModel):
    """How far a thread's summary has got (the summary itself: GET .../threads/{id}/summary)."""

    covered_until: str | None
    covered_messages: int
    tokens: int
    origin: str
    updated_at: datetime

    @classmethod
    def of(cls, summary: ThreadSummary) -> "SummaryStateOut":
        return cls(covered_until=summary.covered_until, covered_messages=summary.covered_messages,
                   tokens=summary.tokens, origin=summary.origin, updated_at=summary.updated_at)


class ThreadOut(ApiModel):
    thread_id: str
    scope: ScopeOut  # run_id = thread_id
    access_policy: AccessPolicy
    message_count: int
    token_count: int  # tokens of its messages, by the service's tokenizer
    tokenizer: str | None = None
    created_at: datetime
    last_activity: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
    summary: SummaryStateOut | None = None  # None until the thread's first summary

    @classmethod
    def of(cls, info: ScopeInfo, tokenizer: str | None = None, summary: ThreadSummary | None = None) -> "ThreadOut":
        return cls(thread_id=info.scope.run_id, scope=ScopeOut(**info.scope.as_dict()),
                   access_policy=info.access_policy, message_count=info.message_count, token_count=info.token_count,
                   tokenizer=tokenizer, created_at=info.first_seen, last_activity=info.last_activity,
                   metadata=info.metadata, summary=SummaryStateOut.of(summary) if summary else None)


class ThreadList(ApiModel):
    threads: list[ThreadOut]
    next_cursor: str | None = None



# -- actor profiles ---------------------------------------------------------------------------
class TenantProfileIn(Strict):
    app_id: str = Field(max_length=256)
    text: str | None = Field(default=None, max_length=limits.MAX_PROFILE_TEXT_CHARS)
    attributes: dict[str, str] | None = Field(default=None, max_length=limits.MAX_PROFILE_ATTRIBUTES)


class AgentProfileIn(TenantProfileIn):
    tenant_id: str = Field(max_length=256)


class ProfileFactOut(ApiModel):
    name: str
    value: str
    origin: Literal["explicit", "distilled"]
    confidence: float | None = None
    evidence_ids: list[str] = Field(default_factory=list)  # memory ids (distilled)
    since: datetime | None = None

    @classmethod
    def of(cls, f: ProfileFact) -> "ProfileFactOut":
        return cls(name=f.name, value=f.value, origin=f.origin, confidence=f.confidence, evidence_ids=f.evidence,
                   since=f.since)


class ActorProfileOut(ApiModel):
    """A tenant's or an agent's profile: explicit merged with distilled (explicit wins), `text` rendered.
    The distilled profile's own fields (subject, summary, version, ...) are kept as they were."""

    app_id: str
    tenant_id: str
    agent_id: str | None = None
    text: str
    explicit_text: str = ""
    explicit_updated_at: datetime | None = None
    attributes: list[ProfileFactOut]
    preferences: list[ProfileFactOut]
    overridden: list[ProfileFactOut] = Field(default_factory=list)
    skills: list[ProfileSkillOut]
    subject: str = ""
    summary: str = ""
    version: int = 0
    updated_at: datetime | None = None
    task_id: str | None = None
    action_id: str | None = None

    @classmethod
    def of(cls, p: ActorProfile) -> "ActorProfileOut":
        d = p.distilled
        return cls(app_id=p.app_id, tenant_id=p.tenant_id, agent_id=p.agent_id, text=p.text,
                   explicit_text=p.explicit_text, explicit_updated_at=p.explicit.updated_at if p.explicit else None,
                   attributes=[ProfileFactOut.of(f) for f in p.attributes],
                   preferences=[ProfileFactOut.of(f) for f in p.preferences],
                   overridden=[ProfileFactOut.of(f) for f in p.overridden],
                   skills=[ProfileSkillOut(memory_id=s.memory_id, title=s.title) for s in p.skills],
                   subject=d.subject if d else "", summary=d.summary if d else "", version=d.version if d else 0,
                   updated_at=d.updated_at if d else None, task_id=d.task_id if d else None,
                   action_id=d.action_id if d else None)


class ErrorBody(ApiModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(ApiModel):
    error: ErrorBody


# -- many adds in one request (POST .../memories:batch) and the ingestion queue ------------------------


class AddBatchIn(Strict):
    """Up to MAX_ADDS_PER_BATCH add bodies, each exactly what POST .../memories takes (`sync` excepted).
    Items are validated one by one, so a bad add is refused in its own result, not with the batch."""

    adds: list[dict[str, Any]] = Field(min_length=1, max_length=limits.MAX_ADDS_PER_BATCH,
                                       description="each an add body (AddIn) of POST /v1/stores/{store}/memories")


class AddResult(ApiModel):
    """What one add of a batch (or one message of the ingestion queue) came to."""

    index: int
    # accepted: written now; replayed: its request_id was accepted before with the same body (nothing written);
    # refused: a 4xx (fix the add, retrying it will not help); failed: transient (429/5xx) — send it again,
    # same request_id
    outcome: Literal["accepted", "replayed", "refused", "failed"]
    status: int  # what POST .../memories would have answered for this add
    request_id: str | None = None
    task_status: str | None = None
    error: ErrorBody | None = None


class AddBatchOut(ApiModel):
    results: list[AddResult]  # in the order of `adds`
    accepted: int
    replayed: int
    refused: int
    failed: int
