-- The ResourceStore (adapters/postgres/resources.py): versions, heads and dependency edges. Names
-- compare bytewise (COLLATE "C", as on SQLite): listings are ordered by them.
CREATE TABLE resource_versions (
    tenant_id TEXT NOT NULL,
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    version   TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    record    JSONB NOT NULL,
    PRIMARY KEY (tenant_id, kind, name, version)
);
CREATE TABLE resource_heads (
    tenant_id TEXT NOT NULL,
    kind      TEXT COLLATE "C" NOT NULL,
    name      TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    record    JSONB NOT NULL,
    PRIMARY KEY (tenant_id, kind, name)
);
CREATE TABLE resource_edges (
    tenant_id TEXT NOT NULL,
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    dependent TEXT COLLATE "C" NOT NULL,
    selector  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, name, dependent, selector)
);
