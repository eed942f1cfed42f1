"""One settings object, read from the environment once at start-up. Nothing below the
composition root (bootstrap.py) reads the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Mapping

from pydantic import BaseModel, Field


class Settings(BaseModel):
    mode: Literal["local", "aws"] = "local"
    data_dir: Path = Path(".memlane")
    log_level: str = "INFO"

    # Adapters. "auto" picks the best one available.
    table: Literal["auto", "sqlite", "dynamodb"] = "auto"
    index: Literal["auto", "embedded", "opensearch"] = "auto"
    embedder: Literal["auto", "minilm", "hashing", "openai", "bedrock"] = "auto"
    llm: Literal["none", "openai", "bedrock"] = "none"
    reranker: Literal["auto", "none", "heuristic", "bedrock"] = "auto"
    search_recipe: str = "hybrid"

    # AWS
    table_name: str = "memlane"
    tenant_role_arn: str = ""  # AWS: reach tenant partitions through this role, STS-tagged per tenant
    queue_url: str = ""
    # Powertools idempotency records for add (the Lambda ingest function); empty = off
    idempotency_table: str = ""
    dynamodb_endpoint: str = ""
    opensearch_url: str = ""
    opensearch_sigv4: bool = True
    aws_region: str = "us-east-1"
    bedrock_embed_model: str = "amazon.titan-embed-text-v2:0"
    bedrock_llm_model: str = "anthropic.claude-3-5-haiku-20241022-v1:0"
    bedrock_rerank_model: str = "amazon.rerank-v1:0"
    embed_dim: int = Field(default=1024, ge=8, le=4096)

    # OpenAI-compatible endpoints (OpenAI, Ollama, vLLM)
    openai_base_url: str = ""
    openai_api_key: str = ""
    openai_embed_model: str = "text-embedding-3-small"
    openai_llm_model: str = "gpt-4o-mini"

    # Who may call: "auto" = IAM identity on AWS; locally API keys once one exists, else loopback only
    auth: Literal["auto", "none", "api_key", "iam"] = "auto"
    audit_retention_days: int = Field(default=30, ge=1, le=3650)

    # Local server
    host: str = "127.0.0.1"
    port: int = Field(default=8420, ge=0, le=65535)
    worker_max_attempts: int = Field(default=5, ge=1, le=50)

    # Dream: `memlane serve` runs the scheduler every dream_interval_seconds (0 = off)
    dream_interval_seconds: int = Field(default=3600, ge=0)
    dream_max_scopes: int = Field(default=10, ge=1, le=1000)
    dream_scan_limit: int = Field(default=1000, ge=1, le=100_000)
    dream_merge_similarity: float = Field(default=0.92, gt=0.0, le=1.0)
    # MEMLANE_CONSOLIDATE_ON_WRITE: supersede changed facts when they are written (see README).
    consolidate_on_write: bool = True

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
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)
