"""The `Index` port over OpenSearch with the k-NN plugin (self-managed or Amazon OpenSearch Service).

- One versioned index per store (``{prefix}-{store}_v1``) behind an alias (``{prefix}-{store}``);
  every read and write addresses the alias, so a later mapping can be built beside the old one.
  The index body is ``infra/opensearch/memory-index.json`` (shipped in this package as a link).
- Documents are routed by tenant (``app_id#tenant_id``) and the mapping requires routing, so a
  tenant lives on one shard and a write that forgot its routing fails instead of going astray.
- A search is one ``_msearch`` of BM25 and filtered k-NN (see queries.py, the only query
  builder); OpenSearch's cosinesimil score ``(1 + cos) / 2`` is turned back into the cosine. A
  tenant counted at most ``exact_vector_max`` documents (the count rides along a search every
  ``TENANT_SIZE_SECONDS``) has its vector half scored exactly instead: a script score over the filter. The
  results the k-NN list did not reach get their cosines from one more read (`similarities`: a
  script score over those ids under the scope's terms).
- Writes wait for the refresh that makes them searchable (``refresh="wait_for"``): extraction
  looks up a scope's nearest memories right after writing some, so it needs read-your-writes.
  ``wait_for`` rides the periodic 1 s refresh instead of forcing a tiny segment per call as
  ``refresh=true`` would (~50 ms instead, but a segment per write per shard under load); the
  price is latency: a writer waits for the next refresh, about a second per call when calls are
  sequential (measured 1.0 s per single-doc upsert on the test node), on an asynchronous path.
  Batches split into several bulk requests are refreshed once at the end instead.
  A bulk fill (`bulk_load`, and a rebuild's new index until its swap) pauses the periodic refresh instead
  and sends with no wait: one refresh at the end (docs/deploy.md, "A large index").
- opensearch-py errors become domain errors in errors.py, at this boundary only.
- Tenants (docs/index-confinement.md): a document's `_id` is its tenant's prefix and its memory id
  (documents.document_id), so two tenants may hold one memory id. `for_tenant` gives the index as one
  authorized tenant uses it, reading with that tenant's own credentials when `tenant_clients` is
  configured (the security plugin's document-level security confines them to its documents; they may
  not write). A bound index refuses calls naming another tenant. Every write — upsert or delete, which
  names its tenant — is the service's, conditional on the version a lookup *as the tenant* saw (the
  memory ids AND the tenant's terms, routed to its shard; `_write`), so nothing is read, overwritten or
  deleted by id alone. Reads take a hit's memory id from its `memory_id` field, never from `_id`.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from importlib import resources
from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

from opensearchpy import OpenSearch

from ...domain.errors import Conflict, DependencyFailed, Forbidden, InvalidInput, NotFound, Retryable
from ...domain.models import Memory, RecordType, validate_store_name
from ...domain.schema import PER_STORE, Described, IndexDefinition
from ...domain.scope import ScopeFilter
from ...ports import Hit, IndexQuery, IndexResult
from ..backoff import backoff_delay
from ..tenant_binding import TenantBinding
from .connection import build_client
from .documents import alias_name, document_id, index_name, routing_key, to_document
from .errors import (DLS_RACE, INDEX_NOT_FOUND, RETRYABLE_STATUSES, boundary, error_type, from_status,
                     lost_dls_race)
from .queries import EXACT_VECTOR_MAX, MAX_K, offset_probe, search_lines, similarities_body, tenant_ids_query
from .tenant_auth import TenantClients

Refresh = Literal["wait_for", "true", "false"]
KnnEngine = Literal["lucene", "faiss"]

BULK_MAX_DOCS = 500
BULK_MAX_BYTES = 5 * 1024 * 1024  # well under http.max_content_length (10 MB on small AWS instances)
BULK_ATTEMPTS = 6  # first try + retries of the items OpenSearch answered 429
LOOKUP_CHUNK = 1000  # ids per version lookup
WRITE_ATTEMPTS = 3  # a write whose condition failed is looked up and tried again
DLS_RACE_ATTEMPTS = 5  # a tenant's read that lost the security plugin's race (errors.DLS_RACE) is sent again
_SEARCH_FIELDS = ",".join(f"responses.{f}" for f in ("hits.hits._id", "hits.hits._score", "hits.hits._source",
                                                    "hits.total.value", "error", "status"))
TENANT_SIZE_SECONDS = 60.0  # how long a tenant's document count chooses its vector half before it is counted again
TENANT_SIZES_KEPT = 100_000  # tenants whose count a process keeps (the most recently counted)
_PREFIX_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-")


@functools.cache
def _index_json() -> str:
    # A package resource (a link to infra/opensearch/memory-index.json), so it ships with the wheel.
    return resources.files(__package__).joinpath("memory-index.json").read_text(encoding="utf-8")


def index_body(dim: int, *, engine: KnnEngine = "lucene", shards: int | None = None,
               replicas: int | None = None) -> dict[str, Any]:
    """The store index's settings and mappings, from the JSON in infra/opensearch/."""
    body = json.loads(_index_json())
    body.pop("_comment", None)
    vector = body["mappings"]["properties"]["embedding"]
    vector["dimension"] = dim
    vector["method"]["engine"] = engine
    settings = body["settings"]["index"]
    if shards is not None:
        settings["number_of_shards"] = shards
    if replicas is not None:
        settings.pop("auto_expand_replicas", None)
        settings["number_of_replicas"] = replicas
    return body


OWNER = "memlane_prefix"  # the index's `_meta` key naming the deployment (index prefix) that made it


class OpenSearchIndex:
    def __init__(self, client: OpenSearch, *, index_prefix: str = "memlane", refresh: Refresh = "wait_for",
                 knn_engine: KnnEngine = "lucene", shards: int | None = None, replicas: int | None = None,
                 sleep: Callable[[float], None] = time.sleep, tenant_clients: TenantClients | None = None,
                 exact_vector_max: int = EXACT_VECTOR_MAX):
        if not index_prefix or index_prefix[0] in "-_" or not set(index_prefix) <= _PREFIX_CHARS:
            raise InvalidInput("index_prefix must be lower-case letters, digits and '-'", field="index_prefix")
        self.client = client
        self.prefix = index_prefix
        self.refresh = refresh
        self.knn_engine = knn_engine
        self.shards, self.replicas = shards, replicas
        self._sleep = sleep
        self._dims: dict[str, int] = {}  # store → dimension, as read from (or written to) its mapping
        self.tenant_clients = tenant_clients  # None: tenants go through this client, confined by the adapter only
        self.binding: TenantBinding | None = None  # set on the copies for_tenant hands out
        self._root = self
        self._writer = client  # writes are the service's, conditioned on what the tenant's client sees
        self._targets: dict[str, str] = {}  # store → the new index a rebuild fills (else: the alias)
        self._tenant_sizes = _TenantSizes()  # shared by the copies for_tenant hands out
        # What the engine adds to a tenant client's scores, once measured (a list, so for_tenant's copies share it).
        self._added: list[float] = []
        self.exact_vector_max = exact_vector_max  # a tenant of at most this many documents is scored exactly

    @classmethod
    def from_url(cls, url: str, *, region: str = "us-east-1", sigv4: bool = False, index_prefix: str = "memlane",
                 client: OpenSearch | None = None, **options: Any) -> OpenSearchIndex:
        return cls(client or build_client(url, region=region, sigv4=sigv4), index_prefix=index_prefix, **options)

    def close(self) -> None:
        if self._root is self:  # a tenant's client belongs to tenant_clients (its cache closes it)
            self.client.close()

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> OpenSearchIndex:
        """This index as one authorized tenant uses it (see the module docstring)."""
        root = self._root
        binding = TenantBinding.of(store, app_id, tenant_id)
        bound = copy.copy(root)  # shares the dimension cache; its own client and binding
        bound.binding = binding
        if root.tenant_clients is not None:
            bound.client = root.tenant_clients.client_for(binding.store, binding.app_id, binding.tenant_id)
        return bound

    # -- stores --------------------------------------------------------------------------------
    def ensure_store(self, store: str, dim: int) -> None:
        if self.binding is not None:
            self.binding.check_lifecycle(store)
        validate_store_name(store)
        if not isinstance(dim, int) or isinstance(dim, bool) or dim <= 0:
            raise InvalidInput("embedding dimension must be a positive integer", field="dim")
        existing = self._read_dim(store)
        if existing is None:
            body = {**self._owned(index_body(dim, engine=self.knn_engine, shards=self.shards, replicas=self.replicas)),
                    "aliases": {alias_name(self.prefix, store): {}}}
            try:
                with boundary("create index"):
                    self.client.indices.create(index=index_name(self.prefix, store), body=body)
            except InvalidInput as exc:
                if exc.details.get("error_type") != "resource_already_exists_exception":
                    raise
                # Another process created it meanwhile (or an earlier run lost its alias): adopt it — if it is ours.
                with boundary("read mapping"):
                    self._refuse_foreign(store, self.client.indices.get_mapping(index=index_name(self.prefix, store)))
                with boundary("put alias"):
                    self.client.indices.put_alias(index=index_name(self.prefix, store),
                                                  name=alias_name(self.prefix, store))
            existing = self._read_dim(store)
        if existing != dim:
            raise Conflict(f"index of store '{store}' has dimension {existing}, not {dim}; "
                           "drop and rebuild it to change the embedding model", code="dimension_conflict")

    def drop_store(self, store: str) -> None:
        if self.binding is not None:
            self.binding.check_lifecycle(store)
        validate_store_name(store)  # also what keeps "*" or "," out of the delete below
        self._dims.pop(store, None)
        alias = alias_name(self.prefix, store)
        with boundary("drop store"):
            found = self.client.indices.get_alias(name=alias, ignore=404)
            targets = set() if _missing(found) else set(found)
            targets.add(index_name(self.prefix, store))  # also when its alias was lost
            mappings = self.client.indices.get_mapping(index=",".join(sorted(targets)), ignore_unavailable=True)
            owned = sorted(name for name in targets if _missing(mappings) or name not in mappings
                           or self._owns(mappings[name]))
            if owned:
                self.client.indices.delete(index=",".join(owned), ignore_unavailable=True)

    # -- schema (services/schema.py) -------------------------------------------------------------
    def describe(self) -> Described:
        """Every store index of this prefix as the engine states it, against memory-index.json (the
        embedding dimension is each store's own: ensure_store and the embedder guard check it)."""
        expected = index_body(PER_STORE, engine=self.knn_engine, shards=self.shards, replicas=self.replicas)
        found: dict[str, IndexDefinition] = {}
        with boundary("describe indices"):
            mappings = self.client.indices.get_mapping(index=f"{self.prefix}-*", ignore=404)
            settings = {} if _missing(mappings) else self.client.indices.get_settings(index=f"{self.prefix}-*")
        if not _missing(mappings):
            for name, mapping in mappings.items():
                if self._store_of(name) is not None and self._owns(mapping):
                    found[name] = IndexDefinition(settings=settings.get(name, {}).get("settings", {}),
                                                  mappings=mapping.get("mappings", {}))
        return Described(self.prefix, IndexDefinition(settings=expected["settings"], mappings=expected["mappings"]),
                         found)

    def create_missing(self) -> list[str]:
        """Store indices are made by ensure_store when a store is; nothing else here is shared."""
        return []

    @contextmanager
    def rebuilding(self, store: str, dim: int) -> Iterator[OpenSearchIndex]:
        """A new version of the store's index, beside the live one: yields this index writing to (and
        reading from) the new one; when the block ends, the alias moves to it in one atomic
        `_aliases` call — searches see the old index until then, the new one after, never neither —
        and the old versions are deleted. If the block fails, the new index is deleted and the alias
        is left where it was."""
        validate_store_name(store)
        alias = alias_name(self.prefix, store)
        with boundary("read alias"):
            found = self.client.indices.get_alias(name=alias, ignore=404)
        old = [] if _missing(found) else sorted(found)
        if old:  # another deployment's index behind a name this one's prefix also makes: never rebuilt away
            with boundary("read mapping"):
                self._refuse_foreign(store, self.client.indices.get_mapping(index=",".join(old)))
        versions = [v for v in (self._version_of(name) for name in old) if v is not None]
        new = index_name(self.prefix, store, max(versions, default=0) + 1)
        body = self._owned(index_body(dim, engine=self.knn_engine, shards=self.shards, replicas=self.replicas))
        # Filled as a bulk load: no periodic refresh (nothing searches the new index before the swap) and
        # no write waiting for one; the index's own interval is put back, and one refresh made, at the swap.
        interval = body["settings"]["index"].get("refresh_interval")
        body["settings"]["index"]["refresh_interval"] = "-1"
        with boundary("create index"):  # a rebuild racing this one made it already → 400 resource_already_exists
            self._writer.indices.create(index=new, body=body)
        target = copy.copy(self)
        target._root = target
        target._targets = {**self._targets, store: new}
        target._dims = {**self._dims, store: dim}
        target.refresh = "false"
        try:
            yield target
            with boundary("swap alias"):
                self._writer.indices.put_settings(index=new, body={"index": {"refresh_interval": interval}})
                self._writer.indices.refresh(index=new)
                self._writer.indices.update_aliases(body={"actions": [
                    *({"remove": {"index": name, "alias": alias}} for name in old),
                    {"add": {"index": new, "alias": alias}}]})
        except BaseException:
            with boundary("drop unfinished index"):
                self._writer.indices.delete(index=new, ignore_unavailable=True)
            raise
        self._dims[store] = dim
        if old:
            with boundary("drop old index"):
                self._writer.indices.delete(index=",".join(old), ignore_unavailable=True)

    def _owned(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` with this deployment's prefix stamped on the index: prefixes may nest ("memlane" and
        "memlane-shared" both name "memlane-shared-demo_v1"), the stamp tells whose it is."""
        body["mappings"]["_meta"] = {**body["mappings"].get("_meta", {}), OWNER: self.prefix}
        return body

    def _owns(self, mapping: dict[str, Any]) -> bool:
        """Whether an index (as get_mapping states it) is this deployment's: stamped with its prefix, or made
        before the stamp (no owner named)."""
        return mapping.get("mappings", {}).get("_meta", {}).get(OWNER, self.prefix) == self.prefix

    def _refuse_foreign(self, store: str, mappings: dict[str, Any]) -> None:
        foreign = sorted(name for name, m in mappings.items() if not self._owns(m))
        if foreign:
            owner = mappings[foreign[0]]["mappings"]["_meta"][OWNER]
            raise Conflict(f"store '{store}' resolves to {', '.join(foreign)}, an index of another deployment (index "
                           f"prefix {owner!r}, not {self.prefix!r}): give the deployments prefixes neither of which "
                           "begins the other", code="index_of_another_deployment")

    def _store_of(self, name: str) -> str | None:
        found = re.fullmatch(rf"{re.escape(self.prefix)}-([a-z0-9-]+)_v(\d+)", name)
        return found.group(1) if found else None

    def _version_of(self, name: str) -> int | None:
        found = re.fullmatch(rf"{re.escape(self.prefix)}-[a-z0-9-]+_v(\d+)", name)
        return int(found.group(1)) if found else None

    def _address(self, store: str) -> str:
        """Where a store's reads and writes go: its alias, or the new index a rebuild fills."""
        return self._targets.get(store) or alias_name(self.prefix, store)

    # -- writes --------------------------------------------------------------------------------
    def upsert(self, store: str, docs: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        """Replace each doc by its tenant and memory_id. Every vector is checked before anything is sent."""
        if self.binding is not None:
            for memory, _ in docs:
                self.binding.check(store, memory.scope.app_id, memory.scope.tenant_id)
        dim = self._dim(store)
        if dim is None:
            raise NotFound(f"no index for store '{store}' (ensure_store first)", code="store_not_found")
        # Grouped by tenant; a batch naming the same memory twice keeps the last version, as sequential
        # upserts would.
        groups: dict[tuple[str, str], dict[str, dict[str, Any] | None]] = {}
        for memory, values in docs:
            vector = _unit_vector(values, dim, f"embedding of {memory.memory_id}")
            if vector is None:  # cosine is undefined for it, and OpenSearch refuses it
                raise InvalidInput(f"embedding of {memory.memory_id} is the zero vector", code="invalid_vector")
            s = memory.scope
            groups.setdefault((s.app_id, s.tenant_id), {})[memory.memory_id] = to_document(store, memory, vector)
        for (app_id, tenant_id), sources in groups.items():
            self._write(store, app_id, tenant_id, sources)

    def delete(self, store: str, memory_ids: Sequence[str], *, app_id: str, tenant_id: str) -> None:
        """Delete the tenant's docs among `memory_ids`; unknown ids are left alone. It sees what has been
        refreshed: with refresh="false", a doc written a moment ago may be missed."""
        if self.binding is not None:
            self.binding.check(store, app_id, tenant_id)
        self._write(store, app_id, tenant_id, dict.fromkeys(memory_ids))

    def bulk_load(self, store: str, docs: Iterable[tuple[Memory, Sequence[float]]], *, in_flight: int = 2,
                  batch_docs: int = BULK_MAX_DOCS) -> int:
        """Fill a store's index with documents it does not hold yet (a benchmark's 10⁶ memories, an
        import into a new store) as fast as the engine takes them; the number loaded.

        - `create` actions routed by tenant: a document already there (loaded before) is never replaced;
          the document ids (tenant prefix + memory id) come back in a Conflict at the end.
        - No refresh wait per request, and the index's periodic refresh paused meanwhile (restored
          after, also on failure, with one refresh that makes the load searchable): a refresh a
          second would cut a small segment a second and merge them again and again under the load.
        - Back-pressure: at most `in_flight` bulk requests outstanding (one write thread each on the
          engine; `docs` is read no faster than they finish), each retrying the items answered 429
          with jittered backoff (`_send`).
        The service's own index only: tenants' clients may not write.
        """
        if self.binding is not None:
            raise Forbidden("a bulk load is the service's, not a tenant's", code="tenant_bound_bulk_load")
        dim = self._dim(store)
        if dim is None:
            raise NotFound(f"no index for store '{store}' (ensure_store first)", code="store_not_found")
        address = self._address(store)

        def actions() -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
            for memory, values in docs:
                vector = _unit_vector(values, dim, f"embedding of {memory.memory_id}")
                if vector is None:
                    raise InvalidInput(f"embedding of {memory.memory_id} is the zero vector", code="invalid_vector")
                s = memory.scope
                header = {"_index": address, "_id": document_id(s.app_id, s.tenant_id, memory.memory_id),
                          "routing": routing_key(s.app_id, s.tenant_id)}
                yield header["_id"], {"create": header}, to_document(store, memory, vector)

        failed: dict[str, str] = {}
        conflicts: set[str] = set()
        loaded = 0

        def settle(done: Iterable[Future[tuple[dict[str, str], set[str]]]]) -> None:
            for future in done:
                chunk_failed, chunk_conflicts = future.result()  # Retryable: still throttled after the retries
                failed.update(chunk_failed)
                conflicts.update(chunk_conflicts)

        with self._refresh_paused(address), ThreadPoolExecutor(max_workers=max(1, in_flight)) as pool:
            outstanding: set[Future[tuple[dict[str, str], set[str]]]] = set()
            for chunk in _chunks(actions(), max_docs=batch_docs):
                if len(outstanding) >= max(1, in_flight):
                    done, outstanding = wait(outstanding, return_when=FIRST_COMPLETED)
                    settle(done)
                outstanding.add(pool.submit(self._send, store, chunk, "false"))
                loaded += len(chunk)
            settle(wait(outstanding).done)
        if failed:
            sample = "; ".join(f"{mid}: {why}" for mid, why in list(failed.items())[:5])
            raise DependencyFailed(f"OpenSearch refused {len(failed)} of {loaded} documents of store '{store}': "
                                   f"{sample}", code="index_partial_failure", failed_ids=sorted(failed))
        if conflicts:
            raise Conflict(f"{len(conflicts)} document ids of store '{store}' are in its index already: "
                           f"{sorted(conflicts)[:5]}", code="index_id_conflict", conflict_ids=sorted(conflicts))
        return loaded - len(conflicts)

    @contextmanager
    def _refresh_paused(self, address: str) -> Iterator[None]:
        """The index's periodic refresh off for the block, then put back as it was and one refresh."""
        with boundary("pause refresh"):
            found = self._writer.indices.get_settings(index=address, name="index.refresh_interval")
            before = {s.get("settings", {}).get("index", {}).get("refresh_interval") for s in found.values()}
            self._writer.indices.put_settings(index=address, body={"index": {"refresh_interval": "-1"}})
        try:
            yield
        finally:
            with boundary("restore refresh"):
                # One value for the alias's index (None: it had none set, and null restores the default).
                self._writer.indices.put_settings(index=address, body={"index": {"refresh_interval": before.pop()}})
                self._writer.indices.refresh(index=address)

    # -- search --------------------------------------------------------------------------------
    def search(self, store: str, query: IndexQuery) -> IndexResult:
        k = min(max(query.k, 0), MAX_K)
        if k == 0:
            return IndexResult(keyword=[], vector=[])
        if self.binding is not None:
            self.binding.check(store, query.scope.app_id, query.scope.tenant_id)
        vector = None
        if query.vector is not None:
            # With the dimension known (the usual case) a bad vector is refused here; otherwise
            # OpenSearch refuses it (400 → InvalidInput) in the same round trip. A zero vector
            # (a text with no words, for some embedders) is similar to nothing: no vector hits.
            vector = _unit_vector(query.vector, self._dims.get(store) or len(query.vector), "query vector")
        # A tenant counted small gets the exact vector half; an unknown or stale count rides along this search.
        tenant = (store, query.scope.app_id, query.scope.tenant_id)
        size, counted = self._tenant_sizes.get(tenant) or (None, -math.inf)
        stale = time.monotonic() - counted > TENANT_SIZE_SECONDS
        lines, signals = search_lines(self._address(store), store, query, k=k, vector=vector,
                                      exact=size is not None and size <= self.exact_vector_max,
                                      count_up_to=self.exact_vector_max + 1 if vector is not None and stale else None)
        if not lines:
            return IndexResult(keyword=[], vector=[])
        # Only what a hit is read for: the engine then sends no _index, _routing or sort values per hit
        # (a search of top_k 100 gets up to 2,000 vector hits, and parsing them is the client's time).
        added = self._score_added(store, query.scope.app_id, query.scope.tenant_id)
        responses = self._read("search", lambda: self.client.msearch(
            body=lines, params={"filter_path": _SEARCH_FIELDS}))["responses"]
        hits: dict[str, list[Hit]] = {"keyword": [], "vector": []}
        for signal, response in zip(signals, responses):
            if "error" in response:
                if error_type(response["error"]) == INDEX_NOT_FOUND:
                    self._dims.pop(store, None)
                    return IndexResult(keyword=[], vector=[])  # no index: nothing to find
                raise from_status(response.get("status"), response["error"], f"{signal} search")
            if signal == "tenant_size":
                documents = response.get("hits", {}).get("total", {}).get("value", 0)
                self._tenant_sizes.put(tenant, int(documents), time.monotonic())
                continue
            raw = response.get("hits", {}).get("hits", [])  # filter_path leaves out an empty list
            if signal == "vector":
                hits[signal] = [_hit(h, _cosine(h["_score"] - added)) for h in raw]
            else:
                hits[signal] = [_hit(h, float(h["_score"]) - added) for h in raw]
        return IndexResult(keyword=hits["keyword"], vector=hits["vector"])

    def similarities(self, store: str, scope: ScopeFilter, vector: Sequence[float],
                     ids: Sequence[str]) -> dict[str, float]:
        if self.binding is not None:
            self.binding.check(store, scope.app_id, scope.tenant_id)
        wanted = list(dict.fromkeys(ids))[:MAX_K]
        dim = self._dim(store)
        unit = None if dim is None or not wanted else _unit_vector(vector, dim, "query vector")
        if unit is None:  # no index, nothing asked, or a zero vector (similar to nothing)
            return {}
        added = self._score_added(store, scope.app_id, scope.tenant_id)
        answer = self._read("similarities", lambda: self.client.search(
            index=self._address(store), routing=routing_key(scope.app_id, scope.tenant_id), ignore=404,
            body=similarities_body(store, scope, wanted, unit),
            params={"filter_path": "hits.hits._source.memory_id,hits.hits._score"}))
        raw = answer.get("hits", {}).get("hits", [])  # no index, or no hit: filter_path leaves nothing
        return {h["_source"]["memory_id"]: _cosine(h["_score"] - added) for h in raw}

    # -- internals -----------------------------------------------------------------------------
    def _score_added(self, store: str, app_id: str, tenant_id: str) -> float:
        """What the engine adds to every score this client reads (queries.offset_probe): 0 for the service's
        own login; for a tenant's credentials measured once — by a search of the tenant's documents, so not while
        it has none (then its searches find nothing either)."""
        if self.binding is None or self._root.tenant_clients is None:
            return 0.0
        if not self._added:
            answer = self._read("score offset", lambda: self.client.search(
                index=self._address(store), routing=routing_key(app_id, tenant_id), ignore=404,
                body=offset_probe(store, app_id, tenant_id), params={"filter_path": "hits.hits._score"}))
            raw = answer.get("hits", {}).get("hits", [])
            if not raw:
                return 0.0
            self._added.append(float(raw[0]["_score"]))
        return self._added[0]

    def _dim(self, store: str) -> int | None:
        if store not in self._dims:
            self._read_dim(store)
        return self._dims.get(store)

    def _read_dim(self, store: str) -> int | None:
        validate_store_name(store)
        with boundary("read mapping"):
            mappings = self.client.indices.get_mapping(index=self._address(store), ignore=404)
        if _missing(mappings):
            self._dims.pop(store, None)
            return None
        self._refuse_foreign(store, mappings)
        unstamped = [name for name, m in mappings.items() if OWNER not in m["mappings"].get("_meta", {})]
        if unstamped:
            self._stamp(unstamped)
        dims = {m["mappings"]["properties"]["embedding"]["dimension"] for m in mappings.values()}
        if len(dims) != 1:
            raise DependencyFailed(f"alias of store '{store}' spans indices of dimensions {sorted(dims)}",
                                   code="index_failed")
        outdated = [name for name, m in mappings.items() if "record_type" not in m["mappings"]["properties"]]
        if outdated:
            self._add_record_type(outdated)
        self._dims[store] = dim = int(dims.pop())
        return dim

    def _stamp(self, indices: list[str]) -> None:
        """Stamp indices made before the owner stamp as this deployment's, the first to open them since (which one
        made an unstamped index cannot be known): from then on a deployment whose prefix nests with this one's is
        refused them. Idempotent."""
        with boundary("migrate mapping"):
            self._writer.indices.put_mapping(index=",".join(indices), body={"_meta": {OWNER: self.prefix}})

    def _add_record_type(self, indices: list[str]) -> None:
        """Migrate an index made before record types: add the field to its mapping (adding a field is
        allowed on a live index; `dynamic: strict` would otherwise refuse every message document).
        Its documents keep no value and read as memories (queries.py). The service's own client: a
        tenant's may only read. Idempotent, so processes racing to do it all succeed."""
        with boundary("migrate mapping"):
            self._writer.indices.put_mapping(index=",".join(indices),
                                             body={"properties": {"record_type": {"type": "keyword"}}})

    def _write(self, store: str, app_id: str, tenant_id: str, docs: dict[str, dict[str, Any] | None]) -> None:
        """Index (a source) or delete (None) these ids of one tenant, each on the condition that the
        document is the version the tenant itself can see.

        A document's `_id` carries its tenant (documents.document_id), so a write names the tenant's own
        documents only. The versions come from a lookup that carries the tenant twice more: the query's
        terms, and the tenant's own credentials when configured (the engine's DLS); then the writes are
        conditional (``if_seq_no``/``if_primary_term``; ``create`` where the tenant sees nothing), so
        nothing the tenant cannot see is overwritten nor deleted. The lookup finds the tenant's documents
        by their `memory_id`, so one of the older form (its `_id` the memory id alone: an index made before,
        or a process of the previous version still writing) is deleted with the rest, or replaced by the
        document of the new form. A 409 on the tenant's own document (written meanwhile, or not yet
        refreshed) is retried after a refresh.
        """
        alias, routing = self._address(store), routing_key(app_id, tenant_id)
        pending = docs
        for attempt in range(WRITE_ATTEMPTS):
            seen = self._versions(alias, store, app_id, tenant_id, list(pending))
            if seen is None:  # no index
                if any(source is not None for source in pending.values()):
                    self._dims.pop(store, None)
                    raise NotFound(f"no index for store '{store}' (ensure_store first)", code="store_not_found")
                return
            actions = []
            for mid, source in pending.items():
                own = document_id(app_id, tenant_id, mid)
                found = seen.get(mid, {})
                for doc_id, (seq_no, term) in found.items():
                    if source is None or doc_id != own:
                        actions.append((mid, {"delete": {"_index": alias, "_id": doc_id, "routing": routing,
                                                         "if_seq_no": seq_no, "if_primary_term": term}}, None))
                if source is not None:
                    header: dict[str, Any] = {"_index": alias, "_id": own, "routing": routing}
                    if own in found:
                        header["if_seq_no"], header["if_primary_term"] = found[own]
                    actions.append((mid, {"index" if own in found else "create": header}, source))
            conflicts = self._bulk(store, actions)
            if not conflicts:
                return
            pending = {mid: docs[mid] for mid in conflicts}
            if attempt < WRITE_ATTEMPTS - 1:
                with boundary("refresh"):
                    self._writer.indices.refresh(index=alias)
        raise Retryable(f"{len(pending)} documents of store '{store}' kept changing while written; retry: "
                        f"{sorted(pending)[:5]}", code="index_busy", conflict_ids=sorted(pending))

    def _versions(self, alias: str, store: str, app_id: str, tenant_id: str,
                  ids: list[str]) -> dict[str, dict[str, tuple[int, int]]] | None:
        """memory id → {document _id → (seq_no, primary_term)} of the tenant's docs of those memory ids that it
        can see; None: no index."""
        found: dict[str, dict[str, tuple[int, int]]] = {}
        for i in range(0, len(ids), LOOKUP_CHUNK):
            chunk = ids[i:i + LOOKUP_CHUNK]
            resp = self._read("lookup", lambda: self.client.search(
                index=alias, routing=routing_key(app_id, tenant_id), ignore=404, body={
                    # two at most per id: its document, and one of the older form (`_write`)
                    "size": 2 * len(chunk), "_source": ["memory_id"], "track_total_hits": False,
                    "seq_no_primary_term": True,
                    "query": tenant_ids_query(store, app_id, tenant_id, chunk)}))
            if _missing(resp):
                return None
            for h in resp["hits"]["hits"]:
                found.setdefault(h["_source"]["memory_id"], {})[h["_id"]] = (h["_seq_no"], h["_primary_term"])
        return found

    def _read(self, what: str, call: Callable[[], Any]) -> Any:
        """A read (a search's _msearch, a write's lookup), sent again when it lost the security plugin's
        race with an index created or dropped meanwhile (errors.DLS_RACE: a raised error, or a part of an
        _msearch answer); the last attempt's answer or error is the caller's."""
        for attempt in range(DLS_RACE_ATTEMPTS - 1):
            try:
                with boundary(what):
                    answer = call()
            except Retryable as exc:
                if exc.code != DLS_RACE:
                    raise
            else:
                if not any(lost_dls_race(part.get("error")) for part in answer.get("responses", ())):
                    return answer
            self._sleep(backoff_delay(attempt, base=0.01))
        with boundary(what):
            return call()

    def _bulk(self, store: str, actions: list[tuple[str, dict[str, Any], dict[str, Any] | None]]) -> set[str]:
        """Send write actions in size-bounded requests, retrying the items answered 429; return the
        ids whose condition failed (409), for `_write` to look up again.

        A single request carries the configured refresh policy; a batch split into several
        requests is sent unrefreshed and made visible by one refresh at the end (a per-request
        wait_for would wait about a second per request).
        """
        if not actions:
            return set()
        chunks = list(_chunks(actions))
        per_request: Refresh = self.refresh if len(chunks) == 1 else "false"
        failed: dict[str, str] = {}
        conflicts: set[str] = set()
        for chunk in chunks:
            chunk_failed, chunk_conflicts = self._send(store, chunk, per_request)
            failed.update(chunk_failed)
            conflicts |= chunk_conflicts
        if any(INDEX_NOT_FOUND in reason for reason in failed.values()):
            self._dims.pop(store, None)
            raise NotFound(f"no index for store '{store}' (ensure_store first)", code="store_not_found")
        if len(chunks) > 1 and self.refresh != "false":  # also when some failed: the rest is written
            with boundary("refresh"):
                self._writer.indices.refresh(index=self._address(store))
        if failed:
            sample = "; ".join(f"{mid}: {why}" for mid, why in list(failed.items())[:5])
            raise DependencyFailed(f"OpenSearch refused {len(failed)} of {len(actions)} documents of store "
                                   f"'{store}': {sample}", code="index_partial_failure", failed_ids=sorted(failed))
        return conflicts

    def _send(self, store: str, chunk: list[tuple[str, bytes]], refresh: Refresh) -> tuple[dict[str, str], set[str]]:
        """One bulk request (plus retries of its throttled items): the ids that failed for good, and
        those whose condition failed (409)."""
        failed: dict[str, str] = {}
        conflicts: set[str] = set()
        pending = chunk
        for attempt in range(BULK_ATTEMPTS):
            try:
                with boundary("bulk"):
                    # require_alias: a write to a dropped store fails instead of auto-creating an index
                    # (a rebuild's writes name its new index, which exists; see `rebuilding`).
                    resp = self._writer.bulk(body=b"".join(lines for _, lines in pending),
                                             params={"refresh": refresh,
                                                     "require_alias": "false" if self._targets else "true"})
            except Retryable:
                if attempt == BULK_ATTEMPTS - 1:
                    raise
                self._sleep(backoff_delay(attempt))
                continue
            if not resp.get("errors"):
                return failed, conflicts
            throttled = []
            for (mid, lines), item in zip(pending, resp["items"]):
                op, result = next(iter(item.items()))
                status = int(result.get("status", 500))
                if status < 300 or (op == "delete" and status == 404):
                    continue
                if status == 409:
                    conflicts.add(mid)
                elif status in RETRYABLE_STATUSES:
                    throttled.append((mid, lines))
                else:
                    failed[mid] = f"{status} {error_type(result.get('error'))}: " \
                                  f"{str((result.get('error') or {}).get('reason', ''))[:200]}"
            if not throttled:
                return failed, conflicts
            pending = throttled
            self._sleep(backoff_delay(attempt))
        raise Retryable(f"OpenSearch kept throttling {len(pending)} documents of store '{store}'",
                        code="index_unavailable", failed_ids=sorted(mid for mid, _ in pending))


class _TenantSizes:
    """(store, app, tenant) → (its documents, counted up to the index's exact_vector_max + 1; when counted):
    what chooses a search's vector half, nothing more. The TENANT_SIZES_KEPT most recently counted are kept;
    thread-safe."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, str, str], tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tenant: tuple[str, str, str]) -> tuple[int, float] | None:
        with self._lock:
            return self._entries.get(tenant)

    def put(self, tenant: tuple[str, str, str], documents: int, when: float) -> None:
        with self._lock:
            self._entries.pop(tenant, None)
            self._entries[tenant] = (documents, when)
            while len(self._entries) > TENANT_SIZES_KEPT:
                self._entries.popitem(last=False)

    def items(self) -> list[tuple[tuple[str, str, str], tuple[int, float]]]:
        with self._lock:
            return list(self._entries.items())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _cosine(score: float) -> float:
    """A cosinesimil score, from the walk or the script, as the cosine: (2 - (1 - cos)) / 2 = (1 + cos) / 2."""
    return max(-1.0, min(1.0, 2.0 * score - 1.0))


def _hit(raw: dict[str, Any], score: float) -> Hit:
    source = raw.get("_source") or {}
    # No record_type: a document written before record types, a memory.
    return Hit(source["memory_id"], score, RecordType(source.get("record_type") or RecordType.MEMORY),
               source.get("agent_id", ""), source.get("run_id", ""))


def _missing(response: dict[str, Any]) -> bool:
    """A request made with ignore=404 found nothing (no index, no alias): no exception, no log line."""
    return response.get("status") == 404 and "error" in response


def _unit_vector(values: Sequence[float], dim: int, what: str) -> list[float] | None:
    """The vector at unit length, or None for the zero vector; InvalidInput if it is malformed."""
    vec = [float(v) for v in values]
    if len(vec) != dim:
        raise InvalidInput(f"{what} has dimension {len(vec)}, the store's is {dim}", code="dimension_mismatch")
    if not all(math.isfinite(v) for v in vec):
        raise InvalidInput(f"{what} contains NaN or infinite values", code="invalid_vector")
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        return None
    # Unit length, rounded: cosine = dot then holds on every engine, and 8 decimals keep the bulk
    # body small while moving a cosine by at most sqrt(dim) * 5e-9 (under 1e-6 up to 16k dims).
    return [round(v / norm, 8) for v in vec]


def _chunks(actions: Iterable[tuple[str, dict[str, Any], dict[str, Any] | None]], *,
            max_docs: int = BULK_MAX_DOCS) -> Iterator[list[tuple[str, bytes]]]:
    """NDJSON lines per action, grouped into requests of at most `max_docs` / BULK_MAX_BYTES (lazily:
    a bulk load reads its documents no faster than they are sent)."""
    chunk: list[tuple[str, bytes]] = []
    size = 0
    for mid, header, source in actions:
        lines = (json.dumps(header) + "\n" + ("" if source is None else json.dumps(source, default=str) + "\n"))
        encoded = lines.encode()
        if chunk and (len(chunk) >= max_docs or size + len(encoded) > BULK_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append((mid, encoded))
        size += len(encoded)
    if chunk:
        yield chunk
