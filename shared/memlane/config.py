"""One settings object, read from the environment once at start-up. Nothing below the
composition root (bootstrap.py) reads the environment."""

import os
from pathlib import Path
from typing import Literal, Mapping

from pydantic import BaseModel, Field, ValidationError, model_validator

from .domain import limits


class Misconfigured(RuntimeError):
    """The settings cannot run this command (a value that is not valid, a separate worker without a shared
    queue, ...): the message says which settings to change."""


class Settings(BaseModel):
    mode: Literal["local", "aws"] = "local"
    # What start-up does when the table or index is not what this version expects (services/schema.py):
    # validate (refuse, naming each difference), create (make what is missing), recreate (also rebuild
    # the index from the table). None: validate on AWS, create locally.
    schema_policy: Literal["validate", "create", "recreate", "off"] | None = None
    data_dir: Path = Path(".memlane")
    log_level: str = "INFO"

    # Adapters. "auto" picks the best one available.
    table: Literal["auto", "sqlite", "dynamodb"] = "auto"
    index: Literal["auto", "embedded", "opensearch"] = "auto"
    # "auto": SQS on AWS or when queue_url is set, else the local durable queue in the data dir.
    queue: Literal["auto", "local", "sqs"] = "auto"
    embedder: Literal["auto", "minilm", "hashing", "openai", "bedrock"] = "auto"
    # The local MiniLM graph: fp32 (built once from the shipped weights) or the shipped int8 one; auto
    # decides by the CPU (adapters/embedders/minilm_onnx.py). The fp32 graph is cached in model_cache_dir
    # ("" = <data_dir>/models).
    local_embedder_precision: Literal["auto", "fp32", "int8"] = "auto"
    model_cache_dir: str = ""
    tokenizer: str = ""  # a tokenizer.json to count tokens with; "" = the local model's (BERT WordPiece)
    llm: Literal["none", "openai", "bedrock"] = "none"
    reranker: Literal["auto", "none", "heuristic", "bedrock"] = "auto"
    search_recipe: str = "hybrid"
    # Embedded index: an HNSW graph (faiss-cpu, the `local` extra) for each tenant of at least
    # ann_min_rows documents; smaller tenants, and every tenant when off, are searched exactly
    # (docs/adr/0002-ann-index.md).
    ann: bool = True
    ann_min_rows: int = Field(default=20_000, ge=1)

    # AWS
    table_name: str = "memlane"
    tenant_role_arn: str = ""  # AWS: reach tenant partitions through this role, STS-tagged per tenant
    queue_url: str = ""
    # The ingestion queue's dead-letter queue (AWS: IngestDeadLetterQueue): a tenant's erasure drops its adds there.
    ingest_dead_letter_url: str = ""
    sqs_endpoint: str = ""  # an SQS-compatible server (moto, ElasticMQ); "" = the AWS endpoint of aws_region
    dynamodb_endpoint: str = ""
    opensearch_url: str = ""
    opensearch_sigv4: bool = True
    # Self-managed OpenSearch with the security plugin: base64 key of its jwt auth domain. Set, each
    # tenant's index calls carry a token the engine confines to that tenant (docs/index-confinement.md).
    opensearch_tenant_key: str = ""
    opensearch_index_prefix: str = "memlane"  # every store index is {prefix}-{store}: several deployments share a cluster
    # A new store index's shards and replicas; unset: memory-index.json's (2 shards, replicas auto-expanding
    # 0-1). One node holding 10⁶ memories: 1 and 0 (docs/deploy.md, "A large index"). Existing indices keep
    # theirs: `memlane schema recreate` rebuilds them to a changed layout.
    opensearch_shards: int | None = Field(default=None, ge=1, le=1024)
    opensearch_replicas: int | None = Field(default=None, ge=0, le=16)
    # A new store index's k-NN engine. lucene (pure Java) runs on every install; faiss needs the k-NN
    # plugin's native libraries (the distribution tarball and Amazon OpenSearch Service have them, the
    # Maven Central zip of scripts/engines.sh does not: there a faiss index's first write kills the
    # node). Existing indices keep theirs: `memlane schema recreate` rebuilds them (docs/deploy.md).
    opensearch_knn_engine: Literal["lucene", "faiss"] = "lucene"
    aws_region: str = "us-east-1"
    bedrock_embed_model: str = "amazon.titan-embed-text-v2:0"
    # Claude Haiku 4.5 through the global cross-Region profile: Anthropic models since 4.5 are invoked
    # through an inference profile, not on demand by model id (docs/deploy.md, cost table).
    bedrock_llm_model: str = "global.anthropic.claude-haiku-4-5-20251001-v1:0"
    bedrock_rerank_model: str = "amazon.rerank-v1:0"
    embed_dim: int = Field(default=1024, ge=8, le=4096)
    # Vectors of the last texts embedded, kept in memory (adapters/embedders/recent.py; 0 = off): a live
    # thread's card query is the turn its add embeds, and repeated queries are common.
    embed_cache_size: int = Field(default=0, ge=0, le=100_000)  # opt-in: shared by tenants (a timing channel)

    # Model calls (Bedrock, OpenAI-compatible): explicit timeouts and attempts (the first try included).
    # Under a synchronous request's deadline each attempt gets at most what is left of it.
    model_connect_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    model_read_timeout_seconds: float = Field(default=60.0, gt=0, le=900)
    model_max_attempts: int = Field(default=3, ge=1, le=10)
    # A synchronous request (sync add, sync dream) works at most this long — on AWS never past its Lambda's
    # remaining time nor the HTTP API's 29 s — less the margin kept to write its answer; then it answers
    # 202 and its queued job finishes the work.
    sync_deadline_seconds: float = Field(default=29.0, gt=0, le=900)
    sync_margin_seconds: float = Field(default=2.0, ge=0, le=60)

    # OpenAI-compatible endpoints (OpenAI, Ollama, vLLM)
    openai_base_url: str = ""
    openai_api_key: str = ""
    openai_embed_model: str = "text-embedding-3-small"
    openai_llm_model: str = "gpt-4o-mini"

    # Who may call: "auto" = IAM identity on AWS; locally API keys once one exists, else loopback only
    auth: Literal["auto", "none", "api_key", "iam"] = "auto"
    audit_retention_days: int = Field(default=30, ge=1, le=limits.MAX_AUDIT_RETENTION_DAYS)

    # Local server
    host: str = "127.0.0.1"
    port: int = Field(default=8420, ge=0, le=65535)
    worker_max_attempts: int = Field(default=5, ge=1, le=50)
    # The local worker pool (jobs of one tenant run one at a time; tenants take turns); `memlane worker`'s
    # concurrent jobs
    worker_threads: int = Field(default=2, ge=1, le=64)
    # `memlane serve` runs the worker in its own process (off: separate `memlane worker` processes do;
    # needs a shared queue, MEMLANE_QUEUE_URL)
    worker: bool = True
    # A worker on SQS (memlane/worker.py): a received job is hidden this long from the others and extended
    # while it runs, so a worker killed mid-job has it delivered again after at most this long
    worker_visibility_seconds: int = Field(default=60, ge=2, le=43_200)
    worker_poll_seconds: int = Field(default=10, ge=0, le=20)  # SQS long poll per receive
    worker_report_seconds: float = Field(default=30.0, ge=0)  # a progress line this often (0 = none)
    # GET /health of a `memlane worker` for a probe (200 ok / 503 unavailable); None: not served
    worker_health_port: int | None = Field(default=None, ge=0, le=65535)
    worker_health_host: str = "127.0.0.1"
    # Back-pressure: past this many queued jobs an add answers 429 queue_full with Retry-After (0 = no limit)
    queue_limit: int = Field(default=10_000, ge=0)
    queue_retry_after_seconds: int = Field(default=5, ge=1, le=3600)
    # A task PENDING or RUNNING this long is re-enqueued by the sweeper (FAILED once out of attempts)
    task_deadline_seconds: int = Field(default=900, ge=0)
    # `memlane serve` runs the sweeper at start and this often (0 = only at start)
    sweep_interval_seconds: int = Field(default=60, ge=0)
    # SIGTERM/SIGINT: running jobs get this long to finish; the rest are handed back to the queue
    shutdown_grace_seconds: float = Field(default=20.0, ge=0, le=3600)
    # Fault injection (tests only): crash points "name@n,..." (memlane/faults.py); empty = off
    faults: str = ""

    # Dream: `memlane serve` runs the scheduler every dream_interval_seconds (0 = off)
    dream_interval_seconds: int = Field(default=3600, ge=0)
    dream_max_scopes: int = Field(default=10, ge=1, le=1000)
    dream_scan_limit: int = Field(default=1000, ge=1, le=100_000)
    dream_merge_similarity: float = Field(default=0.92, gt=0.0, le=1.0)
    # MEMLANE_CONSOLIDATE_ON_WRITE: supersede changed facts when they are written (see README).
    consolidate_on_write: bool = True
    # Extraction context: the run's messages before an add that inform its extraction (0 = none), and
    # the characters they may take (the newest are kept).
    extract_context_messages: int = Field(default=6, ge=0, le=100)
    extract_context_chars: int = Field(default=4000, ge=0, le=100_000)

    @model_validator(mode="after")
    def _schema_policy_of_mode(self) -> "Settings":
        if self.schema_policy is None:
            self.schema_policy = "validate" if self.mode == "aws" else "create"
        return self

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> "Settings":
        """MEMLANE_<FIELD> variables (upper case), e.g. MEMLANE_DATA_DIR, MEMLANE_EMBEDDER."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for name in cls.model_fields:
            key = f"MEMLANE_{name.upper()}"
            if key in env and env[key] != "":
                values[name] = env[key]
        if "aws_region" not in values and env.get("AWS_REGION"):
            values["aws_region"] = env["AWS_REGION"]
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        try:
            return cls.model_validate(values)
        except ValidationError as invalid:
            raise Misconfigured("; ".join(_said(e, given) for e in invalid.errors())) from None


def _said(error: object, given: Mapping[str, object]) -> str:
    """One invalid value as its user wrote it: MEMLANE_X='value' from the environment, x=value as an option."""
    loc, msg, value = error["loc"], error["msg"], error.get("input")  # type: ignore[index, attr-defined]
    if not loc:  # a rule over several settings: its message names them
        return msg.removeprefix("Value error, ")
    name = str(loc[0])
    return f"{name}={value!r}: {msg}" if name in given else f"MEMLANE_{name.upper()}={value!r}: {msg}"
