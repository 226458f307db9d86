-- The KeyStore (adapters/postgres/keys.py): one row per API key, its record as JSON; only the HMAC
-- of a token is ever stored. Numbered from 0100: the cluster stores' migrations (issue 28) leave
-- 0001-0099 to the foundation's (the Store, usage, archive).
CREATE TABLE api_keys (
    key_id     TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    record     JSONB NOT NULL
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at, key_id);
