"""The ``KeyStore`` port on PostgreSQL (the cluster host): one row per key, its record as JSON.

Only the HMAC of a token is ever stored (see ``agentvm.security.apikeys``). A revocation is one
conditional ``UPDATE``: the first revocation time is kept whichever node revokes first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.records import ApiKeyRecord

if TYPE_CHECKING:
    from agentvm.adapters.postgres.database import Database

# the record's revokedAt set only when absent: the first revocation wins, on any node
_REVOKE = """
UPDATE api_keys SET record = jsonb_set(record, '{revokedAt}', to_jsonb(%(at)s::bigint))
WHERE key_id = %(key)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)
  AND COALESCE(record->'revokedAt', 'null'::jsonb) = 'null'::jsonb
RETURNING record::text
"""


class PostgresKeyStore:
    """``agentvm.ports.KeyStore`` on the node's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def put_key(self, key: ApiKeyRecord) -> None:
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO api_keys (key_id, tenant_id, created_at, record) VALUES (%s, %s, %s, %s::jsonb)"
                " ON CONFLICT (key_id) DO UPDATE SET tenant_id = excluded.tenant_id,"
                " created_at = excluded.created_at, record = excluded.record",
                (key.keyId, key.tenantId, key.createdAt, key.model_dump_json()),
            )

    async def get_key(self, key_id: str) -> ApiKeyRecord | None:
        async with self._db.connection() as conn:
            cur = await conn.execute("SELECT record::text FROM api_keys WHERE key_id = %s", (key_id,))
            row = await cur.fetchone()
        return None if row is None else ApiKeyRecord.model_validate_json(row[0])

    async def list_keys(self, tenant_id: str) -> list[ApiKeyRecord]:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT record::text FROM api_keys WHERE tenant_id = %s ORDER BY created_at, key_id",
                (tenant_id,),
            )
            rows = await cur.fetchall()
        return [ApiKeyRecord.model_validate_json(r[0]) for r in rows]

    async def revoke_key(
        self, key_id: str, *, revoked_at: int, tenant_id: str | None = None
    ) -> ApiKeyRecord | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(_REVOKE, {"at": revoked_at, "key": key_id, "tenant": tenant_id})
            row = await cur.fetchone()
            if row is None:  # unknown, another tenant's, or revoked already: read what is there
                cur = await conn.execute(
                    "SELECT record::text FROM api_keys"
                    " WHERE key_id = %(key)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)",
                    {"key": key_id, "tenant": tenant_id},
                )
                row = await cur.fetchone()
        return None if row is None else ApiKeyRecord.model_validate_json(row[0])


__all__ = ["PostgresKeyStore"]
