"""The key layout: partition and sort keys of every item kind (see the package docstring)."""

from __future__ import annotations

__all__ = ["STORES_PK", "ERASURES_PK", "PURGING_PK", "RETIRED_LOGS_PK", "DEAD_LETTER_SCAN_PK", "GRANTS_PK",
           "API_KEYS_PK", "SWEEP_PK", "TTL_ATTRIBUTE", "tenant_pk", "requests_pk", "message_sk", "activity_pk",
           "dream_pk", "open_pk"]

from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ..domain.scope import Scope

STORES_PK = "~stores"
ERASURES_PK = "~erasures"
PURGING_PK = "~stores-purging"  # stores deleted whose items are still being purged
RETIRED_LOGS_PK = "~audit-retired"  # stores deleted whose audit logs are kept until their rows expire
DEAD_LETTER_SCAN_PK = "~dead-letter-scan"  # the lease of the one erasure reading the ingestion dead letters
GRANTS_PK = "~grants"
API_KEYS_PK = "~apikeys"
SWEEP_PK = "~sweep"  # where the last sweep that stopped short stopped: the next one starts there
TTL_ATTRIBUTE = "expires_at"  # epoch seconds; DynamoDB TTL deletes the item after it


def tenant_pk(store: str, app_id: str, tenant_id: str) -> str:
    return f"{store}#{app_id}#{tenant_id}"


def requests_pk(store: str) -> str:
    return f"{store}#~requests"


def message_sk(scope: Scope, message_id: str = "") -> str:
    return f"MSG#{scope.agent_id}#{scope.run_id}#{message_id}"


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


def activity_pk(store: str) -> str:
    return f"{store}#~activity"


def dream_pk(store: str) -> str:
    return f"{store}#~dream"


def open_pk(store: str) -> str:
    return f"{store}#~open"


_DATETIME = TypeAdapter(datetime)


def _json_values(values: dict[str, Any]) -> dict[str, Any]:
    """Datetimes as the models store them (pydantic's JSON form), so conditions compare like with like."""
    return {k: (_DATETIME.dump_python(v, mode="json") if isinstance(v, datetime) else v) for k, v in values.items()}
