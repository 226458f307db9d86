-- McpOAuthRecords (adapters/postgres/mcp_oauth.py): tenants' sealed OAuth records of remote MCP
-- servers (tokens, registered clients, pending browser authorizations), one row per key; a row
-- whose expires_at (epoch seconds) has passed is invisible and deleted by a later write.
CREATE TABLE mcp_oauth_records (
    key        TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    value      TEXT NOT NULL,
    expires_at DOUBLE PRECISION
);
CREATE INDEX mcp_oauth_records_by_tenant ON mcp_oauth_records (tenant_id);
CREATE INDEX mcp_oauth_records_by_expiry ON mcp_oauth_records (expires_at) WHERE expires_at IS NOT NULL;
