"""Every route of the API, the SDK method that calls it, and the API's own models of its wire format.

tests/sdk/test_openapi_coverage.py walks `/openapi.json` and fails when a route has no entry here, when
an entry names no SDK method, or when a model differs from the one the API documents.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..api import models as m
from ..api.context_models import ContextIn, ContextOut
from .errors import ApiError, BadRequest


@dataclass(frozen=True)
class Route:
    sdk: str  # "group.method" on Memlane / AsyncMemlane
    method: str
    path: str
    request: type[BaseModel] | None = None
    responses: dict[int, Any] = field(default_factory=dict)  # status → model (or a union); absent: no body
    # safe to send again after a lost answer; a POST is also safe once its body carries one of `safe_with`
    # (an add's request_id; a thread created again with the same id answers it)
    idempotent: bool = False
    safe_with: tuple[str, ...] = ("request_id",)

    def url(self, **params: str) -> str:
        for name, value in params.items():
            # An HTTP client resolves a "." or ".." segment before sending: ".../memories/.." would reach the
            # store itself (a DELETE of one memory, the store's delete). No id is one (domain/scope.py).
            if str(value).strip(".") == "":
                raise BadRequest(400, "invalid_input", f"{self.sdk}: {name} {str(value)!r} names no resource "
                                                     "(refused before sending)", field=name)
        return self.path.format(**{k: quote(str(v), safe="") for k, v in params.items()})

    def parse(self, status: int, payload: Any) -> Any:
        if status not in self.responses:  # another route answered (a proxy's rewrite): never taken as this one's
            expected = ", ".join(map(str, self.responses))
            raise ApiError(status, "unexpected_status", f"{self.sdk}: {self.method} {self.path} answered {status}, "
                                                        f"which it never answers ({expected})")
        model = self.responses[status]
        if model is None or payload is None:
            return payload
        try:
            return _adapter(model).validate_python(payload)
        except ValidationError as invalid:  # a proxy's page, or another server, under this route's status
            raise ApiError(status, "unexpected_response", f"{self.sdk}: {self.method} {self.path} answered {status} "
                                                          f"with a body it never sends ({_shown(payload)}): "
                                                          f"{invalid.error_count()} difference(s) from its model, "
                                                          f"first {_first(invalid)}") from None


def _shown(payload: Any) -> str:
    text = payload if isinstance(payload, str) else repr(payload)
    return text if len(text) <= 80 else f"{text[:80]}..."


def _first(invalid: ValidationError) -> str:
    error = invalid.errors()[0]
    return f"{'.'.join(map(str, error['loc'])) or 'the body'}: {error['msg']}"


@functools.cache
def _adapter(model: Any) -> TypeAdapter[Any]:
    return TypeAdapter(model)


def refuse_dot_segments(method: str, path: str) -> None:
    """A path by hand (the dict client's) with a "." or ".." segment, or a "#", is refused before sending: the
    HTTP client would resolve the one and cut the path at the other, so `DELETE /v1/stores/s/threads/..` (or
    `.../threads/..#`, or `/v1/stores/s#/threads/x`) would be sent as the store's delete."""
    if "#" in path or any(s in (".", "..") for s in path.split("?", 1)[0].split("/")):
        raise BadRequest(400, "invalid_input", f"{method} {path}: a path segment is '.' or '..', or holds a '#': "
                                             "it names no resource (refused before sending)")


def _get(sdk: str, path: str, out: Any) -> Route:
    return Route(sdk, "GET", path, responses={200: out}, idempotent=True)


S = "/v1/stores/{store}"
ROUTES: list[Route] = [
    Route("stores.create", "POST", "/v1/stores", m.CreateStoreIn, {201: m.StoreOut}),
    _get("stores.list", "/v1/stores", m.StoreList),
    _get("stores.get", S, m.StoreOut),
    Route("stores.update", "PATCH", S, m.UpdateStoreIn, {200: m.StoreOut}, idempotent=True),
    Route("stores.delete", "DELETE", S, responses={204: None}, idempotent=True),
    Route("memories.add", "POST", S + "/memories", m.AddIn,
          {202: m.AddAccepted, 200: m.TaskOut | m.ExplicitWriteOut, 201: m.ExplicitWriteOut}),
    # each add carries a request_id (memories.add_batch makes the missing ones): a resent batch replays
    Route("memories.add_batch", "POST", S + "/memories:batch", m.AddBatchIn, {200: m.AddBatchOut}, idempotent=True),
    _get("memories.list", S + "/memories", m.MemoryList),
    _get("memories.get", S + "/memories/{memory_id}", m.MemoryOut),
    Route("memories.update", "PATCH", S + "/memories/{memory_id}", m.UpdateMemoryIn, {200: m.MemoryOut},
          idempotent=True),
    Route("memories.delete", "DELETE", S + "/memories/{memory_id}", responses={200: m.MemoryDeletedOut},
          idempotent=True),
    Route("memories.search", "POST", S + "/search", m.SearchIn, {200: m.SearchOut}, idempotent=True),
    _get("messages.list", S + "/messages", m.MessageList),
    _get("tasks.get", S + "/tasks/{request_id}", m.TaskOut),
    _get("tasks.list", S + "/tasks", m.TaskList),
    # not idempotent: sent again after a lost answer, it finds the task PENDING (409 task_not_failed)
    Route("tasks.retry", "POST", S + "/tasks/{request_id}/retry", responses={202: m.TaskOut}),
    _get("scopes.list", S + "/scopes", m.ScopeList),
    Route("scopes.set_access_policy", "PUT", S + "/access-policy", m.AccessPolicyIn, {200: m.ScopeInfoOut},
          idempotent=True),
    Route("runs.delete", "DELETE", S + "/runs/{run_id}", responses={200: m.RunDeleted}, idempotent=True),
    Route("erasures.erase", "POST", "/v1/tenants/erase", m.EraseTenantIn, {202: m.ErasureOut}, idempotent=True),
    _get("erasures.get", "/v1/erasures/{erasure_id}", m.ErasureOut),
    _get("audit.list", S + "/requests", m.AuditList),
    Route("dream.run", "POST", S + "/dream", m.DreamIn, {200: m.DreamTaskOut, 202: m.DreamTaskOut}),
    _get("dream.get", S + "/dream-tasks/{task_id}", m.DreamTaskOut),
    _get("dream.list", S + "/dream-tasks", m.DreamTaskList),
    _get("dream.actions", S + "/dream-tasks/{task_id}/actions", m.DreamActionList),
    _get("dream.get_action", S + "/dream-actions/{action_id}", m.DreamActionOut),
    Route("dream.apply", "POST", S + "/dream-actions/{action_id}/apply", responses={200: m.DreamActionOut}),
    Route("dream.reject", "POST", S + "/dream-actions/{action_id}/reject", responses={200: m.DreamActionOut}),
    Route("dream.undo", "POST", S + "/dream-actions/{action_id}/undo", responses={200: m.DreamActionOut}),
    Route("threads.create", "POST", S + "/threads", m.ThreadIn, {201: m.ThreadOut, 200: m.ThreadOut},
          safe_with=("thread_id",)),
    _get("threads.list", S + "/threads", m.ThreadList),
    _get("threads.get", S + "/threads/{thread_id}", m.ThreadOut),
    Route("threads.delete", "DELETE", S + "/threads/{thread_id}", responses={200: m.RunDeleted}, idempotent=True),
    Route("threads.context", "POST", S + "/threads/{thread_id}/context", ContextIn, {200: ContextOut},
          idempotent=True),
    _get("threads.summary", S + "/threads/{thread_id}/summary", m.SummaryOut),
    Route("threads.refresh_summary", "POST", S + "/threads/{thread_id}/summary",
          responses={202: m.SummaryRefreshAccepted}),
    _get("profiles.get", S + "/profiles/{tenant_id}", m.ActorProfileOut),
    Route("profiles.put", "PUT", S + "/profiles/{tenant_id}", m.TenantProfileIn, {200: m.ActorProfileOut},
          idempotent=True),
    _get("profiles.get_agent", S + "/agents/{agent_id}/profile", m.ActorProfileOut),
    Route("profiles.put_agent", "PUT", S + "/agents/{agent_id}/profile", m.AgentProfileIn, {200: m.ActorProfileOut},
          idempotent=True),
    Route("profiles.delete", "DELETE", S + "/profiles/{tenant_id}", responses={204: None}, idempotent=True),
    Route("profiles.delete_agent", "DELETE", S + "/agents/{agent_id}/profile", responses={204: None}, idempotent=True),
]
BY_NAME: dict[str, Route] = {route.sdk: route for route in ROUTES}
