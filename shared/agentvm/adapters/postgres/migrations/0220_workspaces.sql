-- Sandbox workspaces shared by the cluster's nodes (adapters/postgres/workspaces.py): a node runs a
-- container's job in its local copy, brought up to date from these rows first and written back after.
CREATE TABLE workspace_files (
    tenant_id  TEXT NOT NULL,
    workspace  TEXT NOT NULL,   -- records.workspace_digest(tenant, container): the local directory's name
    path       TEXT NOT NULL,   -- relative, '/'-separated, checked by workspace_files.relative_parts
    md5        TEXT NOT NULL,
    size       BIGINT NOT NULL,
    body       BYTEA NOT NULL,
    PRIMARY KEY (workspace, path)
);
CREATE INDEX workspace_files_by_tenant ON workspace_files (tenant_id);
CREATE TABLE workspace_versions (
    workspace  TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    version    BIGINT NOT NULL  -- +1 on every write-back that changed something
);
CREATE INDEX workspace_versions_by_tenant ON workspace_versions (tenant_id);
