"""Actor profiles: what a caller states of a tenant (PUT /profiles/{tenant_id}) or of one agent of a
tenant (PUT /agents/{agent_id}/profile: its role and standing instructions), merged with what the dream
distils (policies/actor_profile.py: explicit wins, both shown with their origin). A DELETE of the same path
withdraws what was stated; the distilled part stays.

An agent's profile is kept per app, tenant and agent, in the tenant's partition: an agent serving many
tenants has one per tenant, so no tenant's instructions or data reach another, and erasing a tenant
erases them. The context card reads `tenant_profile` and `agent_profile`.
"""

from __future__ import annotations

import re
from typing import Any

from ..domain import limits
from ..domain.errors import ConditionFailed, Conflict, InvalidInput, NotFound, PayloadTooLarge
from ..domain.models import ActorProfile, ExplicitProfile
from ..domain.scope import DEFAULT, WILDCARD, Scope, validate_id
from ..policies import actor_profile
from .deps import Deps

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+(?: [A-Za-z0-9_.\-]+)*$")  # words, single spaces between
_RACE_RETRIES = 5


def tenant_profile(deps: Deps, store: str, app_id: str, tenant_id: str, *,
                   distilled: bool = True) -> ActorProfile | None:
    """The tenant's profile (explicit merged with distilled), None when neither exists. Without `distilled`, the
    explicit profile alone: what a dream distils is long-term memory, which a thread that may not recall is not
    shown (services/context.py)."""
    return _merged(deps, store, app_id, tenant_id, None, distilled=distilled)


def agent_profile(deps: Deps, store: str, app_id: str, tenant_id: str, agent_id: str, *,
                  distilled: bool = True) -> ActorProfile | None:
    """One agent's profile within the tenant (its role and instructions, and the dream's agent profile)."""
    return _merged(deps, store, app_id, tenant_id, agent_id, distilled=distilled)


def get(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, agent_id: Any = None) -> ActorProfile:
    deps.repo.get_store(store)
    app, tenant = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    agent = None if agent_id in (None, "", WILDCARD) else validate_id("agent_id", agent_id)
    found = _merged(deps, store, app, tenant, agent)
    if found is None:
        who = f"agent '{agent}' of tenant '{tenant}'" if agent else f"tenant '{tenant}'"
        raise NotFound(f"no profile of {who} yet (PUT one, or a dream emits it)", code="profile_not_found")
    return found


def put(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, agent_id: Any = None, text: str | None = None,
        attributes: dict[str, Any] | None = None) -> ActorProfile:
    """Replace the explicit profile of the tenant (or of one of its agents); answer the merged profile."""
    deps.repo.get_store(store)
    app, tenant = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    agent = validate_id("agent_id", agent_id) if agent_id is not None else None
    text, attributes = _checked(text, attributes)
    # A tenant known only by its profile is still one the store's purge finds.
    deps.repo.know_scope(store, Scope(app_id=app, tenant_id=tenant, agent_id=agent or DEFAULT), deps.clock.now())
    for _ in range(_RACE_RETRIES):
        previous = deps.repo.get_explicit_profile(store, app, tenant, agent)
        profile = ExplicitProfile(store=store, app_id=app, tenant_id=tenant, agent_id=agent, text=text,
                                  attributes=attributes, updated_at=deps.clock.now(),
                                  version=previous.version + 1 if previous else 1)
        try:
            deps.repo.put_explicit_profile(profile, previous=previous)
            break
        except ConditionFailed:
            continue  # another PUT came first: this one replaces it (last writer wins, nothing half-merged)
    else:
        raise Conflict("the profile is too busy; retry the PUT", code="busy")
    if previous is not None and (previous.text, previous.attributes) != (text, attributes):
        deps.compact()  # the replaced words leave the local files' logs, as a deletion's (a trial)
    # What this PUT wrote, not a read after it: a DELETE may have come since (it answered 500: a trial).
    merged = actor_profile.merge(app, tenant, agent, profile, deps.repo.get_profile(store, app, tenant, agent))
    assert merged is not None  # an explicit profile always merges to one
    return merged


def delete(deps: Deps, store: str, *, app_id: Any, tenant_id: Any, agent_id: Any = None) -> None:
    """Delete what was stated of the tenant (or of one of its agents): the way to withdraw it short of erasing the
    tenant. What a dream distilled stays (it follows the memories, which a memory's delete withdraws)."""
    deps.repo.get_store(store)
    app, tenant = validate_id("app_id", app_id), validate_id("tenant_id", tenant_id)
    agent = validate_id("agent_id", agent_id) if agent_id is not None else None
    for _ in range(_RACE_RETRIES):
        stated = deps.repo.get_explicit_profile(store, app, tenant, agent)
        if stated is None:
            who = f"agent '{agent}' of tenant '{tenant}'" if agent else f"tenant '{tenant}'"
            raise NotFound(f"nothing is stated of {who} (no profile to delete)", code="profile_not_found")
        try:
            deps.repo.delete_explicit_profile(stated)
            break
        except ConditionFailed:
            continue  # another write came first: read it again (a PUT: delete what it stated)
    else:
        raise Conflict("the profile is too busy; retry the DELETE", code="busy")
    deps.compact()  # its text leaves the local files (SQLite keeps deleted bytes in its logs until compacted)


def _merged(deps: Deps, store: str, app_id: str, tenant_id: str, agent_id: str | None, *,
            distilled: bool = True) -> ActorProfile | None:
    return actor_profile.merge(app_id, tenant_id, agent_id,
                               deps.repo.get_explicit_profile(store, app_id, tenant_id, agent_id),
                               deps.repo.get_profile(store, app_id, tenant_id, agent_id) if distilled else None)


def _checked(text: Any, attributes: Any) -> tuple[str, dict[str, str]]:
    text = "" if text is None else text
    attributes = {} if attributes is None else attributes
    if not isinstance(text, str):
        raise InvalidInput("text must be a string", field="text")
    if len(text) > limits.MAX_PROFILE_TEXT_CHARS:
        raise PayloadTooLarge(f"text exceeds {limits.MAX_PROFILE_TEXT_CHARS} characters", field="text")
    if not isinstance(attributes, dict):
        raise InvalidInput("attributes must be an object of names to texts", field="attributes")
    if len(attributes) > limits.MAX_PROFILE_ATTRIBUTES:
        raise PayloadTooLarge(f"at most {limits.MAX_PROFILE_ATTRIBUTES} attributes", field="attributes")
    for name, value in attributes.items():
        if not isinstance(name, str) or len(name) > 64 or not _NAME.fullmatch(name):
            raise InvalidInput("attribute names are 1-64 characters: words of letters, digits, _ . - "
                               "with single spaces between", field="attributes")
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"attributes.{name} must be a non-empty string", field=f"attributes.{name}")
        if value.splitlines() != [value]:  # a profile shows one line an attribute: a break would forge another
            raise InvalidInput(f"attributes.{name} must be one line (no line break)", field=f"attributes.{name}")
        if len(value) > limits.MAX_PROFILE_VALUE_CHARS:
            raise PayloadTooLarge(f"attributes.{name} exceeds {limits.MAX_PROFILE_VALUE_CHARS} characters",
                                  field=f"attributes.{name}")
    named: dict[str, str] = {}
    for name in attributes:
        if (first := named.setdefault(actor_profile.name_key(name), name)) != name:
            raise InvalidInput(f"attributes '{first}' and '{name}' are one name (case and _ - . or a space between "
                               "words do not tell names apart); give it once", code="duplicate_attribute",
                               field=f"attributes.{name}")
    if not text.strip() and not attributes:
        raise InvalidInput("a profile needs a text or attributes", field="text")
    return text.strip(), dict(attributes)
