"""Grants, API keys and the audit log."""

from __future__ import annotations


from ..domain.models import AuditRecord, Grant
from ..ports import Table
from .keys import GRANTS_PK, API_KEYS_PK, TTL_ATTRIBUTE
from .keys import _dump


class AccessRecords:
    table: Table

    # -- grants, API keys, audit -------------------------------------------------------------
    def put_grant(self, grant: Grant) -> None:
        self.table.put({"pk": GRANTS_PK, "sk": grant.principal, **_dump(grant)})

    def get_grant(self, principal: str) -> Grant | None:
        item = self.table.get(GRANTS_PK, principal)
        return Grant.model_validate(item) if item else None

    def list_grants(self, limit: int, cursor: str | None) -> tuple[list[Grant], str | None]:
        page = self.table.query(GRANTS_PK, limit=limit, cursor=cursor)
        return [Grant.model_validate(i) for i in page.items], page.cursor

    def delete_grant(self, principal: str) -> None:
        self.table.delete(GRANTS_PK, principal)

    def put_api_key(self, key_hash: str, principal: str, created_at: str) -> None:
        self.table.put({"pk": API_KEYS_PK, "sk": key_hash, "principal": principal, "created_at": created_at},
                       if_absent=True)

    def api_keys(self) -> list[dict[str, str]]:
        """Every key's hash, principal and creation time (none for a key made before it was kept)."""
        keys, cursor = [], None
        while True:
            page = self.table.query(API_KEYS_PK, limit=500, cursor=cursor)
            keys += [{"key_hash": i["sk"], "principal": i["principal"], "created_at": i.get("created_at")}
                     for i in page.items]
            if not (cursor := page.cursor):
                return keys

    def delete_api_key(self, key_hash: str) -> None:
        self.table.delete(API_KEYS_PK, key_hash)

    def principal_for_key(self, key_hash: str) -> str | None:
        item = self.table.get(API_KEYS_PK, key_hash)
        return item["principal"] if item else None

    def has_api_keys(self) -> bool:
        return bool(self.table.query(API_KEYS_PK, limit=1).items)

    def put_audit(self, record: AuditRecord, expires_at: int) -> None:
        self.table.put({"pk": f"{record.store}#~audit", "sk": f"{record.at.isoformat()}#{record.request_id}",
                        TTL_ATTRIBUTE: expires_at, **_dump(record)})

    def list_audit(self, store: str, *, limit: int, cursor: str | None, now: int, since: str | None = None,
                   until: str | None = None) -> tuple[list[AuditRecord], str | None]:
        """Newest first, none past its expiry (`now`, epoch seconds: a row DynamoDB's TTL has not removed yet, or
        the local table's sweeper). `since`/`until` are ISO times bounding the sort key."""
        page = self.table.query(f"{store}#~audit", start=since or "0", end=(until or "9999") + "~", limit=limit,
                                cursor=cursor, forward=False)
        return [AuditRecord.model_validate(i) for i in page.items if i.get(TTL_ATTRIBUTE, now + 1) > now], page.cursor

    def expire_audit(self, store: str, *, now: int, limit: int = 500) -> int:
        """Delete the store's oldest audit rows past their expiry, up to the first that is not (a table without
        TTL of its own: the local one); how many."""
        page = self.table.query(f"{store}#~audit", limit=limit)
        expired = []
        for item in page.items:
            if item.get(TTL_ATTRIBUTE, now + 1) > now:
                break
            expired.append((item["pk"], item["sk"]))
        for pk, sk in expired:
            self.table.delete(pk, sk)
        return len(expired)
