"""Explicit profiles: what a caller states of a tenant or of one of its agents (the dream's distilled
profiles are PROFILE# items, repository/dream.py; these never derive from memories, so redaction leaves them)."""

from __future__ import annotations

from ..domain.models import ExplicitProfile
from ..ports import Table
from .keys import _dump, tenant_pk


class ProfileRecords:
    table: Table

    def explicit_profile_key(self, store: str, app_id: str, tenant_id: str, agent_id: str | None) -> tuple[str, str]:
        return tenant_pk(store, app_id, tenant_id), "ACTOR#~tenant" if agent_id is None else f"ACTOR#AGENT#{agent_id}"

    def get_explicit_profile(self, store: str, app_id: str, tenant_id: str,
                             agent_id: str | None = None) -> ExplicitProfile | None:
        item = self.table.get(*self.explicit_profile_key(store, app_id, tenant_id, agent_id))
        return ExplicitProfile.model_validate(item) if item else None

    def put_explicit_profile(self, profile: ExplicitProfile, *, previous: ExplicitProfile | None) -> None:
        """Replace the profile read as `previous` (ConditionFailed if another write came first)."""
        pk, sk = self.explicit_profile_key(profile.store, profile.app_id, profile.tenant_id, profile.agent_id)
        item = {"pk": pk, "sk": sk, **_dump(profile)}
        if previous is None:
            self.table.put(item, if_absent=True)
        else:
            self.table.put(item, expect={"version": previous.version})

    def delete_explicit_profile(self, profile: ExplicitProfile) -> None:
        """Delete the profile read as `profile` (ConditionFailed if another write came first)."""
        key = self.explicit_profile_key(profile.store, profile.app_id, profile.tenant_id, profile.agent_id)
        self.table.delete(*key, expect={"version": profile.version})
