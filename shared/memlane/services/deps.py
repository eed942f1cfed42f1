"""What every service needs, handed in by the composition root (bootstrap.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..domain.deadline import Deadline
from ..extractors import Extractor
from ..faults import Faults
from ..ports import (LLM, Budgeted, Clock, Compactor, DeadLetters, Embedder, Index, Queue, Reranker, Table,
                     TenantTables, Tokenizer)
from ..repository import Repository
from ..split_table import SplitTable


@dataclass(frozen=True)
class CoreSettings:
    """Tunables of the core. Built from the environment by config.py, never read from it here."""

    default_recipe: str = "hybrid"
    duplicate_similarity: float = 0.95  # a candidate this close to an existing memory is a NOOP
    neighbours: int = 5  # existing memories a candidate is compared with (by meaning, and as many by words)
    # Compare each new memory with the subject's memories across runs and agents and supersede what it
    # changes (policies/consolidation.py). Off: only duplicates within the same run and agent are dropped.
    consolidate_on_write: bool = True
    # The table is shared by several processes (DynamoDB, or a compatible server): a tenant's write-time consolidation
    # is then held by a lease in it (services/consolidate.one_at_a_time), else by a lock of this process.
    shared_table: bool = False
    max_extract_attempts: int = 5
    # Extraction context: this many of the run's messages stored before an add's first message (at most
    # this many characters, newest kept) inform its extraction; they are never extracted again.
    extract_context_messages: int = 6
    extract_context_chars: int = 4000
    queue_limit: int = 0  # back-pressure: an add is refused (429 queue_full) past this many queued jobs; 0 = off
    queue_retry_after: int = 5  # seconds a refused add is told to wait
    task_deadline_seconds: float = 900.0  # a task PENDING/RUNNING this long is swept (services/sweep.py)
    sync_retry_delay: float = 60.0  # a sync add's safety-net job runs this late (only if the inline run failed)
    # A synchronous request works at most this long (and never past its Lambda's remaining time), less
    # the margin kept to write its answer; then a sync add or dream answers 202 and its job goes on.
    sync_deadline_seconds: float = 29.0
    sync_margin_seconds: float = 2.0
    # Dream (consolidation). See services/dream.py and policies/dream_*.py.
    dream_merge_similarity: float = 0.92  # cosine above which two memories may be one fact said twice
    dream_max_memories: int = 1000  # newest active memories one dream considers
    dream_plan_grace_days: float = 1.0  # a plan this long past its time is retired
    dream_lease_seconds: int = 900  # a queued dream not started within this is queued again
    dream_max_scopes: int = 10  # dreams one scheduled run starts
    dream_scan_limit: int = 1000  # registry entries one scheduled run reads per store
    dream_max_runs: int = 20  # most recent runs whose messages a dream reads (skills)
    dream_max_messages: int = 200  # newest messages read per run
    summary_max_tokens: int = 400  # a thread summary's cap (policies/summary.py), counted with deps.tokenizer
    audit_retention_days: int = 30  # the rows the service writes of its own accord (a scheduled dream's start)


@dataclass
class Deps:
    table: Table
    queue: Queue
    index: Index
    embedder: Embedder
    extractor: Extractor
    clock: Clock
    reranker: Reranker | None = None
    llm: LLM | None = None  # dream asks it when configured; without one the rules engine runs
    tokenizer: Tokenizer | None = None  # token budgets (context cards, summaries); None: not configured
    settings: CoreSettings = field(default_factory=CoreSettings)
    # How a tenant's partition is reached (AWS: STS credentials scoped to it). None: the one table.
    tenant_tables: TenantTables | None = None
    # Local files that keep deleted bytes until compacted (SQLite); deletion paths compact them last.
    compactors: tuple[Compactor, ...] = ()
    # The ingestion queue's dead letters (AWS): an erasure drops the tenant's adds from them. None: no such queue.
    dead_letters: DeadLetters | None = None

    def compact(self, *, rewrite: bool = False) -> None:
        for compactor in self.compactors:
            compactor.compact(rewrite=rewrite)
    faults: Faults = field(default_factory=Faults)  # crash points; armed only by the fault-injection suite
    # When synchronous work must stop (checked between steps); never, for jobs and tools.
    deadline: Deadline = field(default_factory=Deadline.never)

    def within(self, deadline: Deadline) -> "Deps":
        """These deps for one synchronous request: services check `deadline` between steps, and the
        model adapters that can (ports.Budgeted) bound each call and retry by what is left of it."""
        def bound(adapter: Any) -> Any:
            return adapter.within(deadline) if isinstance(adapter, Budgeted) else adapter

        return replace(self, deadline=deadline, embedder=bound(self.embedder), llm=bound(self.llm),
                       reranker=bound(self.reranker), extractor=bound(self.extractor))

    @property
    def repo(self) -> Repository:
        return Repository(self.table)

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> "Deps":
        """These deps as one authorized tenant uses them: global partitions through the service's own
        table, tenant partitions through the tenant's table, the index bound to the tenant. Bind once the
        tenant is known (after the grant check, or from the job's own record) — never from a key being built."""
        own = self.table.global_table if isinstance(self.table, SplitTable) else self.table
        tenant = self.tenant_tables.for_tenant(store, app_id, tenant_id) if self.tenant_tables is not None else own
        return replace(self, table=SplitTable(own, tenant), index=self.index.for_tenant(store, app_id, tenant_id))
