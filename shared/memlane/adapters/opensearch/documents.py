"""How a memory becomes an OpenSearch document: names, routing, fields, metadata terms.

Metadata is kept in `_source` but not indexed (`enabled: false`); what filters use is
`metadata_terms`, one keyword per top-level key and scalar value (or scalar element of a
list value), encoded as the JSON array ``[key, value]``. That gives the embedded index's
semantics exactly — equality that respects JSON types (``"2"`` is not ``2``, ``true`` is not
``1``), keys taken literally (a dot is just a character), a list field matching when any
element does — and one field in the mapping however many keys tenants invent, so user data
can neither explode nor conflict with the mapping.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ...domain.analysis import tokens
from ...domain.errors import InvalidInput
from ...domain.models import Memory
from ...domain.records import utc_iso

INDEX_VERSION = 1


def alias_name(prefix: str, store: str) -> str:
    """What every read and write addresses; points at the store's current versioned index."""
    return f"{prefix}-{store}"


def index_name(prefix: str, store: str, version: int = INDEX_VERSION) -> str:
    # "_" cannot occur in a store name, so no store's alias can equal another store's index
    # ("-v1" could: the alias of store "a-v1" would be the index of store "a").
    return f"{prefix}-{store}_v{version}"


def routing_key(app_id: str, tenant_id: str) -> str:
    """All of a tenant's documents live on one shard; its searches touch only that shard."""
    return f"{app_id}#{tenant_id}"


def term_prefix(app_id: str, tenant_id: str) -> str:
    """What a tenant's keyword terms and document ids start with: BM25 then counts how many of the tenant's
    documents hold a word (all on one shard, `routing_key`), not the shard's — so scores tell nothing of other
    tenants' words (docs/security.md). A digest, so the index holds no tenant name in its terms."""
    return hashlib.blake2b(f"{app_id}\x1f{tenant_id}".encode(), digest_size=8).hexdigest() + "_"


def document_id(app_id: str, tenant_id: str, memory_id: str) -> str:
    """A document's `_id`: its tenant's prefix, then its memory id. Two tenants may hold one memory id, each
    in a document of its own, and no write of one can reach the other's (docs/security.md). Reads take the
    memory id from the document's `memory_id` field, never from its `_id`."""
    return term_prefix(app_id, tenant_id) + memory_id


def document_terms(app_id: str, tenant_id: str, text: str, keywords: str) -> str:
    """The `terms` field: every token of the text and keywords (domain/analysis.py, as the embedded index
    counts them), each with the tenant's prefix."""
    prefix = term_prefix(app_id, tenant_id)
    return " ".join(prefix + t for t in tokens(text) + tokens(keywords))


def _scalar(value: Any) -> Any:
    """Canonical JSON scalar: 2.0 and 2 are one number (they compare equal in the embedded index)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def metadata_term(key: str, value: Any) -> str:
    return json.dumps([key, _scalar(value)], ensure_ascii=False, separators=(",", ":"))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def metadata_terms(metadata: dict[str, Any]) -> list[str]:
    terms: list[str] = []
    for key, value in metadata.items():
        for v in value if isinstance(value, list) else [value]:
            if _is_scalar(v):  # nested objects are kept in _source but not filterable, as in the embedded index
                terms.append(metadata_term(key, v))
    return list(dict.fromkeys(terms))


def metadata_filter_terms(key: str, wanted: Any) -> list[str]:
    """The terms any one of which satisfies `metadata[key] == wanted` (a list means any of)."""
    values = list(wanted) if isinstance(wanted, (list, tuple)) else [wanted]
    if not all(_is_scalar(v) for v in values):
        raise InvalidInput("metadata filter values must be strings, numbers, booleans or null "
                           "(or a list of them)", code="invalid_filter", field="filters.metadata")
    return [metadata_term(key, v) for v in values]


def to_document(store: str, memory: Memory, vector: list[float]) -> dict[str, Any]:
    s = memory.scope
    created = utc_iso(memory.created_at)
    event = None if memory.event_time is None else utc_iso(memory.event_time)
    return {
        "store": store,
        "memory_id": memory.memory_id,
        "record_type": str(memory.record_type),
        "app_id": s.app_id,
        "tenant_id": s.tenant_id,
        "agent_id": s.agent_id,
        "run_id": s.run_id,
        "memory_type": str(memory.memory_type),
        "status": str(memory.status),
        "text": memory.text,
        "keywords": memory.keywords,
        "terms": document_terms(s.app_id, s.tenant_id, memory.text, memory.keywords),
        "embedding": vector,
        "created_at": created,
        "updated_at": utc_iso(memory.updated_at),
        "event_time": event,
        "time": event or created,  # what time filters use: the event's time, else when it was recorded
        "importance": memory.importance,
        "evidence": memory.evidence,
        "supersedes": memory.supersedes,
        "superseded_by": memory.superseded_by,
        "request_id": memory.request_id,
        "metadata": memory.metadata,
        "metadata_terms": metadata_terms(memory.metadata),
    }
