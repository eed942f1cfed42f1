"""Scope: app_id / tenant_id / agent_id / run_id, coarse to fine. The rules here are contract.

- Write: app_id required; missing tenant/agent/run become ``__default__``; ``*`` refused.
- Long-term search: app_id and tenant_id required; agent_id / run_id each an exact value,
  ``*`` or a list of values.
- Short-term (message) reads: all four required, no wildcards.
- Ids are 1–128 chars of ``[A-Za-z0-9_.:@+-]`` — the key delimiter ``#`` can never appear.
"""

import re
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict

from .errors import InvalidInput, InvalidScope

DEFAULT = "__default__"
WILDCARD = "*"
KEY_DELIMITER = "#"
MAX_ID_LENGTH = 128
MAX_ID_LIST = 50
FIELDS = ("app_id", "tenant_id", "agent_id", "run_id")

# Not dots alone: "." and ".." cannot be a URL's path segment (clients resolve them before sending).
_ID = re.compile(r"^(?!\.+$)[A-Za-z0-9_.:@+\-]{1,128}$")


def is_id(value: str) -> bool:
    return value != WILDCARD and _ID.fullmatch(value) is not None


def validate_id(field: str, value: Any, *, error: type[InvalidInput] = InvalidScope) -> str:
    """Return `value` if it is a well-formed scope id, else raise `error` (InvalidScope) naming the field."""
    if value is None:  # a query parameter left out (a trial: "tenant_id must be a string")
        raise error(f"{field} is required", field=field)
    if not isinstance(value, str):
        raise error(f"{field} must be a string", field=field)
    if value == WILDCARD:
        raise error(f"{field} may not be the wildcard '*' here", field=field)
    if not _ID.fullmatch(value):
        raise error(f"{field} must be 1-{MAX_ID_LENGTH} characters of letters, digits and _ . : @ + -", field=field)
    return value


def validate_record_id(field: str, value: Any) -> str:
    """`validate_id` for the id of a record (a memory, a dream task or action): not a scope, so 400 `invalid_input`
    (a trial: a malformed memory or action id was answered `invalid_scope`)."""
    return validate_id(field, value, error=InvalidInput)


class Scope(BaseModel):
    """A concrete scope: every field set, no wildcards. Used for writes and message reads."""

    model_config = ConfigDict(frozen=True)

    app_id: str
    tenant_id: str = DEFAULT
    agent_id: str = DEFAULT
    run_id: str = DEFAULT

    @property
    def tenant_key(self) -> str:
        """The partition every item of this tenant lives under (with the store in front)."""
        return f"{self.app_id}{KEY_DELIMITER}{self.tenant_id}"

    def as_dict(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in FIELDS}


def _get(raw: Mapping[str, Any] | None, field: str) -> Any:
    if raw is None:
        return None
    value = raw.get(field)
    return None if value == "" else value


def write_scope(raw: Mapping[str, Any] | None) -> Scope:
    """Scope of a write: app_id required, the rest default to ``__default__``, no wildcards."""
    app = _get(raw, "app_id")
    if app is None:
        raise InvalidScope("scope.app_id is required", field="scope.app_id")
    values = {"app_id": validate_id("scope.app_id", app)}
    for f in FIELDS[1:]:
        v = _get(raw, f)
        values[f] = DEFAULT if v is None else validate_id(f"scope.{f}", v)
    return Scope(**values)


def exact_scope(raw: Mapping[str, Any] | None) -> Scope:
    """Scope of one thread's messages (a read, a delete): all four required, no wildcards."""
    values = {}
    for f in FIELDS:
        v = _get(raw, f)
        if v is None:
            raise InvalidScope(f"{f} is required: messages are one thread's (app_id, tenant_id, agent_id, run_id)",
                               field=f)
        values[f] = validate_id(f, v)
    return Scope(**values)


class ScopeFilter(BaseModel):
    """Scope of a long-term search or listing. `None` for agent/run means any (``*``)."""

    model_config = ConfigDict(frozen=True)

    app_id: str
    tenant_id: str
    agent_ids: tuple[str, ...] | None = None
    run_ids: tuple[str, ...] | None = None

    def matches(self, scope: Mapping[str, str]) -> bool:
        return (
            scope.get("app_id") == self.app_id
            and scope.get("tenant_id") == self.tenant_id
            and (self.agent_ids is None or scope.get("agent_id") in self.agent_ids)
            and (self.run_ids is None or scope.get("run_id") in self.run_ids)
        )


def _selector(field: str, value: Any) -> tuple[str, ...] | None:
    if value is None or value == WILDCARD:
        return None
    if isinstance(value, str):
        return (validate_id(field, value),)
    if isinstance(value, (list, tuple)):
        if not value:
            raise InvalidScope(f"{field} list may not be empty", field=field)
        if len(value) > MAX_ID_LIST:
            raise InvalidScope(f"{field} list may hold at most {MAX_ID_LIST} values", field=field)
        return tuple(dict.fromkeys(validate_id(field, v) for v in value))
    raise InvalidScope(f"{field} must be a string, '*' or a list of strings", field=field)


def search_scope(raw: Mapping[str, Any] | None) -> ScopeFilter:
    """Scope of a long-term search: app_id and tenant_id required; agent/run exact, ``*`` or list."""
    out: dict[str, Any] = {}
    for f in ("app_id", "tenant_id"):
        v = _get(raw, f)
        if v is None:
            raise InvalidScope(f"scope.{f} is required for search", field=f"scope.{f}")
        out[f] = validate_id(f"scope.{f}", v)
    out["agent_ids"] = _selector("scope.agent_id", _get(raw, "agent_id"))
    out["run_ids"] = _selector("scope.run_id", _get(raw, "run_id"))
    return ScopeFilter(**out)
