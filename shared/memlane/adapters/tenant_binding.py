"""What an index bound to one tenant (`Index.for_tenant`) checks before any call.

The binding comes from the authorized request (after the grant check, or a job's own record);
a call naming another store or tenant is a bug upstream, and it is refused before anything is
read or written, whatever the engine underneath would also refuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.errors import Forbidden
from ..domain.models import validate_store_name
from ..domain.scope import validate_id


@dataclass(frozen=True)
class TenantBinding:
    store: str
    app_id: str
    tenant_id: str

    @classmethod
    def of(cls, store: str, app_id: str, tenant_id: str) -> TenantBinding:
        return cls(validate_store_name(store), validate_id("app_id", app_id), validate_id("tenant_id", tenant_id))

    def check(self, store: str, app_id: str | None = None, tenant_id: str | None = None) -> None:
        """Refuse a call whose store (and, when given, app and tenant) is not the bound one."""
        if store != self.store or (app_id is not None and (app_id, tenant_id) != (self.app_id, self.tenant_id)):
            raise Forbidden(f"this index is bound to tenant {self.app_id}/{self.tenant_id} of store "
                            f"'{self.store}'; the call names {app_id}/{tenant_id} of store '{store}'",
                            code="tenant_mismatch")

    def check_lifecycle(self, store: str) -> None:
        raise Forbidden(f"creating or dropping store '{store}' is the service's, not a tenant's",
                        code="tenant_mismatch")
