"""`Memlane` and `AsyncMemlane`: the resource groups, today's `add` / `search` shortcuts, and `thread()`."""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterable, Iterator, Mapping

import httpx

from ..api import models as m
from ..api.context_models import ContextOut
from . import resources as r
from .auth import auth_for
from .errors import ThreadNotFound, error_for
from .routes import refuse_dot_segments
from .transport import AsyncRunner, Retry, Runner, SyncRunner, connection_failed, payload_of, retry_after_of

DEFAULT_URL = "http://127.0.0.1:8420"
DEFAULT_AGENT = "__default__"  # the agent of a scope written without one


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
        self._found_agent: str | None = None  # the thread's agent, once a read without agent_id looked it up

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
        """The thread's messages (a `Pager`). Message reads name all four ids: without the handle's agent_id, the
        thread's agent is looked up first (a get, kept on the handle), as other reads find a thread by its id alone
        (a trial listed none of agent "planner"'s thread); a run that is no recorded thread is read as the default
        agent's."""
        options = {"newest_first": newest_first, "limit": limit}
        agent = self.agent_id or self._found_agent
        if agent is not None:
            return self._messages_of(agent, options)
        if isinstance(self.client, AsyncMemlane):  # no await here: the lookup waits for the first page
            return _AgentFirst(self, options)
        return self._messages_of(self._agent_of(self._lookup()), options)

    def search(self, query: str, *, this_thread_only: bool = False, recall_scope: str = "tenant",
               **options: Any) -> m.SearchOut:
        """The tenant's long-term memories seen from this thread, as its context card recalls them: every thread
        and agent of the tenant and its tenant-level memories, if this thread's access policy recalls
        (exact_thread_match false; a trial found only the handle's own run searched). `this_thread_only`: this
        thread's alone; `recall_scope="agent"`: the threads of the handle's agent only."""
        if recall_scope not in ("tenant", "agent"):
            raise ValueError(f"recall_scope must be 'tenant' or 'agent', not {recall_scope!r}")
        if recall_scope == "agent" and not self.agent_id:
            raise ValueError("recall_scope='agent' needs the handle's agent_id")
        # the agent narrows the thread itself (a run id two agents share), and other threads only when asked to
        narrowed = this_thread_only or recall_scope == "agent"
        scope = self.scope if narrowed else {k: v for k, v in self.scope.items() if k != "agent_id"}
        options["exact_thread_match"] = bool(this_thread_only)
        return self.client.memories.search(self.store, query, scope, **options)

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

    def _messages_of(self, agent: str, options: dict[str, Any]) -> Any:
        return self.client.messages.list(self.store, {**self.scope, "agent_id": agent}, **options)

    def _lookup(self) -> m.ThreadOut | None:
        try:
            return self.get()
        except ThreadNotFound:
            return None

    def _agent_of(self, thread: m.ThreadOut | None) -> str:
        if thread is None:  # a run written before thread ids were recorded: the default agent's, as before
            return DEFAULT_AGENT
        self._found_agent = thread.scope.agent_id
        return self._found_agent


class _AgentFirst:
    """An AsyncMemlane thread's messages when the handle has no agent_id: the thread's agent is looked up before
    the first page; `async for` and `await .page(cursor)` as on a `Pager`."""

    def __init__(self, thread: Thread, options: dict[str, Any]):
        self.thread, self.options = thread, options

    async def _pager(self) -> Any:
        agent = self.thread._found_agent
        if agent is None:
            try:
                found: m.ThreadOut | None = await self.thread.get()  # type: ignore[misc]
            except ThreadNotFound:
                found = None
            agent = self.thread._agent_of(found)
        return self.thread._messages_of(agent, self.options)

    async def page(self, cursor: str | None = None) -> Any:
        return await (await self._pager()).page(cursor)

    async def __aiter__(self) -> AsyncIterator[Any]:
        async for message in await self._pager():
            yield message

    def __iter__(self) -> Iterator[Any]:
        raise TypeError("an AsyncMemlane list is iterated with `async for`")
