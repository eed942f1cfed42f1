"""Who may touch what: grants per principal, API keys for local mode, and the check every route makes."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Callable, Literal, Protocol

from ..domain.errors import Forbidden, InvalidInput, NotFound, Unauthenticated
from ..domain.models import Grant
from ..domain.scope import validate_id
from ..ports import Clock
from ..repository import Repository
from .deps import Deps

AuthMode = Literal["none", "api_key", "iam"]
LOCAL_ADMIN = "local-admin"
KEY_PREFIX = "ml_"
KEY_ID_DIGITS = 12  # of a key's hash: how `keys list` names a key, and `keys revoke --id` finds it
Visible = Callable[[str, str], bool]  # may the caller see what belongs to (app_id, tenant_id)?
_ASSUMED_ROLE = re.compile(r"^arn:(aws[\w-]*):sts::(\d{12}):assumed-role/([^/]+)/.+$")
# An SQS sender is known by its unique principal id: an assumed-role session is "AROA<role id>:<session>".
_ROLE_SESSION_ID = re.compile(r"^(AROA[A-Z0-9]{8,}):.+$")


class Records(Protocol):
    """What writing grants and keys needs: the table's records and a clock (Deps, or an operator's table alone)."""

    @property
    def repo(self) -> Repository: ...

    @property
    def clock(self) -> Clock: ...


@dataclass(frozen=True)
class Caller:
    principal: str
    grant: Grant | None  # None with auth "none": the loopback-only local operator may do anything

    @property
    def is_admin(self) -> bool:
        return self.grant is None or self.grant.admin

    def may_use(self, app_id: str, tenant_id: str) -> bool:
        return self.grant is None or self.grant.allows(app_id, tenant_id)


def everyone(app_id: str, tenant_id: str) -> bool:
    """The visibility of internal callers (the worker, the scheduler): they act for every tenant."""
    return True


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def role_arn(principal: str) -> str | None:
    """arn:aws:sts::1:assumed-role/R/session → arn:aws:iam::1:role/R, so a grant can name the role."""
    m = _ASSUMED_ROLE.match(principal)
    return f"arn:{m.group(1)}:iam::{m.group(2)}:role/{m.group(3)}" if m else None


def role_id(principal: str) -> str | None:
    """AROAEXAMPLEID:session → AROAEXAMPLEID (the role's RoleId), so a grant can name the role by its id."""
    m = _ROLE_SESSION_ID.match(principal)
    return m.group(1) if m else None


def identify(deps: Deps, mode: AuthMode, *, api_key: str | None = None, iam_principal: str | None = None) -> Caller:
    if mode == "none":
        return Caller(LOCAL_ADMIN, None)
    if mode == "api_key":
        if not api_key:
            raise Unauthenticated("an API key is required: Authorization: Bearer <key>", code="missing_api_key")
        principal = deps.repo.principal_for_key(_hash(api_key))
        if principal is None:
            raise Unauthenticated("unknown API key", code="invalid_api_key")
    else:
        if not iam_principal:
            raise Unauthenticated("no IAM identity on the request", code="missing_identity")
        principal = iam_principal
    grant = deps.repo.get_grant(principal)
    if grant is None and (role := role_arn(principal) or role_id(principal)):
        grant = deps.repo.get_grant(role)
    if grant is None:
        # The principal is authenticated, only not granted: the audit log records who it was.
        raise Forbidden(f"principal '{principal}' has no grant", code="no_grant", principal=principal)
    return Caller(principal, grant)


def require(caller: Caller, app_id: str | None, tenant_id: str | None) -> None:
    """403 unless the caller's grant covers the app and tenant (both validated ids)."""
    if caller.grant is None:
        return
    if app_id is None or tenant_id is None:
        if caller.grant.admin:
            return
        raise Forbidden("this operation needs an app_id and tenant_id within your grant", code="scope_required")
    if not caller.may_use(app_id, tenant_id):
        raise Forbidden(f"principal '{caller.principal}' may not access app '{app_id}' tenant '{tenant_id}'",
                        code="outside_grant")


def require_admin(caller: Caller) -> None:
    if not caller.is_admin:
        raise Forbidden("this operation needs an admin grant", code="admin_required")


def grant(deps: Records, principal: str, apps: dict[str, list[str]], *, admin: bool = False) -> Grant:
    if not principal or len(principal) > 512:
        raise InvalidInput("principal must be 1-512 characters", field="principal")
    if role := role_arn(principal) or role_id(principal):
        # Whoever may assume the role names its sessions: a grant to one would be theirs to take (a review).
        raise InvalidInput(f"'{principal}' is a session of a role, named by whoever assumes it: grant the role "
                           f"('{role}'), a role per tenant", field="principal")
    for app_id, tenants in apps.items():
        if app_id != "*":
            validate_id("app_id", app_id)
        for tenant in tenants:
            if tenant != "*":
                validate_id("tenant_id", tenant)
    if admin and any(app_id != "*" or "*" not in tenants for app_id, tenants in apps.items()):
        # An admin reaches every app and tenant (Grant.allows): a grant that lists fewer would only mislead.
        raise InvalidInput("an admin grant reaches every app and tenant: give it no apps (or every app: "
                           "{\"*\": [\"*\"]}), or grant those tenants without admin", field="apps")
    g = Grant(principal=principal, apps=apps, admin=admin, created_at=deps.clock.now())
    deps.repo.put_grant(g)
    return g


def create_api_key(deps: Records, principal: str, apps: dict[str, list[str]], *, admin: bool = False) -> str:
    """A new key for `principal` with that grant. The key is shown once; only its hash is kept."""
    grant(deps, principal, apps, admin=admin)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    deps.repo.put_api_key(_hash(key), principal, deps.clock.now().isoformat())
    return key


def api_keys(deps: Records) -> list[dict[str, str]]:
    """Every key: its id (the first 12 hex digits of its hash — the key itself is never kept), principal, created."""
    return [{"key_id": k["key_hash"][:KEY_ID_DIGITS], "principal": k["principal"], "created_at": k["created_at"]}
            for k in deps.repo.api_keys()]


def revoke_api_keys(deps: Records, *, key: str | None = None, key_id: str | None = None,
                    principal: str | None = None) -> list[str]:
    """Withdraw keys — the one given, the one of that id, or every key of a principal — at once: each request
    looks its key up (a server running on the same table refuses it with 401 from then on). Their ids."""
    if [key, key_id, principal].count(None) != 2:
        raise InvalidInput("name exactly one of the key, its id or its principal", field="key")
    found = [k for k in deps.repo.api_keys()
             if (key is not None and k["key_hash"] == _hash(key))
             or (key_id is not None and len(key_id) >= KEY_ID_DIGITS and k["key_hash"].startswith(key_id.lower()))
             or (principal is not None and k["principal"] == principal)]
    if not found:
        raise NotFound("no such API key", code="api_key_not_found")
    for k in found:
        deps.repo.delete_api_key(k["key_hash"])
    return [k["key_hash"][:KEY_ID_DIGITS] for k in found]
