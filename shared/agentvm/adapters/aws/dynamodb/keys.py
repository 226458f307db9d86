"""The ``KeyStore`` port on DynamoDB (PynamoDB), on AgentVM's single table.

======================  ======================  ====================================================
item                    pk / sk                 gsi1pk / gsi1sk
======================  ======================  ====================================================
API key                 ``APIKEY#<keyId>`` /    ``TENANT#<tenant>`` / ``APIKEY#<createdAt:013d>#<keyId>``
                        ``META``
======================  ======================  ====================================================

Verifying a token is one GetItem by ``keyId`` (eventually consistent: 0.5 read units); listing a
tenant's keys is one Query on ``gsi1``. Only the HMAC of a token is stored. The table's schema is
fixed (``pk``/``sk``, ``gsi1`` on ``gsi1pk``/``gsi1sk``, TTL on ``expiresAt``); keys never expire.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pynamodb.attributes import ListAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import UpdateError

from agentvm.adapters.aws.dynamodb.models import META, TableItem, bind_model, tenant_pk
from agentvm.records import ApiKeyRecord

if TYPE_CHECKING:
    from agentvm.records import Scope


def key_pk(key_id: str) -> str:
    return f"APIKEY#{key_id}"


def key_gsi1sk(created_at: int, key_id: str) -> str:
    return f"APIKEY#{created_at:013d}#{key_id}"


class ApiKeyItem(TableItem):
    """An API key: ``ApiKeyRecord``'s fields as attributes (only the token's HMAC, never the token)."""

    keyId = UnicodeAttribute()
    tenantId = UnicodeAttribute()
    # PynamoDB types the elements as the attribute class `of` names, not as the values it reads
    scopes: ListAttribute[Scope] = ListAttribute(of=UnicodeAttribute)  # type: ignore[arg-type]
    name = UnicodeAttribute(null=True)
    secretHash = UnicodeAttribute()
    secretId = UnicodeAttribute()
    createdAt = NumberAttribute()
    revokedAt = NumberAttribute(null=True)
    rateLimitPerMinute = NumberAttribute(null=True)


class DynamoDbKeyStore:
    """``agentvm.ports.KeyStore`` on the single DynamoDB table. Blocking calls run in a thread."""

    def __init__(self, table_name: str, *, region: str | None = None, host: str | None = None) -> None:
        self._item = bind_model(ApiKeyItem, table_name, region, host)

    async def put_key(self, key: ApiKeyRecord) -> None:
        await asyncio.to_thread(self._to_item(key).save)

    async def get_key(self, key_id: str) -> ApiKeyRecord | None:
        return await asyncio.to_thread(self._get, key_id)

    async def list_keys(self, tenant_id: str) -> list[ApiKeyRecord]:
        def query() -> list[ApiKeyRecord]:
            items = self._item.gsi1.query(tenant_pk(tenant_id), self._item.gsi1sk.startswith("APIKEY#"))
            return [r for r in map(self._to_record, items) if r.tenantId == tenant_id]

        return await asyncio.to_thread(query)

    async def revoke_key(
        self, key_id: str, *, revoked_at: int, tenant_id: str | None = None
    ) -> ApiKeyRecord | None:
        return await asyncio.to_thread(self._revoke, key_id, revoked_at, tenant_id)

    # blocking parts

    def _get(self, key_id: str) -> ApiKeyRecord | None:
        try:
            return self._to_record(self._item.get(key_pk(key_id), META))
        except self._item.DoesNotExist:
            return None

    def _revoke(self, key_id: str, revoked_at: int, tenant_id: str | None) -> ApiKeyRecord | None:
        key = self._get(key_id)
        if key is None or (tenant_id is not None and key.tenantId != tenant_id):
            return None
        if key.revokedAt is not None:
            return key
        item = self._to_item(key)
        try:
            # Conditional: a concurrent revoke keeps the first revokedAt.
            item.update(
                actions=[self._item.revokedAt.set(revoked_at)],
                condition=self._item.pk.exists() & self._item.revokedAt.does_not_exist(),
            )
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            return self._get(key_id)
        return self._to_record(item)

    def _to_item(self, key: ApiKeyRecord) -> ApiKeyItem:
        return self._item(
            key_pk(key.keyId),
            META,
            gsi1pk=tenant_pk(key.tenantId),
            gsi1sk=key_gsi1sk(key.createdAt, key.keyId),
            keyId=key.keyId,
            tenantId=key.tenantId,
            scopes=list(key.scopes),
            name=key.name,
            secretHash=key.secretHash,
            secretId=key.secretId,
            createdAt=key.createdAt,
            revokedAt=key.revokedAt,
            rateLimitPerMinute=key.rateLimitPerMinute,
        )

    @staticmethod
    def _to_record(item: ApiKeyItem) -> ApiKeyRecord:
        return ApiKeyRecord(
            keyId=item.keyId,
            tenantId=item.tenantId,
            scopes=list(item.scopes),
            name=item.name,
            secretHash=item.secretHash,
            secretId=item.secretId,
            createdAt=int(item.createdAt),
            revokedAt=None if item.revokedAt is None else int(item.revokedAt),
            rateLimitPerMinute=None if item.rateLimitPerMinute is None else int(item.rateLimitPerMinute),
        )


__all__ = ["ApiKeyItem", "DynamoDbKeyStore"]
