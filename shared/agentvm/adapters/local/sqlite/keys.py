"""The ``KeyStore`` port on SQLite (the local host): one row per key, its record as JSON.

Only the HMAC of a token is ever stored (see ``agentvm.security.apikeys``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.store import connect, transaction
from agentvm.records import ApiKeyRecord

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id     TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    record     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS api_keys_by_tenant ON api_keys (tenant_id, created_at, key_id);
"""


class SqliteKeyStore:
    """``agentvm.ports.KeyStore`` on one SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    async def put_key(self, key: ApiKeyRecord) -> None:
        self._conn.execute(
            "INSERT INTO api_keys (key_id, tenant_id, created_at, record) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (key_id) DO UPDATE SET tenant_id = excluded.tenant_id,"
            " created_at = excluded.created_at, record = excluded.record",
            (key.keyId, key.tenantId, key.createdAt, key.model_dump_json()),
        )

    async def get_key(self, key_id: str) -> ApiKeyRecord | None:
        row = self._conn.execute("SELECT record FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
        return None if row is None else ApiKeyRecord.model_validate_json(row[0])

    async def list_keys(self, tenant_id: str) -> list[ApiKeyRecord]:
        rows = self._conn.execute(
            "SELECT record FROM api_keys WHERE tenant_id = ? ORDER BY created_at, key_id", (tenant_id,)
        ).fetchall()
        return [ApiKeyRecord.model_validate_json(r[0]) for r in rows]

    async def revoke_key(
        self, key_id: str, *, revoked_at: int, tenant_id: str | None = None
    ) -> ApiKeyRecord | None:
        with transaction(self._conn):
            row = self._conn.execute("SELECT record FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
            if row is None:
                return None
            key = ApiKeyRecord.model_validate_json(row[0])
            if tenant_id is not None and key.tenantId != tenant_id:
                return None
            if key.revokedAt is None:
                key = key.model_copy(update={"revokedAt": revoked_at})
                self._conn.execute(
                    "UPDATE api_keys SET record = ? WHERE key_id = ?", (key.model_dump_json(), key_id)
                )
        return key


__all__ = ["SqliteKeyStore"]
