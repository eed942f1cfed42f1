"""A LangGraph `BaseStore` backed by memlane: `MemlaneStore` (docs/integrations.md#langgraph).

Every item is an explicit memory (`infer: false`) of one fixed scope — the store's `app_id`, `tenant_id`
and `agent_id` (default `langgraph`) — so no namespace can name another tenant. Within it:

- the item's id is a hash of (agent_id, namespace, key): a put is idempotent and the same key from any
  process lands on the same memory;
- the memory's text is what gets searched: the value's `index` fields (LangGraph's JSON paths), by default
  every string in the value;
- the metadata keeps what LangGraph needs back: the value as JSON (`lg_value`, any shape of keys), the
  namespace (`lg_ns`, labels joined by "." — LangGraph refuses "." in a label) and each of its prefixes
  (`lg_prefixes`, so a namespace-prefix search is one metadata filter inside memlane's hybrid search).

Each operation is written once, as a generator of SDK calls, and driven by the sync client for `batch`
and by the async one for `abatch`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import datetime
from typing import Any, Callable, Generator, Iterable, Mapping

from . import bounded_query, missing_framework

try:
    from langgraph.store.base import (BaseStore, GetOp, IndexConfig, Item, ListNamespacesOp, MatchCondition, Op,
                                      PutOp, Result, SearchItem, SearchOp, validate_op_namespace)
    from langgraph.store.base.embed import get_text_at_path, tokenize_path
except ModuleNotFoundError as missing:
    if (missing.name or "").split(".")[0] != "langgraph":
        raise  # langgraph is there, something it needs is not: its own error says what
    raise missing_framework(missing, "langgraph") from missing

from ..domain.limits import MAX_CONTENT_CHARS, MAX_PAGE_SIZE, MAX_TOP_K
from ..domain.scope import validate_id
from ..sdk import DEFAULT_URL, AsyncMemlane, Memlane, errors

# One SDK call: given the client, its answer (an awaitable of it on AsyncMemlane).
Step = Callable[[Any], Any]
Flow = Generator[Step, Any, Any]


class MemlaneStore(BaseStore):
    """LangGraph's long-term memory store on memlane: `put/get/search/delete/list_namespaces` and their
    async forms. One instance serves one tenant; give each end user a store of their own tenant.

    `client` is the `Memlane` of the sync forms (default: one of `url` with `api_key`). The async forms use
    `async_client` (an `AsyncMemlane`, or a callable making one per call); without it they run on `client`
    in a worker thread when one was given, else on an `AsyncMemlane` of `url` made for the call.
    `index={"fields": [...]}` names the value fields searched by default, as LangGraph's own `index` config
    does (memlane embeds on the server: `dims` and `embed` are not used).
    """

    supports_ttl = False

    def __init__(self, store: str, *, app_id: str, tenant_id: str, agent_id: str = "langgraph",
                 url: str = DEFAULT_URL, api_key: str | None = None, client: Memlane | None = None,
                 async_client: AsyncMemlane | Callable[[], AsyncMemlane] | None = None,
                 index: IndexConfig | None = None):
        # checked now, so a wildcard or a delimiter can never become the store's scope
        self.scope = {f: validate_id(f, v) for f, v in {"app_id": app_id, "tenant_id": tenant_id,
                                                         "agent_id": agent_id}.items()}
        self.store, self.app_id, self.tenant_id, self.agent_id = store, app_id, tenant_id, agent_id
        self._client = client
        self._async_client = async_client
        self._url, self._api_key = url, api_key
        self.index_fields = list((index or {}).get("fields") or [])

    # -- BaseStore ------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        client = self._sync_client()
        return [_drive(self._flow(op), client) for op in _checked(ops)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = _checked(ops)
        if self._async_client is None and self._client is not None:
            # only a sync client was given (its URL, auth, transport): run the same ops on it, off the loop
            return await asyncio.to_thread(self.batch, ops)
        if isinstance(self._async_client, AsyncMemlane):
            return [await _adrive(self._flow(op), self._async_client) for op in ops]
        make = self._async_client or (lambda: AsyncMemlane(self._url, api_key=self._api_key))
        async with make() as client:  # a client of this call's event loop (an AsyncMemlane serves one loop)
            return [await _adrive(self._flow(op), client) for op in ops]

    def _sync_client(self) -> Memlane:
        if self._client is None:
            self._client = Memlane(self._url, api_key=self._api_key)
        return self._client

    # -- the operations, once for both clients ------------------------------------------------------------

    def _flow(self, op: Op) -> Flow:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            return self._delete(op) if op.value is None else self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"unknown operation {type(op).__name__}")

    def _get(self, namespace: tuple[str, ...], key: str) -> Flow:
        found = yield from self._find(namespace, key)
        return found[1] if found else None

    def _find(self, namespace: tuple[str, ...], key: str) -> Flow:
        """(memory id, item) of this agent's item of this namespace and key, or None: under its id, else
        under the id items had before ids carried the tenant (written by an earlier version)."""
        for mid in (self._id(namespace, key), legacy_memory_id(self.agent_id, namespace, key)):
            try:
                memory = yield lambda c, mid=mid: c.memories.get(self.store, mid, app_id=self.app_id,
                                                                 tenant_id=self.tenant_id)
            except errors.MemoryNotFound:
                continue
            except errors.StoreNotFound:
                return None
            item = self._own(memory)
            if item is not None and (item.namespace, item.key) == (namespace, key):
                return mid, item
        return None

    def _own(self, memory: Any, updated_at: datetime | None = None) -> Item | None:
        """The item a memory holds if this store wrote it: the agent's, under the id its namespace and key hash to
        (or the id of an earlier version), its value JSON. Any other memory of the scope — another tool's or app's
        of the tenant, made to look like an item — is none: it neither shows up as an item twice nor breaks a
        listing with a value that does not parse."""
        item = _item(memory, updated_at)
        if item is None or memory.scope.agent_id != self.agent_id:
            return None
        ids = (self._id(item.namespace, item.key), legacy_memory_id(self.agent_id, item.namespace, item.key))
        return item if memory.memory_id in ids else None

    def _id(self, namespace: tuple[str, ...], key: str) -> str:
        return memory_id(self.app_id, self.tenant_id, self.agent_id, namespace, key)

    def _put(self, op: PutOp) -> Flow:
        mid = self._id(op.namespace, op.key)
        text, indexed = self._text(op)
        metadata = _metadata(op.namespace, op.key, op.value, indexed)  # type: ignore[arg-type]
        memory = {"memory_id": mid, "text": text, "metadata": metadata}
        try:
            written = yield from self._write(memory)
            if written.created:  # the key's first write under this id: the one an earlier version wrote goes
                yield from self._forget(legacy_memory_id(self.agent_id, op.namespace, op.key))
            if written.memories[0].status != "deleted":
                return None
        except errors.MemoryIdReused:  # the key holds another value: replace it in place
            try:
                yield lambda c: c.memories.update(self.store, mid, app_id=self.app_id, tenant_id=self.tenant_id,
                                                  text=text, metadata=metadata)
                return None
            except errors.BadRequest as refused:
                if refused.code != "memory_deleted":
                    raise
        # an applied dream DELETE or MERGE marked the item deleted (kept for its undo): write the key anew
        yield lambda c: c.memories.delete(self.store, mid, app_id=self.app_id, tenant_id=self.tenant_id)
        yield from self._write(memory)
        return None

    def _write(self, memory: dict[str, Any]) -> Flow:
        try:
            return (yield lambda c: c.memories.write(self.store, self.scope, [memory]))
        except errors.StoreNotFound:
            try:  # the first put of a new deployment makes the memlane store
                yield lambda c: c.stores.create(self.store, description="LangGraph store (memlane.integrations)")
            except errors.StoreExists:
                pass
            return (yield lambda c: c.memories.write(self.store, self.scope, [memory]))

    def _delete(self, op: PutOp) -> Flow:
        found = yield from self._find(op.namespace, op.key)  # only this agent's item of this namespace and key
        if found is not None:
            yield from self._forget(found[0])
        return None

    def _forget(self, mid: str) -> Flow:
        try:
            yield lambda c: c.memories.delete(self.store, mid, app_id=self.app_id, tenant_id=self.tenant_id)
        except errors.MemoryNotFound:
            pass
        return None

    def _search(self, op: SearchOp) -> Flow:
        if op.query:
            return (yield from self._query(op))
        items = yield from self._scan(lambda i: _under(i.namespace, op.namespace_prefix) and _matches(i.value, op.filter),
                                      enough=op.offset + op.limit)
        return [SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at)
                for i in items[op.offset:op.offset + op.limit]]

    def _query(self, op: SearchOp) -> Flow:
        filters: dict[str, Any] = {"lg_indexed": True}
        if op.namespace_prefix:
            filters["lg_prefixes"] = ".".join(op.namespace_prefix)
        if op.offset + op.limit > MAX_TOP_K:  # not silently fewer than asked for
            raise ValueError(f"memlane ranks at most {MAX_TOP_K} items for a query: offset + limit "
                             f"({op.offset} + {op.limit}) must not pass it")
        # a value filter is applied here, after ranking: ask for the most memlane answers then
        top_k = MAX_TOP_K if op.filter else op.offset + op.limit
        # within the API's query limit: a graph may search with a user's whole message, which LangGraph's own stores
        # take (a trial: a longer one was refused here); its end is where it asks
        query = bounded_query(op.query)
        try:
            found = yield lambda c: c.memories.search(self.store, query, {**self.scope, "run_id": "*"},
                                                      top_k=top_k, filters=filters)
        except errors.StoreNotFound:
            return []
        hits = []
        for hit in found.results:
            item = self._own(hit, updated_at=hit.created_at)
            if item is not None and _matches(item.value, op.filter):
                hits.append(SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at,
                                       score=hit.similarity))
        return hits[op.offset:op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> Flow:
        found = {item.namespace for item in (yield from self._scan())}
        spaces = [ns for ns in found if all(_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            spaces = list({ns[:op.max_depth] for ns in spaces})
        return sorted(spaces)[op.offset:op.offset + op.limit]

    def _scan(self, keep: Callable[[Item], bool] = lambda item: True, enough: int | None = None) -> Flow:
        """The items of this store's scope that `keep` keeps, page by page (memlane lists by scope, not by
        metadata), until there are `enough`."""
        items: list[Item] = []
        cursor: str | None = None
        while True:
            try:
                page = yield lambda c: c.memories.list(self.store, self.scope, limit=MAX_PAGE_SIZE).page(cursor)
            except errors.StoreNotFound:
                return items
            items.extend(i for i in map(self._own, page.memories) if i is not None and keep(i))
            cursor = page.next_cursor
            if not cursor or (enough is not None and len(items) >= enough):
                return items

    def _text(self, op: PutOp) -> tuple[str, bool]:
        """The text memlane searches for this value, and whether a query may find it at all."""
        # an item no query may find still needs a text: its address (never empty: a namespace has a label)
        address = f"{'.'.join(op.namespace)}:{op.key}"
        if op.index is False:
            return address, False
        paths = op.index if op.index is not None else self.index_fields
        if paths:
            texts = [t for p in paths for t in get_text_at_path(op.value, "$" if p == "$" else tokenize_path(p))]
        else:
            texts = list(_strings(op.value))
        text = "\n".join(t for t in texts if t.strip())[:MAX_CONTENT_CHARS]
        return (text, True) if text.strip() else (address, False)


def memory_id(app_id: str, tenant_id: str, agent_id: str, namespace: tuple[str, ...], key: str) -> str:
    """The memlane memory id of a LangGraph item: the same for the same tenant, agent, namespace and key. Memory
    ids are unique in a memlane store, so the tenant is part of it: two tenants' items of one key never meet."""
    return _hashed(app_id, tenant_id, agent_id, list(namespace), key)


def legacy_memory_id(agent_id: str, namespace: tuple[str, ...], key: str) -> str:
    """The id items had before it carried the tenant: still read, and removed when the key is written again."""
    return _hashed(agent_id, list(namespace), key)


def _hashed(*parts: object) -> str:
    return f"lg-{hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()[:40]}"


def _metadata(namespace: tuple[str, ...], key: str, value: Mapping[str, Any], indexed: bool) -> dict[str, Any]:
    return {"lg_ns": ".".join(namespace), "lg_key": key, "lg_indexed": indexed,
            "lg_prefixes": [".".join(namespace[:n]) for n in range(1, len(namespace) + 1)],
            "lg_value": json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))}


def _item(memory: Any, updated_at: datetime | None = None) -> Item | None:
    """The LangGraph item a memory's metadata describes, or None for a memory that describes none."""
    meta = memory.metadata or {}
    if not (isinstance(meta.get("lg_ns"), str) and isinstance(meta.get("lg_key"), str)
            and isinstance(meta.get("lg_value"), str)) or memory.status == "deleted":
        return None  # deleted: an applied dream DELETE or MERGE (kept for its undo) removed it
    try:
        value = json.loads(meta["lg_value"])
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return Item(value=value, key=meta["lg_key"], namespace=tuple(meta["lg_ns"].split(".")),
                created_at=memory.created_at, updated_at=updated_at or memory.updated_at)


def _checked(ops: Iterable[Op]) -> list[Op]:
    ops = list(ops)
    for op in ops:
        validate_op_namespace(op)  # labels joined by "." must not be able to name another namespace
    return ops


def _under(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return namespace[:len(prefix)] == prefix


def _match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter semantics: equality on top-level fields, or the operators $eq $ne $gt $gte $lt $lte."""
    return all(_compare(value.get(k), wanted) for k, wanted in (flt or {}).items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict) and any(k.startswith("$") for k in wanted):
        return all(_operator(actual, op, operand) for op, operand in wanted.items())
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(actual) == len(wanted)
                and all(_compare(a, w) for a, w in zip(actual, wanted)))
    return actual == wanted


_ORDER = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return actual == operand
    if op == "$ne":
        return actual != operand
    if op not in _ORDER:
        raise ValueError(f"unsupported filter operator {op}")
    try:
        return _ORDER[op](float(actual), float(operand))
    except (TypeError, ValueError):  # a missing or non-numeric field does not match
        return False


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _drive(flow: Flow, client: Memlane) -> Any:
    """Run an operation with the sync client: each SDK call's answer (or error) goes back into it."""
    try:
        step = next(flow)
        while True:
            try:
                answer = step(client)
            except errors.ApiError as error:
                step = flow.throw(error)
            else:
                step = flow.send(answer)
    except StopIteration as done:
        return done.value


async def _adrive(flow: Flow, client: AsyncMemlane) -> Any:
    """The same with the async client."""
    try:
        step = next(flow)
        while True:
            try:
                answer = await step(client)
            except errors.ApiError as error:
                step = flow.throw(error)
            else:
                step = flow.send(answer)
    except StopIteration as done:
        return done.value
