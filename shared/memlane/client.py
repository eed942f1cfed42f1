"""Python client for the memlane HTTP API (stdlib only), over HTTP or in-process."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Protocol
from urllib.parse import urlencode


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.field = status, code, message, field


class Transport(Protocol):
    def send(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]: ...


class HttpTransport:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0):
        self.base_url, self.api_key, self.timeout = base_url.rstrip("/"), api_key, timeout

    def send(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None


def _query(params: dict[str, Any]) -> str:
    pairs = []
    for key, value in params.items():
        if value is None:
            continue
        for v in value if isinstance(value, list) else [value]:
            pairs.append((key, str(v).lower() if isinstance(v, bool) else v))
    return "?" + urlencode(pairs) if pairs else ""


class MemlaneClient:
    def __init__(self, transport: Transport | str, *, api_key: str | None = None):
        self.transport = HttpTransport(transport, api_key=api_key) if isinstance(transport, str) else transport

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        status, payload = self.transport.send(method, path, body)
        if status >= 400:
            error = (payload or {}).get("error", {}) if isinstance(payload, dict) else {}
            raise ApiError(status, error.get("code", "error"), error.get("message", str(payload)), error.get("field"))
        return payload

    # stores
    def create_store(self, name: str, **settings: Any) -> dict[str, Any]:
        return self._call("POST", "/v1/stores", {"name": name, **settings})

    def get_store(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{name}")

    def list_stores(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/stores")["stores"]

    # ingest
    def add(self, store: str, scope: dict[str, Any], *, messages: list[dict[str, Any]] | None = None,
            text: str | None = None, **options: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"scope": scope, **options}
        if messages is not None:
            body["messages"] = messages
        if text is not None:
            body["text"] = text
        return self._call("POST", f"/v1/stores/{store}/memories", body)

    # tasks
    def get_task(self, store: str, request_id: str, *, app_id: str | None = None,
                 tenant_id: str | None = None) -> dict[str, Any]:
        """Request ids are per tenant: name the tenant when several within your grant used the id."""
        return self._call("GET", f"/v1/stores/{store}/tasks/{request_id}" + _query({"app_id": app_id,
                                                                                     "tenant_id": tenant_id}))

    def wait_task(self, store: str, request_id: str, *, app_id: str | None = None, tenant_id: str | None = None,
                  timeout: float = 60.0, poll: float = 0.2) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = self.get_task(store, request_id, app_id=app_id, tenant_id=tenant_id)
            if task["status"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
                return task
            time.sleep(poll)

    def list_tasks(self, store: str, app_id: str, tenant_id: str, **page: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{store}/tasks" + _query({"app_id": app_id, "tenant_id": tenant_id,
                                                                          **page}))

    # search and memories
    def search(self, store: str, query: str, scope: dict[str, Any], **options: Any) -> list[dict[str, Any]]:
        return self._call("POST", f"/v1/stores/{store}/search", {"query": query, "scope": scope, **options})["results"]

    def context(self, store: str, thread_id: str, *, app_id: str, tenant_id: str, **options: Any) -> dict[str, Any]:
        """The thread's context card: `agent_id`, `query`, `budget_tokens`, `recent_messages`, `sections`."""
        return self._call("POST", f"/v1/stores/{store}/threads/{thread_id}/context",
                          {"app_id": app_id, "tenant_id": tenant_id, **options})

    def messages(self, store: str, scope: dict[str, Any], **page: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{store}/messages" + _query({**scope, **page}))

    def memories(self, store: str, scope: dict[str, Any], **page: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{store}/memories" + _query({**scope, **page}))

    def scopes(self, store: str, app_id: str, tenant_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{store}/scopes" + _query({"app_id": app_id, "tenant_id": tenant_id}))

    # explicit writes (no extraction)
    def write_memories(self, store: str, scope: dict[str, Any], memories: list[dict[str, Any]], *,
                       request_id: str | None = None) -> dict[str, Any]:
        """Write memories as given ({text, memory_type?, memory_id?, event_time?, metadata?}): idempotent
        on each memory_id (or on request_id); `created` is 0 for a replay."""
        body: dict[str, Any] = {"scope": scope, "infer": False, "memories": memories}
        if request_id is not None:
            body["request_id"] = request_id
        return self._call("POST", f"/v1/stores/{store}/memories", body)

    # threads
    def create_thread(self, store: str, scope: dict[str, Any], *, thread_id: str | None = None,
                      **options: Any) -> dict[str, Any]:
        """scope: {app_id, tenant_id, agent_id?}; options: access_policy, metadata. The same again answers it."""
        body: dict[str, Any] = {"scope": scope, **options}
        if thread_id is not None:
            body["thread_id"] = thread_id
        return self._call("POST", f"/v1/stores/{store}/threads", body)

    def get_thread(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                   agent_id: str | None = None) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{store}/threads/{thread_id}" + _query(
            {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))

    def list_threads(self, store: str, *, app_id: str, tenant_id: str, agent_id: str | None = None,
                     **page: Any) -> dict[str, Any]:
        """Newest activity first: {threads, next_cursor}."""
        return self._call("GET", f"/v1/stores/{store}/threads" + _query(
            {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id, **page}))

    def delete_thread(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                      agent_id: str | None = None) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/stores/{store}/threads/{thread_id}" + _query(
            {"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))

    # actor profiles
    def get_profile(self, store: str, tenant_id: str, *, app_id: str, agent_id: str | None = None) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{store}/profiles/{tenant_id}" + _query(
            {"app_id": app_id, "agent_id": agent_id}))

    def put_profile(self, store: str, tenant_id: str, *, app_id: str, text: str | None = None,
                    attributes: dict[str, str] | None = None) -> dict[str, Any]:
        return self._call("PUT", f"/v1/stores/{store}/profiles/{tenant_id}",
                          {"app_id": app_id, "text": text, "attributes": attributes})

    def get_agent_profile(self, store: str, agent_id: str, *, app_id: str, tenant_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{store}/agents/{agent_id}/profile" + _query(
            {"app_id": app_id, "tenant_id": tenant_id}))

    def put_agent_profile(self, store: str, agent_id: str, *, app_id: str, tenant_id: str, text: str | None = None,
                          attributes: dict[str, str] | None = None) -> dict[str, Any]:
        return self._call("PUT", f"/v1/stores/{store}/agents/{agent_id}/profile",
                          {"app_id": app_id, "tenant_id": tenant_id, "text": text, "attributes": attributes})

    # thread summaries (a thread is a run: agent_id defaults to __default__)
    def get_summary(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                    agent_id: str | None = None) -> dict[str, Any]:
        """The thread's rolling summary with its coverage and age; ApiError 404 summary_not_found before the first."""
        return self._call("GET", f"/v1/stores/{store}/threads/{thread_id}/summary"
                          + _query({"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))

    def refresh_summary(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                        agent_id: str | None = None, wait: bool = False, timeout: float = 60.0) -> dict[str, Any]:
        """Refresh the summary now (a task, like an extraction's); with `wait`, the task once finished."""
        accepted = self._call("POST", f"/v1/stores/{store}/threads/{thread_id}/summary"
                              + _query({"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id}))
        if not wait:
            return accepted
        return self.wait_task(store, accepted["request_id"], app_id=app_id, tenant_id=tenant_id, timeout=timeout)
