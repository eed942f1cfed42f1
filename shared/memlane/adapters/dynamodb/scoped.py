"""Tables confined to one tenant by IAM: STS credentials tagged with (store, app, tenant).

On AWS the functions do not touch a tenant's items with their own role. For each request they
assume the scoped data role with session tags ``store``, ``app`` and ``tenant``; the role's
policy (infra/iam/tenant-data-policy.json) allows DynamoDB item operations only when every
partition key of the request equals ``<store>#<app>#<tenant>`` from those tags. A table handed
out by ``ScopedTables.for_tenant`` therefore cannot read or write another tenant's items, nor
the global partitions, whatever key a bug builds: DynamoDB refuses the call.

The tenant must come from the authorized request (the caller's scope after the grant check, or
a task's own scope), never from a key being looked up: credentials chosen from the key would
follow the bug.

Credentials are cached per tenant until shortly before they expire (a bounded LRU), so a warm
function calls STS once per tenant per ~15 minutes, not once per request.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from ...domain.errors import DependencyFailed, MemlaneError, Retryable
from ...domain.models import validate_store_name
from ...domain.scope import validate_id
from ...ports import Clock
from ..clock import SystemClock
from .table import DynamoDBTable

# The session tag keys; infra/iam/tenant-data-policy.json and tenant-data-trust.json name them.
TAG_STORE, TAG_APP, TAG_TENANT = "store", "app", "tenant"

DEFAULT_MAX_TENANTS = 256
DEFAULT_DURATION_SECONDS = 900  # AssumeRole's minimum
MAX_DURATION_SECONDS = 43_200
# Refresh this long before expiry, so a table handed out stays valid through the request or job using it: a
# job binds its tenant's table once and may run for the longest function timeout (Extract: 300 s) and more.
DEFAULT_REFRESH_BEFORE = timedelta(minutes=6)

_SESSION_NAME_CHARS = re.compile(r"[^\w+=,.@-]", re.ASCII)  # AssumeRole: [\w+=,.@-]{2,64}
_SESSION_NAME_MAX = 64

_RETRYABLE_STS_CODES = {
    "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
    "ServiceUnavailable", "ServiceUnavailableException", "InternalFailure", "InternalError",
    "IDPCommunicationError",
}


@dataclass(frozen=True)
class _Entry:
    table: DynamoDBTable
    access_key_id: str
    expires_at: datetime


class ScopedTables:
    """Hands out a `DynamoDBTable` per tenant, signed with that tenant's tagged STS credentials.

    - `role_arn`: the scoped data role (its trust policy must let this function's role call
      ``sts:AssumeRole`` and ``sts:TagSession``).
    - `sts_client`: a boto3 STS client; built for `region` when not given.
    - `session_factory`: returns the boto3 ``Session`` the DynamoDB clients are made from (called
      once); ``boto3.Session`` when not given. Its event hooks apply to every client it makes.
    - `clock`: the ``Clock`` port; the system clock when not given.
    Thread-safe: concurrent calls for one tenant assume the role once.
    """

    def __init__(
        self,
        role_arn: str,
        table_name: str,
        *,
        sts_client: Any = None,
        session_factory: Callable[[], Any] | None = None,
        region: str = "us-east-1",
        duration_seconds: int = DEFAULT_DURATION_SECONDS,
        endpoint_url: str | None = None,
        clock: Clock | None = None,
        max_tenants: int = DEFAULT_MAX_TENANTS,
        refresh_before: timedelta = DEFAULT_REFRESH_BEFORE,
    ):
        if not DEFAULT_DURATION_SECONDS <= duration_seconds <= MAX_DURATION_SECONDS:
            raise ValueError(f"duration_seconds must be {DEFAULT_DURATION_SECONDS}-{MAX_DURATION_SECONDS}")
        if refresh_before >= timedelta(seconds=duration_seconds):
            raise ValueError("refresh_before must be shorter than the credentials' lifetime")
        if max_tenants < 1:
            raise ValueError("max_tenants must be at least 1")
        self.role_arn = role_arn
        self.table_name = table_name
        self.region = region
        self.duration_seconds = duration_seconds
        self.endpoint_url = endpoint_url
        self.max_tenants = max_tenants
        self.refresh_before = refresh_before
        self._clock: Clock = clock or SystemClock()
        if sts_client is None:
            import boto3

            sts_client = boto3.client("sts", region_name=region)
        self.sts = sts_client
        self._session_factory = session_factory
        self._session: Any = None
        self._cache: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()  # guards _cache, _inflight and _session
        self._inflight: dict[tuple[str, str, str], threading.Lock] = {}
        self._client_lock = threading.Lock()  # boto3 sessions are not thread-safe

    def for_tenant(self, store: str, app_id: str, tenant_id: str) -> DynamoDBTable:
        """The table as the tenant's scoped role sees it: its own partition, nothing else.

        Use it for the request at hand and ask again for the next one: it is valid for at least
        `refresh_before` after it is handed out, not indefinitely.
        """
        key = (validate_store_name(store), validate_id("app_id", app_id), validate_id("tenant_id", tenant_id))
        entry = self._fresh(key)
        if entry is not None:
            return entry.table
        with self._lock:
            tenant_lock = self._inflight.setdefault(key, threading.Lock())
        with tenant_lock:  # one AssumeRole per tenant at a time; other tenants are not held up
            try:
                entry = self._fresh(key)  # another thread may have just fetched it
                if entry is None:
                    entry = self._assume(key)
                    with self._lock:
                        self._cache[key] = entry
                        self._cache.move_to_end(key)
                        while len(self._cache) > self.max_tenants:
                            self._cache.popitem(last=False)
                return entry.table
            finally:
                with self._lock:
                    self._inflight.pop(key, None)

    def clear(self) -> None:
        """Forget every cached credential (the next call per tenant assumes the role again)."""
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    # -- internals --------------------------------------------------------------------------
    def _fresh(self, key: tuple[str, str, str]) -> _Entry | None:
        now = self._clock.now()
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                return None
            if now >= entry.expires_at - self.refresh_before:
                del self._cache[key]
                return None
            self._cache.move_to_end(key)
            return entry

    def _assume(self, key: tuple[str, str, str]) -> _Entry:
        store, app_id, tenant_id = key
        try:
            resp = self.sts.assume_role(
                RoleArn=self.role_arn,
                RoleSessionName=session_name(store, app_id, tenant_id),
                Tags=[{"Key": TAG_STORE, "Value": store}, {"Key": TAG_APP, "Value": app_id},
                      {"Key": TAG_TENANT, "Value": tenant_id}],
                DurationSeconds=self.duration_seconds,
            )
        except (ClientError, BotoCoreError) as err:
            raise translate_sts_error(err, self.role_arn) from err
        creds = resp["Credentials"]
        with self._client_lock:
            if self._session is None:
                self._session = (self._session_factory or _default_session)()
            client = self._session.client(
                "dynamodb", region_name=self.region, endpoint_url=self.endpoint_url,
                aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                aws_session_token=creds["SessionToken"],
            )
        return _Entry(DynamoDBTable(self.table_name, client=client), creds["AccessKeyId"], creds["Expiration"])


def session_name(store: str, app_id: str, tenant_id: str) -> str:
    """A valid RoleSessionName (2-64 of ``[\\w+=,.@-]``) that CloudTrail shows per tenant.

    Readable where it fits; always ending in a hash of the exact scope, so two tenants whose
    names shorten or clean up alike still get different names.
    """
    digest = hashlib.sha256(f"{store}#{app_id}#{tenant_id}".encode()).hexdigest()[:12]
    readable = _SESSION_NAME_CHARS.sub("_", f"{store}.{app_id}.{tenant_id}")
    return f"{readable[:_SESSION_NAME_MAX - len(digest) - 1]}-{digest}"


def translate_sts_error(err: Exception, role_arn: str) -> MemlaneError:
    """Map an STS error to the domain hierarchy, by error code."""
    if isinstance(err, (BotoConnectionError, HTTPClientError)):
        return Retryable(f"STS unreachable: {err}", code="credentials_unavailable")
    if not isinstance(err, ClientError):
        return DependencyFailed(f"STS call failed: {err}", code="credentials_failed")
    error = err.response.get("Error", {})
    code, message = error.get("Code", ""), error.get("Message", str(err))
    if code in _RETRYABLE_STS_CODES:
        return Retryable(f"STS is busy: {code}: {message}", code="credentials_unavailable", aws_code=code)
    if code in ("AccessDenied", "AccessDeniedException"):
        return DependencyFailed(
            f"not allowed to assume the tenant data role {role_arn} with session tags: its trust policy must "
            f"let this function's role call sts:AssumeRole and sts:TagSession, and this role's policy must "
            f"allow both on it (infra/iam/README.md). STS said: {message}",
            code="credentials_failed", aws_code=code)
    if code == "RegionDisabledException":
        return DependencyFailed(f"STS is not activated in this Region: {message}", code="credentials_failed",
                                aws_code=code)
    return DependencyFailed(f"STS error {code}: {message}", code="credentials_failed", aws_code=code)


def _default_session() -> Any:
    import boto3

    return boto3.Session()
