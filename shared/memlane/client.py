"""The dict-returning client of earlier versions, kept for its callers: a thin layer over `memlane.sdk`
(new code uses `memlane.sdk.Memlane`, whose answers are typed). Same auth as the SDK: an API key, or
``auth="sigv4"`` for the API deployed on AWS (needs ``pip install 'memlane[aws]'``)."""

from __future__ import annotations

import time
from typing import Any, Literal
from urllib.parse import quote

import httpx

from .sdk import ApiError, Memlane, SigV4Unavailable, region_of
from .sdk.auth import SIGV4_SERVICE, SigV4Signer
from .sdk.transport import check_wait, refuse_non_finite

Auth = Literal["api_key", "sigv4"]
__all__ = ["SIGV4_SERVICE", "ApiError", "MemlaneClient", "SigV4Signer", "SigV4Unavailable", "region_of"]


def _seg(value: Any) -> str:
    """A caller's id as one path segment: "victim?x=1" or "a/b" is sent as that id (escaped), never as a query or as
    more of the path (a trial: `delete_thread(S, "victim?x=1", ...)` deleted thread `victim`). "." and ".." stay as
    they are, for `refuse_dot_segments` to refuse."""
    return quote(str(value), safe="")


class MemlaneClient:
    def __init__(self, transport: httpx.BaseTransport | str, *, api_key: str | None = None,
                 auth: Auth | None = None, region: str | None = None):
        """`transport`: a URL (or an httpx transport, as the CLI's in-process one). `auth="sigv4"` signs for
        the API deployed on AWS (`region`: default the URL's, else the standard chain's); otherwise
        `api_key`, if given, is sent as a bearer key."""
        self.sdk = (Memlane(transport, api_key, auth, region=region) if isinstance(transport, str)
                    else Memlane("http://memlane.local", api_key, auth, region=region, transport=transport))

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, *,
              query: dict[str, Any] | None = None) -> Any:
        """One request, sent once (no retry): the JSON answer, or `ApiError` (typed by its code)."""
        refuse_non_finite(f"{method} {path}", body)  # typed, not httpx's bare ValueError
        return self.sdk.request(method, path, json=body, params=query)

    # stores
    def create_store(self, name: str, **settings: Any) -> dict[str, Any]:
        return self._call("POST", "/v1/stores", {"name": name, **settings})

    def get_store(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(name)}")

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
        return self._call("POST", f"/v1/stores/{_seg(store)}/memories", body)

    # tasks
    def get_task(self, store: str, request_id: str, *, app_id: str | None = None,
                 tenant_id: str | None = None) -> dict[str, Any]:
        """Request ids are per tenant: name the tenant when several within your grant used the id."""
        return self._call("GET", f"/v1/stores/{_seg(store)}/tasks/{_seg(request_id)}",
                          query={"app_id": app_id, "tenant_id": tenant_id})

    def wait_task(self, store: str, request_id: str, *, app_id: str | None = None, tenant_id: str | None = None,
                  timeout: float = 60.0, poll: float = 0.2) -> dict[str, Any]:
        check_wait(timeout=timeout, poll=poll)
        deadline = time.monotonic() + timeout
        while True:
            task = self.get_task(store, request_id, app_id=app_id, tenant_id=tenant_id)
            if task["status"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
                return task
            time.sleep(poll)

    def list_tasks(self, store: str, app_id: str, tenant_id: str, **page: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(store)}/tasks",
                          query={"app_id": app_id, "tenant_id": tenant_id, **page})

    # search and memories
    def search(self, store: str, query: str, scope: dict[str, Any], **options: Any) -> list[dict[str, Any]]:
        return self._call("POST", f"/v1/stores/{_seg(store)}/search",
                          {"query": query, "scope": scope, **options})["results"]

    def context(self, store: str, thread_id: str, *, app_id: str, tenant_id: str, **options: Any) -> dict[str, Any]:
        """The thread's context card: `agent_id`, `query`, `budget_tokens`, `recent_messages`, `sections`."""
        return self._call("POST", f"/v1/stores/{_seg(store)}/threads/{_seg(thread_id)}/context",
                          {"app_id": app_id, "tenant_id": tenant_id, **options})

    def messages(self, store: str, scope: dict[str, Any], **page: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(store)}/messages", query={**scope, **page})

    def memories(self, store: str, scope: dict[str, Any], **page: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(store)}/memories", query={**scope, **page})

    def scopes(self, store: str, app_id: str, tenant_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(store)}/scopes", query={"app_id": app_id, "tenant_id": tenant_id})

    # explicit writes (no extraction)
    def write_memories(self, store: str, scope: dict[str, Any], memories: list[dict[str, Any]], *,
                       request_id: str | None = None) -> dict[str, Any]:
        """Write memories as given ({text, memory_type?, memory_id?, event_time?, metadata?}): idempotent
        on each memory_id (or on request_id); `created` is 0 for a replay."""
        body: dict[str, Any] = {"scope": scope, "infer": False, "memories": memories}
        if request_id is not None:
            body["request_id"] = request_id
        return self._call("POST", f"/v1/stores/{_seg(store)}/memories", body)

    # threads
    def create_thread(self, store: str, scope: dict[str, Any], *, thread_id: str | None = None,
                      **options: Any) -> dict[str, Any]:
        """scope: {app_id, tenant_id, agent_id?}; options: access_policy, metadata. The same again answers it."""
        body: dict[str, Any] = {"scope": scope, **options}
        if thread_id is not None:
            body["thread_id"] = thread_id
        return self._call("POST", f"/v1/stores/{_seg(store)}/threads", body)

    def get_thread(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                   agent_id: str | None = None) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(store)}/threads/{_seg(thread_id)}",
                          query={"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id})

    def list_threads(self, store: str, *, app_id: str, tenant_id: str, agent_id: str | None = None,
                     **page: Any) -> dict[str, Any]:
        """Newest activity first: {threads, next_cursor}."""
        return self._call("GET", f"/v1/stores/{_seg(store)}/threads",
                          query={"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id, **page})

    def delete_thread(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                      agent_id: str | None = None) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/stores/{_seg(store)}/threads/{_seg(thread_id)}",
                          query={"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id})

    # actor profiles
    def get_profile(self, store: str, tenant_id: str, *, app_id: str, agent_id: str | None = None) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(store)}/profiles/{_seg(tenant_id)}",
                          query={"app_id": app_id, "agent_id": agent_id})

    def put_profile(self, store: str, tenant_id: str, *, app_id: str, text: str | None = None,
                    attributes: dict[str, str] | None = None) -> dict[str, Any]:
        return self._call("PUT", f"/v1/stores/{_seg(store)}/profiles/{_seg(tenant_id)}",
                          {"app_id": app_id, "text": text, "attributes": attributes})

    def get_agent_profile(self, store: str, agent_id: str, *, app_id: str, tenant_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/stores/{_seg(store)}/agents/{_seg(agent_id)}/profile",
                          query={"app_id": app_id, "tenant_id": tenant_id})

    def put_agent_profile(self, store: str, agent_id: str, *, app_id: str, tenant_id: str, text: str | None = None,
                          attributes: dict[str, str] | None = None) -> dict[str, Any]:
        return self._call("PUT", f"/v1/stores/{_seg(store)}/agents/{_seg(agent_id)}/profile",
                          {"app_id": app_id, "tenant_id": tenant_id, "text": text, "attributes": attributes})

    # thread summaries (a thread is a run: agent_id defaults to __default__)
    def get_summary(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                    agent_id: str | None = None) -> dict[str, Any]:
        """The thread's rolling summary with its coverage and age; ApiError 404 summary_not_found before the first,
        thread_not_found when there is no such thread."""
        return self._call("GET", f"/v1/stores/{_seg(store)}/threads/{_seg(thread_id)}/summary",
                          query={"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id})

    def refresh_summary(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                        agent_id: str | None = None, wait: bool = False, timeout: float = 60.0) -> dict[str, Any]:
        """Refresh the summary now (a task, like an extraction's); with `wait`, the task once finished."""
        accepted = self._call("POST", f"/v1/stores/{_seg(store)}/threads/{_seg(thread_id)}/summary",
                              query={"app_id": app_id, "tenant_id": tenant_id, "agent_id": agent_id})
        if not wait:
            return accepted
        return self.wait_task(store, accepted["request_id"], app_id=app_id, tenant_id=tenant_id, timeout=timeout)
