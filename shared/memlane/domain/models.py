"""Domain models. Plain pydantic v2; no I/O."""

import re
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import limits
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


class RecordType(StrEnum):
    """What an index document is: a distilled memory, a raw message (searchable as soon as it is added),
    or a thread summary."""

    MEMORY = "memory"
    MESSAGE = "message"
    SUMMARY = "summary"


class MemoryOrigin(StrEnum):
    """How a memory came to be: distilled from messages (extraction, dream), or written as given."""

    EXTRACTED = "extracted"
    EXPLICIT = "explicit"  # POST .../memories with infer: false: no extraction, no consolidation


class TaskStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)

    @property
    def worked_on(self) -> bool:
        """A job delivery working on it may still end it SUCCEEDED: RUNNING, or FAILED by the queue's last delivery
        giving the job up meanwhile (what the working one wrote is there; the task says so). Not PENDING: queued
        again, its new job runs it."""
        return self in (TaskStatus.RUNNING, TaskStatus.FAILED)


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


class ExtractRole(StrEnum):
    """Whose statements a store extracts memories from (a plain-text add, a document, always is).

    `assistant_confirmed`: what the assistant states and the user confirms in the next turn ("yes",
    "right", "exactly") — the user's word makes it the user's fact. `assistant`: everything the
    assistant states (it restates, offers, guesses: opt in only when the agent's own words are worth keeping)."""

    USER = "user"
    ASSISTANT = "assistant"
    ASSISTANT_CONFIRMED = "assistant_confirmed"


DEFAULT_EXTRACT_ROLES = (ExtractRole.USER,)


def validate_extract_roles(roles: Any) -> list[ExtractRole]:
    """A non-empty list of distinct known roles (a store that extracts nothing uses access policy recall_only)."""
    known = ", ".join(r.value for r in ExtractRole)
    if not isinstance(roles, (list, tuple)) or not roles or len(set(map(str, roles))) != len(roles) \
            or not all(isinstance(r, str) and r in ExtractRole._value2member_map_ for r in roles):
        raise InvalidInput(f"extract_roles must be a non-empty list of distinct values among {known}",
                           code="invalid_extract_roles", field="extract_roles")
    return [ExtractRole(r) for r in roles]


class Store(BaseModel):
    """A memory store: an isolated namespace with its own settings."""

    name: str
    description: str = ""
    extract_instructions: str = ""
    embedding_model: str = ""
    embedding_dim: int = 0
    dream_mode: DreamMode = DreamMode.PROPOSAL
    dream_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    # Whether the assistant's turns lend words to the hidden keywords of the memories near them.
    keywords_from_assistant: bool = False
    # Whose turns memories are extracted from (ExtractRole); records written before the setting: the user's.
    extract_roles: list[ExtractRole] = Field(default_factory=lambda: list(DEFAULT_EXTRACT_ROLES))
    # Thread summaries (services/summaries.py): refreshed once the part of a thread not yet summarised,
    # leaving out its last `summary_keep_recent` messages, reaches `summary_trigger_tokens` tokens.
    summary_trigger_tokens: int = Field(default=limits.DEFAULT_SUMMARY_TRIGGER_TOKENS,
                                        ge=limits.MIN_SUMMARY_TRIGGER_TOKENS, le=limits.MAX_SUMMARY_TRIGGER_TOKENS)
    summary_keep_recent: int = Field(default=limits.DEFAULT_SUMMARY_KEEP_RECENT, ge=0,
                                     le=limits.MAX_SUMMARY_KEEP_RECENT)
    created_at: datetime
    # What the store's vectors were made with, beyond the name: a few reference texts embedded, quantised
    # (services/embedder_guard.py). A process whose embedder disagrees refuses the store's writes and searches.
    embedding_fingerprint: str | None = None
    embedding_probe: list[list[int]] | None = None
    version: int = 0  # bumped by every rewrite of the record; rewrites are conditioned on it


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
    record_type: RecordType = RecordType.MEMORY
    text: str
    evidence: list[str] = Field(default_factory=list)  # message ids
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None = None  # what the statement is about ("last Saturday")
    # When it was said (its message's time), and when it held: from then until a newer statement
    # superseded it (valid_to, closed on supersede). None on memories written before these existed.
    observed_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    status: MemoryStatus = MemoryStatus.ACTIVE
    supersedes: str | None = None
    superseded_by: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    # Extra words for keyword search that are not part of the statement (speaker names, dates).
    keywords: str = ""
    # What a search reads of the text to rank it among its hits, made when it is written (policies/conflicts.py)
    # and sealed by a digest of the text: one missing or stale is read again. Never shown; emptied with the text.
    reading: str = ""
    request_id: str | None = None
    origin: MemoryOrigin = MemoryOrigin.EXTRACTED
    # The other runs whose memories' words its text carries (a dream's text made of several runs' memories):
    # it goes when any of them is deleted, as it does with its own (services/erase.py).
    drawn_from: list[Scope] = Field(default_factory=list)


class SummarySentence(BaseModel):
    text: str
    evidence: list[str] = Field(default_factory=list)  # the message ids it comes from


class ThreadSummary(BaseModel):
    """A thread's rolling summary: built incrementally (previous summary + the messages since), never
    covering the last few messages. Its sentences cite their messages."""

    scope: Scope  # the thread (run) it summarises
    sentences: list[SummarySentence] = Field(default_factory=list)
    open_items: list[str] = Field(default_factory=list)  # goals, questions, plans still open
    decisions: list[str] = Field(default_factory=list)
    cited: dict[str, list[str]] = Field(default_factory=dict)  # an open item's or decision's messages (extractive)
    covered_until: str | None = None  # id of the newest message the summary covers
    covered_messages: int = 0
    # Messages stored below `covered_until` after it was written (an add stamped earlier, or committed
    # after a refresh read past its time): not yet covered, the next refresh takes them in.
    late: list[str] = Field(default_factory=list)
    folded: list[str] = Field(default_factory=list)  # the latest messages taken in: never noted late
    # When the refresh that wrote it read the thread: a message stored after may be below `covered_until`
    # unread. None: written before this was kept (its `updated_at` stands for it).
    read_at: datetime | None = None
    tokens: int = 0
    origin: str = "extractive"  # "llm" or "extractive"
    created_at: datetime
    updated_at: datetime
    version: int = 0

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)

    @property
    def evidence(self) -> list[str]:
        return list(dict.fromkeys(e for s in self.sentences for e in s.evidence))


class ExtractAction(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"


# What a record about a deleted memory or run says in place of its words (a task's outcome, a dream action).
REDACTED = "redacted: a memory or run it was about was deleted"


class TaskOutcome(BaseModel):
    action: ExtractAction
    memory_id: str
    text: str = ""  # the statement, its first MAX_OUTCOME_TEXT_CHARS characters (the memory holds it whole)
    target_id: str | None = None  # the memory an UPDATE superseded / a NOOP matched / a DELETE closed
    target_ids: list[str] = Field(default_factory=list)  # every memory it superseded or closed
    reason: str = ""  # why (consolidation's reading of the two statements)
    confidence: float | None = None
    # The applied action in the dream action log that made the change: undo it there to revert it.
    action_id: str | None = None
    superseded: bool = False  # said before the memory it contradicts: written already superseded

    @field_validator("text")
    @classmethod
    def _preview(cls, text: str) -> str:
        cap = limits.MAX_OUTCOME_TEXT_CHARS
        return text if len(text) <= cap else text[:cap - 1] + "…"

    @model_validator(mode="after")
    def _redacted_whole(self) -> "TaskOutcome":
        # An outcome without its statement was redacted: a reason quoting words goes too — also one a version before
        # 2026-12-04 redacted, keeping the reason (an upgrade trial).
        if not self.text and self.reason != REDACTED and ("'" in self.reason or '"' in self.reason):
            self.reason = REDACTED
        return self


EXPLICIT_WRITE = "explicit"  # the kind of a task that records a write of memories as given (services/explicit.py)


class Candidate(BaseModel):
    """A memory an extractor proposes, before it is compared with what the scope already holds."""

    text: str
    memory_type: MemoryType = MemoryType.FACT
    evidence: list[str] = Field(default_factory=list)
    event_time: datetime | None = None
    keywords: str = ""
    importance: float = Field(default=0.5, ge=0.0, le=1.0)


class Task(BaseModel):
    """The asynchronous job created by one add request (an extraction), or by a forced summary refresh."""

    request_id: str
    kind: str = "extract"  # "extract" | "summarize": which job runs it (services/jobs.py); "explicit": a write as given
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
    # sha256 of the add's canonical body (scope, messages or text, metadata, access policy): a request_id
    # reused with another body is refused. None on tasks written before it was recorded.
    body_hash: str | None = None
    # The add wrote its messages to the search index (set right after): its job need not index them
    # again. None on tasks written before messages were indexed.
    messages_indexed: bool | None = None
    # The memories an attempt of its job set out to write, noted before it wrote them: a retry finds what an
    # earlier attempt left, whatever the model answers it (services/consolidate.py).
    written_ids: list[str] = Field(default_factory=list)
    # The extractor's answer by statement key (services/task_ids.py), recorded with the first `written_ids`, before
    # anything is written: a retry decides on it again instead of asking the model, whose answer is not repeatable,
    # so nothing new appears beside a memory the user deleted meanwhile — whose statement is None here from then on
    # (services/redaction.py). None: not recorded (no write yet, a task before 2026-12-07, an answer over
    # limits.MAX_RECORDED_ANSWER_BYTES). Dropped when the task succeeds.
    answer: dict[str, Candidate | None] | None = None

    @property
    def memory_ids(self) -> list[str]:
        return [o.memory_id for o in self.outcomes if o.action in (ExtractAction.ADD, ExtractAction.UPDATE)]


class ScopeInfo(BaseModel):
    """What the scope registry knows of one concrete scope. A run is a thread: this is the thread's record."""

    scope: Scope
    access_policy: AccessPolicy = AccessPolicy.RECALL_AND_STORE
    first_seen: datetime
    last_activity: datetime
    message_count: int = 0
    token_count: int = 0  # tokens of its messages (Deps.tokenizer), counted in the add that wrote them
    metadata: dict[str, Any] = Field(default_factory=dict)  # the thread's, given when it was created
    # Bumped by every write of the entry, each conditioned on the version it read (0: written before
    # versions, no attribute), so an add and a policy change can never overwrite each other.
    version: int = 0


class Grant(BaseModel):
    """What a principal may touch: per app, the tenants it may use ("*" = every tenant of the app)."""

    principal: str
    apps: dict[str, list[str]] = Field(default_factory=dict)
    admin: bool = False  # may manage stores, grants and read the audit log of every store
    created_at: datetime

    def allows(self, app_id: str, tenant_id: str) -> bool:
        if self.admin:
            return True
        tenants = self.apps.get(app_id) or self.apps.get("*")
        return bool(tenants) and ("*" in tenants or tenant_id in tenants)  # type: ignore[operator]


class AuditRecord(BaseModel):
    """One request, as the audit log keeps it."""

    request_id: str
    store: str
    operation: str  # METHOD route, e.g. "POST /v1/stores/{store}/search"
    target_id: str | None = None  # the record a route addresses by id: the memory deleted, the task read
    principal: str
    status: int
    error_code: str | None = None
    latency_ms: float
    app_id: str | None = None
    tenant_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    at: datetime


# ---------------------------------------------------------------------------------------------
# Dream: scheduled consolidation. Activity registry, dream tasks, their actions, profiles.
# ---------------------------------------------------------------------------------------------


class ActivityInfo(BaseModel):
    """One concrete scope's entry in the store's activity registry: what the dream scheduler reads.

    A scope is *due* while `pending_since` is set: it received messages or memories after its
    last dream claimed it. `queued_*` marks a dream the scheduler has queued but not yet started.
    """

    scope: Scope
    last_activity: datetime
    pending_since: datetime | None = None
    last_dream: datetime | None = None
    last_dream_task: str | None = None
    queued_task: str | None = None
    queued_at: datetime | None = None


class DreamActionKind(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"  # supersede memories by a newer one (kept, with links)
    DELETE = "DELETE"  # soft delete (status deleted; restorable)
    MERGE = "MERGE"  # near-duplicates: one survivor, the others superseded by it
    NOOP = "NOOP"
    EMIT_SKILL = "EMIT_SKILL"  # a procedure memory distilled from repeated successful interactions
    EMIT_PROFILE = "EMIT_PROFILE"  # the structured profile of the tenant (or of one agent)


class DreamActionStatus(StrEnum):
    PENDING = "pending"
    APPLIED = "applied"
    REJECTED = "rejected"
    UNDONE = "undone"
    FAILED = "failed"  # could not be applied: what it was about changed since it was proposed


class DreamScope(BaseModel):
    """What one dream covers: a tenant, optionally narrowed to one agent and one run (None = all)."""

    model_config = ConfigDict(frozen=True)

    app_id: str
    tenant_id: str
    agent_id: str | None = None
    run_id: str | None = None

    def covers(self, scope: Scope) -> bool:
        return (scope.app_id == self.app_id and scope.tenant_id == self.tenant_id
                and self.agent_id in (None, scope.agent_id) and self.run_id in (None, scope.run_id))


class MemoryDraft(BaseModel):
    """The content an action writes: a new memory, or the new text of a survivor."""

    text: str
    memory_type: MemoryType = MemoryType.FACT
    scope: Scope
    evidence: list[str] = Field(default_factory=list)
    event_time: datetime | None = None
    keywords: str = ""
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    drawn_from: list[Scope] = Field(default_factory=list)  # as Memory.drawn_from


class ProfileEntry(BaseModel):
    """One attribute or preference of a profile, with the memories that support it."""

    name: str  # "residence", "occupation", "favorite_color", "likes", "dislikes", "pets", ...
    value: str
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    evidence: list[str] = Field(default_factory=list)  # memory ids
    since: datetime | None = None  # when the newest supporting memory was said
    previous: list[str] = Field(default_factory=list)  # earlier values of a single-valued attribute
    # The memories the earlier values came from: a deleted one takes its value out of `previous` too.
    previous_evidence: list[str] = Field(default_factory=list)


class ProfileSkill(BaseModel):
    memory_id: str
    title: str


class Profile(BaseModel):
    """A structured profile of a tenant (agent_id None) or of one agent of the tenant."""

    store: str
    app_id: str
    tenant_id: str
    agent_id: str | None = None
    subject: str = ""
    attributes: list[ProfileEntry] = Field(default_factory=list)
    preferences: list[ProfileEntry] = Field(default_factory=list)
    skills: list[ProfileSkill] = Field(default_factory=list)
    summary: str = ""
    version: int = 0
    updated_at: datetime | None = None
    task_id: str | None = None
    action_id: str | None = None

    def content(self) -> dict[str, Any]:
        """What the profile says, without bookkeeping: two profiles with equal content are the same."""
        return self.model_dump(mode="json", include={"subject", "attributes", "preferences", "skills", "summary"})


class ExplicitProfile(BaseModel):
    """What a caller states of a tenant (agent_id None) or of one agent of the tenant: free text (an agent's
    role and standing instructions) and named attributes. Shown merged with the dream's distilled profile,
    explicit first (services/profiles.py)."""

    store: str
    app_id: str
    tenant_id: str
    agent_id: str | None = None
    text: str = ""
    attributes: dict[str, str] = Field(default_factory=dict)
    updated_at: datetime
    version: int = 0


class ProfileFact(BaseModel):
    """One attribute or preference of an actor's profile, with where it comes from."""

    name: str
    value: str
    origin: Literal["explicit", "distilled"]
    confidence: float | None = None  # distilled: the dream's confidence
    evidence: list[str] = Field(default_factory=list)  # distilled: the memories that support it
    since: datetime | None = None


class ActorProfile(BaseModel):
    """A tenant's (agent_id None) or an agent's profile as served: the explicit profile merged with the
    dream's distilled one (explicit wins a name both give), and `text`, its rendering for a prompt."""

    app_id: str
    tenant_id: str
    agent_id: str | None = None
    text: str  # the same state always renders the same text
    explicit_text: str = ""
    attributes: list[ProfileFact] = Field(default_factory=list)
    preferences: list[ProfileFact] = Field(default_factory=list)
    overridden: list[ProfileFact] = Field(default_factory=list)  # distilled facts an explicit one replaces
    skills: list[ProfileSkill] = Field(default_factory=list)
    explicit: ExplicitProfile | None = None
    distilled: Profile | None = None


class UndoEntry(BaseModel):
    """One table item an applied action touched: its exact state before, and a digest of the state after."""

    pk: str
    sk: str
    memory_id: str | None = None  # None for a profile
    before: dict[str, Any] | None = None  # the whole item; None when the action created it
    after_digest: str  # undo refuses when the item changed since the action wrote it


class DreamAction(BaseModel):
    """One proposed (or applied) consolidation step. Reversible from its own record once applied."""

    action_id: str
    task_id: str
    store: str
    kind: DreamActionKind
    status: DreamActionStatus = DreamActionStatus.PENDING
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str
    scope: Scope  # where the action writes (the survivor's / new memory's / profile's scope)
    target_ids: list[str] = Field(default_factory=list)  # memories superseded / deleted
    keep_id: str | None = None  # the memory that stays (MERGE survivor, UPDATE's newer statement)
    before: list[Memory] = Field(default_factory=list)  # the memories involved, as seen when proposed
    after: MemoryDraft | None = None
    profile: Profile | None = None
    created_at: datetime
    updated_at: datetime
    decided_at: datetime | None = None
    undo: list[UndoEntry] = Field(default_factory=list)
    created_ids: list[str] = Field(default_factory=list)  # memories the apply created
    error: str | None = None


class DreamTask(BaseModel):
    """One dream run over a scope: what it was asked to do and what it produced."""

    task_id: str
    store: str
    scope: DreamScope
    mode: DreamMode
    threshold: float = Field(ge=0.0, le=1.0)
    kinds: list[DreamActionKind] = Field(default_factory=list)  # empty = every kind
    trigger: str = "api"  # "api" | "schedule"
    engine: str = ""  # "llm" | "rules", set when it runs
    status: TaskStatus = TaskStatus.PENDING
    created_at: datetime
    updated_at: datetime
    action_ids: list[str] = Field(default_factory=list)
    stats: dict[str, int] = Field(default_factory=dict)
    error: str | None = None
    attempts: int = 0


class Erasure(BaseModel):
    """An asynchronous erasure of everything a tenant has, in every store."""

    erasure_id: str
    app_id: str
    tenant_id: str
    principal: str
    status: TaskStatus = TaskStatus.PENDING
    created_at: datetime
    updated_at: datetime
    deleted_items: int = 0
    deleted_documents: int = 0
    deleted: dict[str, dict[str, int]] = Field(default_factory=dict)  # per store: counts per record kind
    stores: list[str] = Field(default_factory=list)
    dead_letters: int = 0  # the tenant's queued adds dropped from the ingestion dead-letter queue
    error: str | None = None
