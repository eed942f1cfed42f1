"""`Memlane` and `AsyncMemlane`: the resource groups, today's `add` / `search` shortcuts, and `thread()`."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import httpx

from ..api import models as m
from ..api.context_models import ContextOut
from . import resources as r
from .auth import auth_for
from .errors import error_for
from .routes import refuse_dot_segments
from .transport import AsyncRunner, Retry, Runner, SyncRunner, connection_failed, payload_of, retry_after_of

DEFAULT_URL = "http://127.0.0.1:8420"


class _Client:
    """What both clients share: the groups and the shortcuts, over a runner."""

    def __init__(self, runner: Runner):
        self._runner = runner
        self.stores = r.Stores(runner)
        self.memories = r.Memories(runner)
        self.messages = r.Messages(runner)
        self.tasks = r.Tasks(runner)
        self.scopes = r.Scopes(runner)
        self.runs = r.Runs(runner)
        self.erasures = r.Erasures(runner)
        self.audit = r.Audit(runner)
        self.dream = r.Dream(runner)
        self.threads = r.Threads(runner)
        self.profiles = r.Profiles(runner)

    def add(self, store: str, scope: Mapping[str, Any], messages: Iterable[Mapping[str, Any]] | None = None,
            text: str | None = None, sync: bool = False, **options: Any) -> m.AddAccepted | m.TaskOut:
        """`memories.add`: options request_id, metadata, access_policy."""
        return self.memories.add(store, scope, messages, text, sync, **options)

    def search(self, store: str, query: str, scope: Mapping[str, Any], **options: Any) -> Any:
        """The hits of `memories.search` (a list; awaitable on AsyncMemlane)."""
        return self._runner.then(self.memories.search(store, query, scope, **options), lambda found: found.results)

    def thread(self, store: str, thread_id: str, *, app_id: str, tenant_id: str,
               agent_id: str | None = None) -> "Thread":
        """A handle on one thread that carries its scope (it creates nothing: `threads.create` does)."""
        return Thread(self, store, thread_id, app_id=app_id, tenant_id=tenant_id, agent_id=agent_id)


def _options(url: str, api_key: str | None, auth: Any, region: str | None, timeout: float,
             headers: Mapping[str, str] | None) -> dict[str, Any]:
    return {"base_url": url.rstrip("/"), "auth": auth_for(url, api_key, auth, region), "timeout": timeout,
            "headers": {"Accept": "application/json", **(headers or {})}}


class Memlane(_Client):
    """The synchronous client. `auth="sigv4"` signs for the API deployed on AWS (botocore's credential chain,
    `region` default the execute-api URL's); otherwise `api_key`, if given, goes as a bearer key.
    `transport` (an httpx transport) serves tests and the CLI's in-process mode."""

    def __init__(self, url: str = DEFAULT_URL, api_key: str | None = None, auth: Any = None, *,
                 region: str | None = None, timeout: float = 60.0, retry: Retry = Retry(),
                 transport: httpx.BaseTransport | None = None, headers: Mapping[str, str] | None = None):
        self.url = url
        self.http = httpx.Client(transport=transport, **_options(url, api_key, auth, region, timeout, headers))
        super().__init__(SyncRunner(self.http, retry))

    def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        """Any route by hand, once, no retry: the JSON answer, or the typed error."""
        refuse_dot_segments(method, path)
        try:
            # no params at all keeps a query written into `path` (httpx drops it for an empty dict)
            query = {k: v for k, v in (params or {}).items() if v is not None} or None
            response = self.http.request(method, path, json=json, params=query)
        except httpx.TransportError as error:
            raise connection_failed(f"{method} {path}", error) from error
        payload = payload_of(response)
        if response.status_code >= 400:
            raise error_for(response.status_code, payload, retry_after_of(response))
        return payload

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Memlane":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncMemlane(_Client):
    """The asynchronous client: the same groups and methods as `Memlane`, each awaited; lists with `async for`."""

    def __init__(self, url: str = DEFAULT_URL, api_key: str | None = None, auth: Any = None, *,
                 region: str | None = None, timeout: float = 60.0, retry: Retry = Retry(),
                 transport: httpx.AsyncBaseTransport | None = None, headers: Mapping[str, str] | None = None):
        self.url = url
        self.http = httpx.AsyncClient(transport=transport, **_options(url, api_key, auth, region, timeout, headers))
        super().__init__(AsyncRunner(self.http, retry))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> "AsyncMemlane":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class Thread:
    """One thread (a run with a stable id) and its scope: add to it, search from it, get its context card.
    On AsyncMemlane each method returns an awaitable."""

    def __init__(self, client: _Client, store: str, thread_id: str, *, app_id: str, tenant_id: str,
                 agent_id: str | None = None):
        self.client, self.store, self.thread_id = client, store, thread_id
        self.app_id, self.tenant_id, self.agent_id = app_id, tenant_id, agent_id

    @property
    def scope(self) -> dict[str, str]:
        scope = {"app_id": self.app_id, "tenant_id": self.tenant_id, "run_id": self.thread_id}
        return {**scope, "agent_id": self.agent_id} if self.agent_id else scope

    def create(self, **options: Any) -> m.ThreadOut:
        """Create it (or answer it, when it exists); options: access_policy, metadata."""
        scope = {"app_id": self.app_id, "tenant_id": self.tenant_id, "agent_id": self.agent_id}
        return self.client.threads.create(self.store, {k: v for k, v in scope.items() if v},
                                          thread_id=self.thread_id, **options)

    def get(self) -> m.ThreadOut:
        return self.client.threads.get(self.store, self.thread_id, **self._tenant())

    def add(self, messages: Iterable[Mapping[str, Any]] | None = None, text: str | None = None, sync: bool = False,
            **options: Any) -> m.AddAccepted | m.TaskOut:
        return self.client.memories.add(self.store, self.scope, messages, text, sync, **options)

    def messages(self, *, newest_first: bool | None = None, limit: int | None = None) -> Any:
        scope = {"agent_id": "__default__", **self.scope}  # message reads name all four ids
        return self.client.messages.list(self.store, scope, newest_first=newest_first, limit=limit)

    def search(self, query: str, *, this_thread_only: bool | None = None, **options: Any) -> m.SearchOut:
        """The tenant's long-term memories seen from this thread (`this_thread_only`: exact_thread_match)."""
        if this_thread_only is not None:
            options["exact_thread_match"] = this_thread_only
        return self.client.memories.search(self.store, query, self.scope, **options)

    def context(self, **options: Any) -> ContextOut:
        """The context card; options: query, budget_tokens, recent_messages, sections."""
        return self.client.threads.context(self.store, self.thread_id, **self._tenant(), **options)

    def summary(self) -> m.SummaryOut:
        return self.client.threads.summary(self.store, self.thread_id, **self._tenant())

    def refresh_summary(self) -> m.SummaryRefreshAccepted:
        return self.client.threads.refresh_summary(self.store, self.thread_id, **self._tenant())

    def delete(self) -> m.RunDeleted:
        return self.client.threads.delete(self.store, self.thread_id, **self._tenant())

    def _tenant(self) -> dict[str, Any]:
        return {"app_id": self.app_id, "tenant_id": self.tenant_id, "agent_id": self.agent_id}
