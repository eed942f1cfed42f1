"""Python client for the memlane HTTP API (stdlib only), over HTTP or in-process.

Two ways to authenticate: an API key (local mode, `memlane keys create`), or SigV4 for the API deployed
on AWS (API Gateway IAM auth): ``MemlaneClient(api_url, auth="sigv4")`` signs every request for service
``execute-api`` with the credentials of the standard chain (environment, profile, SSO, instance role),
in the region of the API's URL, else the chain's region. SigV4 needs botocore (``pip install 'memlane[aws]'``).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any, Literal, Protocol
from urllib.parse import urlencode, urlsplit

Auth = Literal["api_key", "sigv4"]
SIGV4_SERVICE = "execute-api"
_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.field = status, code, message, field


class Transport(Protocol):
    def send(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]: ...


def region_of(url: str) -> str | None:
    """The region in an API Gateway URL (https://{id}.execute-api.{region}.amazonaws.com), else None."""
    found = _API_HOST.match((urlsplit(url).hostname or "").lower())
    return found.group(1) if found else None


class SigV4Unavailable(RuntimeError):
    """SigV4 was asked for and cannot sign: botocore missing, or no credentials or region found."""


class SigV4Signer:
    """Signs requests with botocore's SigV4Auth; credentials are re-read per request (they may refresh)."""

    def __init__(self, url: str, *, region: str | None = None, service: str = SIGV4_SERVICE):
        try:
            from botocore.session import Session
        except ModuleNotFoundError as missing:
            raise SigV4Unavailable("SigV4 signing needs botocore: pip install 'memlane[aws]'") from missing
        session = Session()
        self.region = region or region_of(url) or session.get_config_variable("region")
        if not self.region:
            raise SigV4Unavailable("SigV4 needs a region: an execute-api URL, region=..., --region or AWS_REGION")
        self.credentials = session.get_credentials()
        if self.credentials is None:
            raise SigV4Unavailable("SigV4 needs AWS credentials and the standard chain found none")
        self.service = service

    def headers(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> dict[str, str]:
        """The headers to send: `headers` plus X-Amz-Date, the session token if any, and Authorization."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=data or b"", headers=headers)
        SigV4Auth(self.credentials.get_frozen_credentials(), self.service, self.region).add_auth(request)
        return dict(request.headers.items())


class HttpTransport:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 auth: Auth | None = None, region: str | None = None):
        self.base_url, self.api_key, self.timeout = base_url.rstrip("/"), api_key, timeout
        self.signer = SigV4Signer(self.base_url, region=region) if auth == "sigv4" else None

    def send(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        url = self.base_url + path
        headers = {"Content-Type": "application/json"}
        if self.signer is not None:  # signs the exact bytes, path and query sent below
            headers = self.signer.headers(method, url, data, headers)
        elif self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
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
    def __init__(self, transport: Transport | str, *, api_key: str | None = None, auth: Auth | None = None,
                 region: str | None = None):
        """`transport`: a URL (or a Transport). `auth="sigv4"` signs for the API deployed on AWS (`region`:
        default the URL's, else the standard chain's); otherwise `api_key`, if given, is sent as a bearer key."""
        self.transport = (HttpTransport(transport, api_key=api_key, auth=auth, region=region)
                          if isinstance(transport, str) else transport)

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
