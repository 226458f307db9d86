-- The ReplyCache (adapters/postgres/replies.py): two-way set-associative, one row per
-- (tenant, slot), slot = set * 2 + way, so a tenant holds its slots' count of rows at most.
CREATE TABLE reply_cache (
    tenant_id     TEXT NOT NULL,
    slot          INTEGER NOT NULL,
    cache_key     TEXT NOT NULL,
    text          TEXT NOT NULL,
    model         TEXT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, slot)
);
