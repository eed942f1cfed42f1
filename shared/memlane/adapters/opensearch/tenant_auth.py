"""Per-tenant OpenSearch clients: the credentials the engine confines to one tenant's documents.

- `TokenClients` (self-managed OpenSearch with the security plugin): a short-lived HS256 token per
  (store, app, tenant), signed with the key shared with the plugin's ``jwt`` auth domain
  (infra/opensearch/security/config.yml). Its claims ``store``, ``app``, ``tenant`` become the user's
  attributes, and the ``memlane_tenant`` role's document-level security is a term filter on each
  (roles.yml): a request sent with the token sees, and deletes by query, only that tenant's documents.
  Stateless on both sides — no user, role or alias per tenant.
- `SigV4Clients` (Amazon OpenSearch Service): requests signed with the tenant's STS session, the same
  one that confines its DynamoDB items (session tags store/app/tenant), for fine-grained access control
  to map to the tenant role (docs/index-confinement.md).

Clients are cached per tenant (a bounded LRU) and renewed before their credentials expire.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Protocol
from urllib.parse import urlparse, urlunparse

from opensearchpy import OpenSearch

from .connection import build_client

TOKEN_SECONDS = 900
RENEW_BEFORE_SECONDS = 360  # a client handed out outlives the job using it (the longest function timeout: 300 s)
MAX_CLIENTS = 256
TENANT_ROLE = "memlane_tenant"  # the backend role roles_mapping.yml maps to the DLS role


class TenantClients(Protocol):
    def client_for(self, store: str, app_id: str, tenant_id: str) -> OpenSearch: ...


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def tenant_token(key: bytes, store: str, app_id: str, tenant_id: str, *, now: float, seconds: int = TOKEN_SECONDS) -> str:
    """A compact HS256 JWT whose claims name the tenant (RFC 7519; stdlib only)."""
    header = {"alg": "HS256", "typ": "JWT"}
    claims = {"sub": f"memlane:{store}:{app_id}:{tenant_id}", "roles": [TENANT_ROLE],
              "store": store, "app": app_id, "tenant": tenant_id,
              "iat": int(now), "nbf": int(now) - 5, "exp": int(now) + seconds}
    signing_input = ".".join(_b64url(json.dumps(p, separators=(",", ":")).encode()) for p in (header, claims))
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


def without_userinfo(url: str) -> str:
    """The URL minus any user:password: a tenant's client must never carry the service's login."""
    p = urlparse(url)
    host = p.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if p.port:
        netloc += f":{p.port}"
    return urlunparse(p._replace(netloc=netloc))


class _Cache:
    """(store, app, tenant) → (client, renew_at), least recently used first; closes what it drops."""

    def __init__(self, make: Callable[[tuple[str, str, str], float], tuple[OpenSearch, float]],
                 clock: Callable[[], float], max_clients: int):
        self._make, self._clock, self._max = make, clock, max_clients
        self._entries: OrderedDict[tuple[str, str, str], tuple[OpenSearch, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> OpenSearch:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and now < entry[1]:
                self._entries.move_to_end(key)
                return entry[0]
        client, renew_at = self._make(key, now)
        with self._lock:
            old = self._entries.pop(key, None)
            self._entries[key] = (client, renew_at)
            dropped = [old[0]] if old else []
            while len(self._entries) > self._max:
                dropped.append(self._entries.popitem(last=False)[1][0])
        for c in dropped:  # a request still using one finishes: closing only drops idle connections
            c.close()
        return client


class TokenClients:
    def __init__(self, url: str, key_b64: str, *, seconds: int = TOKEN_SECONDS,
                 clock: Callable[[], float] = time.time, max_clients: int = MAX_CLIENTS):
        self.key = base64.b64decode(key_b64)
        if len(self.key) < 32:
            raise ValueError("the tenant token key must be at least 32 bytes (base64)")
        self.url, self.seconds = without_userinfo(url), seconds
        self._cache = _Cache(self._make, clock, max_clients)

    def client_for(self, store: str, app_id: str, tenant_id: str) -> OpenSearch:
        return self._cache.get((store, app_id, tenant_id))

    def _make(self, key: tuple[str, str, str], now: float) -> tuple[OpenSearch, float]:
        token = tenant_token(self.key, *key, now=now, seconds=self.seconds)
        client = build_client(self.url, headers={"Authorization": f"Bearer {token}"})
        return client, now + self.seconds - min(RENEW_BEFORE_SECONDS, self.seconds // 2)


class SigV4Clients:
    """Clients signed with the tenant's STS credentials. `credentials_for(store, app, tenant)` returns
    botocore credentials of the tenant's session (the one that also confines its DynamoDB items)."""

    def __init__(self, url: str, credentials_for: Callable[[str, str, str], Any], *, region: str,
                 clock: Callable[[], float] = time.time, max_clients: int = MAX_CLIENTS,
                 renew_seconds: int = TOKEN_SECONDS - RENEW_BEFORE_SECONDS):
        self.url, self.region, self.renew_seconds = url, region, renew_seconds
        self._credentials_for = credentials_for
        self._cache = _Cache(self._make, clock, max_clients)

    def client_for(self, store: str, app_id: str, tenant_id: str) -> OpenSearch:
        return self._cache.get((store, app_id, tenant_id))

    def _make(self, key: tuple[str, str, str], now: float) -> tuple[OpenSearch, float]:
        client = build_client(self.url, region=self.region, sigv4=True, credentials=self._credentials_for(*key))
        return client, now + self.renew_seconds


class TenantSessions:
    """botocore credentials of the tenant data role, assumed with session tags store/app/tenant —
    the same role, tags and session name as the tenant's DynamoDB calls (adapters/dynamodb/scoped.py),
    so one IAM policy and one CloudTrail name cover both. Called by `SigV4Clients` when it (re)makes a
    tenant's client, i.e. about once per tenant per 12 minutes."""

    def __init__(self, role_arn: str, *, region: str, sts_client: Any = None,
                 duration_seconds: int = TOKEN_SECONDS):
        if sts_client is None:
            import boto3

            sts_client = boto3.client("sts", region_name=region)
        self.role_arn, self.sts, self.duration_seconds = role_arn, sts_client, duration_seconds

    def credentials_for(self, store: str, app_id: str, tenant_id: str) -> Any:
        from botocore.credentials import Credentials
        from botocore.exceptions import BotoCoreError, ClientError

        from ..dynamodb.scoped import TAG_APP, TAG_STORE, TAG_TENANT, session_name, translate_sts_error

        try:
            resp = self.sts.assume_role(
                RoleArn=self.role_arn, RoleSessionName=session_name(store, app_id, tenant_id),
                Tags=[{"Key": TAG_STORE, "Value": store}, {"Key": TAG_APP, "Value": app_id},
                      {"Key": TAG_TENANT, "Value": tenant_id}],
                DurationSeconds=self.duration_seconds)
        except (ClientError, BotoCoreError) as err:
            raise translate_sts_error(err, self.role_arn) from err
        c = resp["Credentials"]
        return Credentials(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])
