"""The resource groups of the client (`client.stores`, `client.memories`, ...): one method per route.

Written once for both clients: a method builds the `Call` and hands it to the client's runner, which
answers the value on `Memlane` and an awaitable of it on `AsyncMemlane`. Return annotations name the
value; the API's own models (api/models.py) are the wire format.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable, Mapping

from pydantic import ValidationError

from ..api import models as m
from ..api.context_models import ContextOut
from ..api.failures import validation_failure
from .errors import error_for
from .routes import BY_NAME
from .transport import Call, Pager, Runner, refuse_non_finite

Scope = Mapping[str, Any]


def _call(name: str, path: dict[str, str] | None = None, query: dict[str, Any] | None = None,
          body: Any = None) -> Call:
    route = BY_NAME[name]
    refuse_non_finite(name, body)  # first, as the API parses the body before checking it against the model
    if isinstance(body, dict) and route.request is not None:
        try:  # validated here as the API will: a typo fails before sending, as the API would answer it
            body = route.request.model_validate(body)
        except ValidationError as invalid:
            status, code, message, field = validation_failure(invalid.errors(), located=False)
            raise error_for(status, {"error": {"code": code, "message": f"{name}: {message} (refused before "
                                                                        "sending)", "field": field}}) from None
    return Call.of(route, path, query, body)


class _Group:
    def __init__(self, runner: Runner):
        self._run = runner.run
        self._runner = runner


class Stores(_Group):
    def create(self, name: str, **settings: Any) -> m.StoreOut:
        """settings: description, extract_instructions, dream_mode, dream_threshold, summary_trigger_tokens, ..."""
        return self._run(_call("stores.create", body={"name": name, **settings}))

    def list(self, *, limit: int | None = None) -> Pager[m.StoreOut]:
        return self._runner.pages(_call("stores.list", query={"limit": limit}), "stores")

    def get(self, store: str) -> m.StoreOut:
        return self._run(_call("stores.get", {"store": store}))

    def update(self, store: str, **settings: Any) -> m.StoreOut:
        return self._run(_call("stores.update", {"store": store}, body=settings))

    def delete(self, store: str) -> None:
        return self._run(_call("stores.delete", {"store": store}))


class Memories(_Group):
    def add(self, store: str, scope: Scope, messages: Iterable[Mapping[str, Any]] | None = None,
            text: str | None = None, sync: bool = False, *, request_id: str | None = None,
            metadata: Mapping[str, Any] | None = None, access_policy: str | None = None) -> m.AddAccepted | m.TaskOut:
        """Store messages (or a text) and extract memories from them: 202 `AddAccepted` (poll with
        `tasks.wait`), or the finished `TaskOut` when `sync`. Without a `request_id` one is made here, so a
        retry after a lost answer replays the add instead of adding it twice."""
        body: dict[str, Any] = {"scope": dict(scope), "request_id": request_id or f"sdk-{uuid.uuid4()}"}
        if messages is not None:
            body["messages"] = [dict(message) for message in messages]
        if text is not None:
            body["text"] = text
        if sync:
            body["sync"] = True
        if metadata is not None:
            body["metadata"] = dict(metadata)
        if access_policy is not None:
            body["access_policy"] = access_policy
        return self._run(_call("memories.add", {"store": store}, body=body))

    def add_batch(self, store: str, adds: Iterable[Mapping[str, Any]]) -> m.AddBatchOut:
        """Up to 100 add bodies in one request, a result per add (a bad add fails only itself). An add
        without a `request_id` gets one here, so a batch resent after a lost answer replays what went in."""
        # `request_id: None` is no id either (a trial: it overwrote the one made here, and a resent batch added twice).
        body = {"adds": [{**dict(add), "request_id": add.get("request_id") or f"sdk-{uuid.uuid4()}"} for add in adds]}
        return self._run(_call("memories.add_batch", {"store": store}, body=body))

    def write(self, store: str, scope: Scope, memories: Iterable[Mapping[str, Any]], *,
              request_id: str | None = None) -> m.ExplicitWriteOut:
        """Write memories as given ({text, memory_type?, memory_id?, event_time?, metadata?}), no extraction. Without
        a `request_id` one is made here, as for an add: a retry after a lost answer replays the write."""
        body: dict[str, Any] = {"scope": dict(scope), "infer": False, "memories": [dict(x) for x in memories],
                                "request_id": request_id or f"sdk-{uuid.uuid4()}"}
        return self._run(_call("memories.add", {"store": store}, body=body))

    def search(self, store: str, query: str, scope: Scope, **options: Any) -> m.SearchOut:
        """options: top_k, min_similarity, include_evidence, filters, memory_types, record_types, recipe, ..."""
        return self._run(_call("memories.search", {"store": store},
                               body={"query": query, "scope": dict(scope), **options}))

    def list(self, store: str, scope: Scope, *, limit: int | None = None) -> Pager[m.MemoryOut]:
        """scope: app_id, tenant_id, agent_id?, run_id?"""
        return self._runner.pages(_call("memories.list", {"store": store}, {**scope, "limit": limit}), "memories")

    def get(self, store: str, memory_id: str, *, app_id: str, tenant_id: str) -> m.MemoryOut:
        return self._run(_call("memories.get", {"store": store, "memory_id": memory_id},
                               {"app_id": app_id, "tenant_id": tenant_id}))

    def update(self, store: str, memory_id: str, *, app_id: str, tenant_id: str, **changes: Any) -> m.MemoryOut:
        """changes: text, metadata, memory_type, importance."""
        return self._run(_call("memories.update", {"store": store, "memory_id": memory_id},
                               body={"app_id": app_id, "tenant_id": tenant_id, **changes}))

    def delete(self, store: str, memory_id: str, *, app_id: str, tenant_id: str) -> m.MemoryDeletedOut:
        return self._run(_call("memories.delete", {"store": store, "memory_id": memory_id},
                               {"app_id": app_id, "tenant_id": tenant_id}))


class Messages(_Group):
    def list(self, store: str, scope: Scope, *, newest_first: bool | None = None,
             limit: int | None = None) -> Pager[m.MessageOut]:
        """A run's messages (short-term memory); scope: all four ids."""
        return self._runner.pages(_call("messages.list", {"store": store},
                                        {**scope, "newest_first": newest_first, "limit": limit}), "messages")


class Tasks(_Group):
    def get(self, store: str, request_id: str, *, app_id: str | None = None,
            tenant_id: str | None = None) -> m.TaskOut:
        """Request ids are per tenant: name the tenant when several within your grant used the id."""
        return self._run(_call("tasks.get", {"store": store, "request_id": request_id},
                               {"app_id": app_id, "tenant_id": tenant_id}))

    def list(self, store: str, *, app_id: str, tenant_id: str, limit: int | None = None) -> Pager[m.TaskOut]:
        return self._runner.pages(_call("tasks.list", {"store": store},
                                        {"app_id": app_id, "tenant_id": tenant_id, "limit": limit}), "tasks")

    def retry(self, store: str, request_id: str, *, app_id: str | None = None,
              tenant_id: str | None = None) -> m.TaskOut:
        """Run a FAILED extraction or summary refresh again: the task, PENDING (then `wait` on it).
        `TaskNotFailed` when it is not FAILED, `TaskNotRetryable` for an explicit write."""
        return self._run(_call("tasks.retry", {"store": store, "request_id": request_id},
                               {"app_id": app_id, "tenant_id": tenant_id}))

    def wait(self, store: str, request_id: str, *, app_id: str | None = None, tenant_id: str | None = None,
             timeout: float = 60.0, interval: float = 0.2) -> m.TaskOut:
        """The task once SUCCEEDED or FAILED (an extraction, or a summary refresh); `WaitTimeout` past `timeout`."""
        call = _call("tasks.get", {"store": store, "request_id": request_id},
                     {"app_id": app_id, "tenant_id": tenant_id})
        return self._runner.poll(call, timeout, interval)


class Scopes(_Group):
    def list(self, store: str, *, app_id: str, tenant_id: str, limit: int | None = None) -> Pager[m.ScopeInfoOut]:
        return self._runner.pages(_call("scopes.list", {"store": store},
                                        {"app_id": app_id, "tenant_id": tenant_id, "limit": limit}), "scopes")

    def set_access_policy(self, store: str, scope: Scope, access_policy: str) -> m.ScopeInfoOut:
        return self._run(_call("scopes.set_access_policy", {"store": store},
                               body={"scope": dict(scope), "access_policy": access_policy}))


class Runs(_Group):
    def delete(self, store: str, run_id: str, *, app_id: str, tenant_id: str,
               agent_id: str | None = None) -> m.RunDeleted:
        return self._run(_call("runs.delete", {"store": store, "run_id": run_id},
                               {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))


class Erasures(_Group):
    def erase(self, *, app_id: str, tenant_id: str) -> m.ErasureOut:
        """Erase everything of a tenant in every store (asynchronous, idempotent): poll with `wait`."""
        return self._run(_call("erasures.erase", body={"app_id": app_id, "tenant_id": tenant_id}))

    def get(self, erasure_id: str) -> m.ErasureOut:
        return self._run(_call("erasures.get", {"erasure_id": erasure_id}))

    def wait(self, erasure_id: str, *, timeout: float = 60.0, interval: float = 0.2) -> m.ErasureOut:
        return self._runner.poll(_call("erasures.get", {"erasure_id": erasure_id}), timeout, interval)


class Audit(_Group):
    def list(self, store: str, *, since: str | None = None, until: str | None = None, principal: str | None = None,
             status: int | None = None, operation: str | None = None, tenant_id: str | None = None,
             limit: int | None = None) -> Pager[Any]:
        """The store's audit log (admin), newest first."""
        query = {"since": since, "until": until, "principal": principal, "status": status, "operation": operation,
                 "tenant_id": tenant_id, "limit": limit}
        return self._runner.pages(_call("audit.list", {"store": store}, query), "requests")


class Dream(_Group):
    def run(self, store: str, scope: Scope, *, mode: str | None = None, threshold: float | None = None,
            kinds: list[str] | None = None, sync: bool = False) -> m.DreamTaskOut:
        body: dict[str, Any] = {"scope": dict(scope), "mode": mode, "threshold": threshold, "kinds": kinds}
        body = {k: v for k, v in body.items() if v is not None}
        if sync:
            body["sync"] = True
        return self._run(_call("dream.run", {"store": store}, body=body))

    def get(self, store: str, task_id: str) -> m.DreamTaskOut:
        return self._run(_call("dream.get", {"store": store, "task_id": task_id}))

    def wait(self, store: str, task_id: str, *, timeout: float = 60.0, interval: float = 0.2) -> m.DreamTaskOut:
        return self._runner.poll(_call("dream.get", {"store": store, "task_id": task_id}), timeout, interval)

    def list(self, store: str, *, app_id: str, tenant_id: str, limit: int | None = None) -> Pager[m.DreamTaskOut]:
        return self._runner.pages(_call("dream.list", {"store": store},
                                        {"app_id": app_id, "tenant_id": tenant_id, "limit": limit}), "tasks")

    def actions(self, store: str, task_id: str, *, status: str | None = None,
                limit: int | None = None) -> Pager[m.DreamActionOut]:
        return self._runner.pages(_call("dream.actions", {"store": store, "task_id": task_id},
                                        {"status": status, "limit": limit}), "actions")

    def get_action(self, store: str, action_id: str) -> m.DreamActionOut:
        return self._run(_call("dream.get_action", {"store": store, "action_id": action_id}))

    def apply(self, store: str, action_id: str) -> m.DreamActionOut:
        return self._run(_call("dream.apply", {"store": store, "action_id": action_id}))

    def reject(self, store: str, action_id: str) -> m.DreamActionOut:
        return self._run(_call("dream.reject", {"store": store, "action_id": action_id}))

    def undo(self, store: str, action_id: str) -> m.DreamActionOut:
        return self._run(_call("dream.undo", {"store": store, "action_id": action_id}))


class Threads(_Group):
    def create(self, store: str, scope: Scope, *, thread_id: str | None = None, access_policy: str | None = None,
               metadata: Mapping[str, Any] | None = None) -> m.ThreadOut:
        """scope: {app_id, tenant_id, agent_id?}. The same again answers the thread (200)."""
        body: dict[str, Any] = {"scope": dict(scope), "thread_id": thread_id, "access_policy": access_policy,
                                "metadata": dict(metadata) if metadata is not None else None}
        body = {k: v for k, v in body.items() if v is not None}
        return self._run(_call("threads.create", {"store": store}, body=body))

    def get(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
            agent_id: str | None = None) -> m.ThreadOut:
        return self._run(_call("threads.get", {"store": store, "thread_id": thread_id},
                               {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))

    def list(self, store: str, *, app_id: str, tenant_id: str, agent_id: str | None = None,
             limit: int | None = None) -> Pager[m.ThreadOut]:
        """Newest activity first."""
        return self._runner.pages(_call("threads.list", {"store": store}, {
            "app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id, "limit": limit}), "threads")

    def delete(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
               agent_id: str | None = None) -> m.RunDeleted:
        return self._run(_call("threads.delete", {"store": store, "thread_id": thread_id},
                               {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))

    def context(self, store: str, thread_id: str, *, app_id: str, tenant_id: str, **options: Any) -> ContextOut:
        """The thread's context card; options: agent_id, query, budget_tokens, recent_messages, sections,
        recall_scope ("agent": memories and plans of the thread's agent only)."""
        return self._run(_call("threads.context", {"store": store, "thread_id": thread_id},
                               body={"app_id": app_id, "tenant_id": tenant_id, **options}))

    def summary(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                agent_id: str | None = None) -> m.SummaryOut:
        """The rolling summary; `SummaryNotFound` before the first."""
        return self._run(_call("threads.summary", {"store": store, "thread_id": thread_id},
                               {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))

    def refresh_summary(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                        agent_id: str | None = None) -> m.SummaryRefreshAccepted:
        """Refresh the summary now: a task; `wait_summary` (or `tasks.wait`) on its request_id."""
        return self._run(_call("threads.refresh_summary", {"store": store, "thread_id": thread_id},
                               {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))

    def wait_summary(self, store: str, request_id: str, *, app_id: str, tenant_id: str,
                     timeout: float = 60.0, interval: float = 0.2) -> m.TaskOut:
        """The summary refresh task once finished (then `summary()` reads the new summary)."""
        call = _call("tasks.get", {"store": store, "request_id": request_id},
                     {"app_id": app_id, "tenant_id": tenant_id})
        return self._runner.poll(call, timeout, interval)


class Profiles(_Group):
    def get(self, store: str, tenant_id: str, *, app_id: str, agent_id: str | None = None) -> m.ActorProfileOut:
        return self._run(_call("profiles.get", {"store": store, "tenant_id": tenant_id},
                               {"app_id": app_id, "agent_id": agent_id}))

    def put(self, store: str, tenant_id: str, *, app_id: str, text: str | None = None,
            attributes: Mapping[str, str] | None = None) -> m.ActorProfileOut:
        """What was stated about the tenant, replacing what was stated before."""
        body = {"app_id": app_id, "text": text, "attributes": dict(attributes) if attributes is not None else None}
        return self._run(_call("profiles.put", {"store": store, "tenant_id": tenant_id}, body=body))

    def get_agent(self, store: str, agent_id: str, *, app_id: str, tenant_id: str) -> m.ActorProfileOut:
        return self._run(_call("profiles.get_agent", {"store": store, "agent_id": agent_id},
                               {"app_id": app_id, "tenant_id": tenant_id}))

    def put_agent(self, store: str, agent_id: str, *, app_id: str, tenant_id: str, text: str | None = None,
                  attributes: Mapping[str, str] | None = None) -> m.ActorProfileOut:
        body = {"app_id": app_id, "tenant_id": tenant_id, "text": text,
                "attributes": dict(attributes) if attributes is not None else None}
        return self._run(_call("profiles.put_agent", {"store": store, "agent_id": agent_id}, body=body))

    def delete(self, store: str, tenant_id: str, *, app_id: str) -> None:
        """Withdraw what was stated about the tenant (what a dream distilled stays); ProfileNotFound if nothing was."""
        return self._run(_call("profiles.delete", {"store": store, "tenant_id": tenant_id}, {"app_id": app_id}))

    def delete_agent(self, store: str, agent_id: str, *, app_id: str, tenant_id: str) -> None:
        return self._run(_call("profiles.delete_agent", {"store": store, "agent_id": agent_id},
                               {"app_id": app_id, "tenant_id": tenant_id}))
