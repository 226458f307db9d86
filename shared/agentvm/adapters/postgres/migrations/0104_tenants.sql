-- The TenantStore (adapters/postgres/tenants.py): one row per tenant id, tombstones included. Ids
-- compare bytewise (COLLATE "C", as SQLite does): listing pages go by id, whatever the server locale.
CREATE TABLE tenants (
    tenant_id  TEXT COLLATE "C" PRIMARY KEY,
    created_at BIGINT NOT NULL,
    record     JSONB NOT NULL
);
