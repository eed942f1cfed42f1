"""Ports: the small interfaces the core needs from the outside world.

Every port has an embedded implementation (adapters/local, adapters/embedders) and a
cloud one (adapters/dynamodb, sqs, opensearch, bedrock, openai). The same contract
tests run against every implementation (tests/contract).
"""

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence, TypeVar, runtime_checkable

from pydantic import BaseModel, Field

from .domain.deadline import Deadline
from .domain.models import Memory, MemoryStatus, MemoryType, RecordType
from .domain.schema import Described
from .domain.scope import ScopeFilter

# ---------------------------------------------------------------------------------------------
# Table: a single-table key/value store with DynamoDB semantics.
# Items are JSON-like dicts with string keys "pk" and "sk". Values: str, int, float, bool,
# None, list, dict. Conditions are attribute equality checks ({"attr": value}; a value of
# None means "attribute absent"). A failed condition raises domain.errors.ConditionFailed.
# ---------------------------------------------------------------------------------------------

Item = dict[str, Any]


@dataclass(frozen=True)
class Page:
    items: list[Item]
    cursor: str | None  # opaque; pass back to continue, None when there is nothing more


@dataclass(frozen=True)
class Put:
    item: Item
    if_absent: bool = False
    expect: dict[str, Any] | None = None


@dataclass(frozen=True)
class Update:
    """Set attributes of an existing item (a value of None removes the attribute)."""

    pk: str
    sk: str
    changes: dict[str, Any]
    expect: dict[str, Any] | None = None


@dataclass(frozen=True)
class Delete:
    pk: str
    sk: str
    expect: dict[str, Any] | None = None


@dataclass(frozen=True)
class Check:
    """A condition on an item that a transaction requires without writing it."""

    pk: str
    sk: str
    expect: dict[str, Any] = field(default_factory=dict)
    exists: bool = True


Write = Put | Update | Delete | Check

MAX_TRANSACT_ITEMS = 100  # DynamoDB's limit; adapters refuse more
MAX_QUERY_LIMIT = 1000


class Table(Protocol):
    def get(self, pk: str, sk: str) -> Item | None: ...

    def batch_get(self, keys: Sequence[tuple[str, str]]) -> list[Item]:
        """Items that exist, in the order of `keys`."""
        ...

    def put(self, item: Item, *, if_absent: bool = False, expect: dict[str, Any] | None = None) -> None: ...

    def update(self, pk: str, sk: str, changes: dict[str, Any], *, expect: dict[str, Any] | None = None) -> Item:
        """Update an existing item (ConditionFailed if absent) and return the new item."""
        ...

    def delete(self, pk: str, sk: str, *, expect: dict[str, Any] | None = None) -> None: ...

    def query(
        self,
        pk: str,
        *,
        prefix: str | None = None,
        start: str | None = None,
        end: str | None = None,
        forward: bool = True,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page:
        """Items of one partition, ordered by sk; `prefix` or the inclusive range [start, end]."""
        ...

    def transact(self, writes: Sequence[Write]) -> None:
        """All or nothing. ConditionFailed if any condition fails; nothing is written then."""
        ...


class TenantTables(Protocol):
    """The table as one tenant may see it: on AWS, DynamoDB through STS credentials tagged with the
    tenant, whose role may touch only partition key `store#app#tenant`; locally, the same table."""

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> Table: ...


# ---------------------------------------------------------------------------------------------
# Queue: at-least-once delivery of small jobs to the extraction / dream workers.
# ---------------------------------------------------------------------------------------------


class Job(BaseModel):
    # "extract" | "summarize" | "dream" | "erase" | "purge_store" | "clear_run" | "reindex_action" | "reindex_memory"
    kind: str
    store: str
    request_id: str
    # The tenant an extract job's request_id belongs to (request ids are namespaced per tenant).
    # None on jobs queued before: the request-id pointer then names it, if only one tenant used the id.
    app_id: str | None = None
    tenant_id: str | None = None
    # Fairness: jobs of one group (a tenant: "store/app/tenant") run one at a time, and groups take
    # turns, so one tenant's backlog or one huge add cannot hold every worker. "" = the job's store.
    group: str = ""
    # The thread a "summarize" job refreshes, or a "clear_run" job clears (with app_id and tenant_id).
    agent_id: str | None = None
    run_id: str | None = None
    # The memories a "reindex_memory" job writes again when more than one (an explicit write); else its request_id.
    memory_ids: list[str] | None = Field(default=None, exclude_if=lambda ids: ids is None)  # (the wire form before)

    @classmethod
    def of_tenant(cls, kind: str, store: str, request_id: str, app_id: str, tenant_id: str) -> "Job":
        """A job on one tenant's data: it waits for the tenant's other jobs (no two consolidate at once)."""
        return cls(kind=kind, store=store, request_id=request_id, app_id=app_id, tenant_id=tenant_id,
                   group=f"{store}/{app_id}/{tenant_id}")


@dataclass(frozen=True)
class QueueHealth:
    """What /health reports of the queue; None where the backend cannot tell."""

    depth: int | None  # jobs waiting or running
    oldest_pending_seconds: float | None  # age of the oldest job not yet done
    dead: int | None  # dead letters: jobs given up on
    worker_alive: bool | None  # None: no worker in this process (Lambda: SQS invokes the extract function)


class Queue(Protocol):
    def enqueue(self, job: Job, *, delay: float = 0) -> None:
        """Deliver `job` at least once, not before `delay` seconds."""
        ...

    def commit(self, table: Table, writes: Sequence[Write], job: Job, *, delay: float = 0) -> None:
        """Commit `writes` to `table` and enqueue `job` as one effect.

        The local queue lives in the table's database: the job is written in the same transaction,
        so it exists exactly when the writes do. SQS cannot join a DynamoDB transaction: the job is
        sent after the commit, and the sweeper (services/sweep.py) re-enqueues a task whose send was
        lost to a crash."""
        ...

    def discard(self, job: Job) -> None:
        """Drop a job still waiting that is no longer needed (a sync add's safety net after its inline
        run succeeded). Best effort: SQS cannot, and the job then finds its task finished."""
        ...

    def depth(self) -> int:
        """Jobs waiting or running (back-pressure: an add is refused past a limit)."""
        ...

    def health(self) -> QueueHealth: ...


@dataclass(frozen=True)
class Delivery:
    """One message received from a queue that separate workers consume (SQS): hidden from every other
    consumer until settled or until its visibility timeout passes, then delivered again."""

    job: Job | None  # None: the body is not a job (`problem` says why)
    receives: int  # deliveries of this message so far, this one included
    handle: str  # what settles this delivery (SQS: the receipt handle)
    message_id: str
    problem: str = ""


class DeadLetters(Protocol):
    """The messages a queue gave up on, kept for an operator to send again (the ingestion queue's, on AWS)."""

    def drop(self, matches: Callable[[str], bool]) -> int:
        """Delete every message whose body `matches`, leaving the others as they were; how many went."""
        ...


class JobSource(Protocol):
    """The consuming side of a shared queue, for `memlane worker` (memlane/worker.py). At least once: a
    delivery not settled by `done` comes back after its visibility timeout (a worker killed mid-job)."""

    def receive(self, max_jobs: int, *, wait_seconds: int, visibility_seconds: int) -> list[Delivery]:
        """Up to `max_jobs` deliveries, waiting up to `wait_seconds` for the first (long poll)."""
        ...

    def done(self, delivery: Delivery) -> None:
        """The job finished (or is settled for good): the message is deleted."""
        ...

    def extend(self, delivery: Delivery, visibility_seconds: int) -> None:
        """Still working: hide the message for `visibility_seconds` more from now."""
        ...

    def release(self, delivery: Delivery, delay_seconds: int = 0) -> None:
        """Hand the message back: delivered again after `delay_seconds`."""
        ...

    def max_receives(self) -> int | None:
        """The dead-letter queue's threshold (SQS: the redrive policy's maxReceiveCount); None: no
        dead-letter queue, so a worker must delete a message it gave up on or see it forever."""
        ...


# ---------------------------------------------------------------------------------------------
# Index: hybrid keyword (BM25) + vector (kNN) retrieval over memories, always under a scope.
# Derived from the table; can be dropped and rebuilt.
# ---------------------------------------------------------------------------------------------


class IndexQuery(BaseModel):
    scope: ScopeFilter
    text: str
    vector: list[float] | None = None
    k: int = 50  # candidates per signal
    keyword_k: int | None = None  # keyword hits wanted, when fewer than k (`bench scale_opensearch --vector-k` varies k alone)
    memory_types: tuple[MemoryType, ...] | None = None  # narrows memories only: other records have no type
    record_types: tuple[RecordType, ...] = (RecordType.MEMORY,)
    statuses: tuple[MemoryStatus, ...] = (MemoryStatus.ACTIVE,)
    metadata: dict[str, Any] | None = None  # equality; a list value means "any of"
    time_from: datetime | None = None  # on event_time, falling back to created_at
    time_to: datetime | None = None
    # (agent_id, run_id) of threads whose messages — and summary, made of them — are left out: threads that store
    # nothing in long-term memory, searched from elsewhere (services/search.py). Their memories are not affected.
    messages_apart: tuple[tuple[str, str], ...] = ()


def runs_by_agent(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """(agent_id, run_id) pairs as each agent's run ids, sorted: how an index excludes threads in few clauses."""
    grouped: dict[str, list[str]] = {}
    for agent, run in sorted(set(pairs)):
        grouped.setdefault(agent, []).append(run)
    return grouped


def keyword_limit(query: IndexQuery, k: int) -> int:
    """How many keyword hits a search returns: keyword_k when given, never more than k."""
    return k if query.keyword_k is None else max(0, min(query.keyword_k, k))


@dataclass(frozen=True)
class Hit:
    memory_id: str  # the document's id: a memory's, a message's, a summary's
    score: float  # BM25 score for keyword hits; cosine similarity in [-1, 1] for vector hits
    record_type: RecordType = RecordType.MEMORY
    # Where the document lives within its tenant: a message's or summary's table key needs them.
    agent_id: str = ""
    run_id: str = ""


@dataclass(frozen=True)
class IndexResult:
    keyword: list[Hit]
    vector: list[Hit]


class Index(Protocol):
    def ensure_store(self, store: str, dim: int) -> None: ...

    def drop_store(self, store: str) -> None: ...

    def upsert(self, store: str, docs: Sequence[tuple[Memory, Sequence[float]]]) -> None: ...

    def delete(self, store: str, memory_ids: Sequence[str], *, app_id: str, tenant_id: str) -> None:
        """Delete the tenant's documents of these ids (a document is its tenant's: another tenant may hold
        the same id, and keeps it); unknown ids are left alone."""
        ...

    def search(self, store: str, query: IndexQuery) -> IndexResult:
        """Both ranked lists in one round trip, each already limited to the query's scope."""
        ...

    def similarities(self, store: str, scope: ScopeFilter, vector: Sequence[float],
                     ids: Sequence[str]) -> dict[str, float]:
        """The cosine of `vector` with each of these documents that the scope holds (any other id is
        left out): what a search reports for a hit that its vector list did not reach."""
        ...

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> "Index":
        """This index as one authorized tenant uses it: it writes, finds and deletes only that tenant's
        documents of that store, and refuses calls naming another (on OpenSearch, with the tenant's
        own credentials, which the engine confines to its documents). Bind once the tenant is known."""
        ...


@dataclass(frozen=True)
class IndexedDoc:
    """One document as the index holds it: what `memlane fsck` compares with the table."""

    memory_id: str
    app_id: str
    tenant_id: str
    agent_id: str
    run_id: str
    status: str
    text: str
    keywords: str
    record_type: str = "memory"


@runtime_checkable
class IndexInventory(Protocol):
    """An index that can list its documents (the embedded one). OpenSearch may add it with a scroll."""

    def documents(self, store: str) -> Iterator[IndexedDoc]: ...


@runtime_checkable
class SchemaOwner(Protocol):
    """A table or index whose structure this version defines (services/schema.py applies the policy)."""

    def describe(self) -> Described:
        """What this version expects and what exists now (found None: nothing yet)."""
        ...

    def create_missing(self) -> list[str]:
        """Make what does not exist yet (never change what does); what it made, for the operator."""
        ...


@runtime_checkable
class IndexRebuild(Protocol):
    """An index that can build a new version of a store's index beside the live one (behind an alias)."""

    def rebuilding(self, store: str, dim: int) -> AbstractContextManager[Index]:
        """Yields the index writing to the new version; on exit, swaps it in atomically (see the adapter)."""
        ...


@runtime_checkable
class Compactor(Protocol):
    """Storage whose deleted bytes can linger (SQLite free pages, WAL frames, FTS segments).
    `compact` makes what was deleted unrecoverable from the files; deletion paths call it last. `rewrite`: the
    files are written anew from what they hold, so no earlier copy of a row is left in a page's unused space
    either (what zeroing freed cells misses: docs/security.md) — a tenant's erasure and a deletion finished after a
    crash ask for it."""

    def compact(self, *, rewrite: bool = False) -> None: ...


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text."""
        ...


T = TypeVar("T", bound=BaseModel)


class LLM(Protocol):
    name: str

    def generate(self, *, system: str, prompt: str, response_model: type[T]) -> T:
        """Structured output, validated against `response_model`."""
        ...


class Reranker(Protocol):
    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """A relevance score per text (higher is better), in the order given."""
        ...


@runtime_checkable
class Budgeted(Protocol):
    """A model adapter that can bound its calls by a request's deadline (domain/deadline.py): the view
    it returns gives each call, and its retries, at most what is left of `deadline`."""

    def within(self, deadline: Deadline) -> Any: ...


def origin(adapter: Any) -> Any:
    """The adapter a bounded view (`Budgeted.within`) was made from, or the adapter itself: what is known of a model
    once (the embedder's identity probe) is known of every view of it (each sets `origin`)."""
    return getattr(adapter, "origin", adapter)


class Tokenizer(Protocol):
    """Counts tokens the way a model does (budgets of context cards, summary triggers)."""

    name: str  # names the vocabulary, reported beside every count

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


class Clock(Protocol):
    def now(self) -> datetime: ...
