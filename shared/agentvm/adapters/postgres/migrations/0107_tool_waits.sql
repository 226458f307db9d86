-- ToolWaits (adapters/postgres/waits.py): one row per wait, its record as JSON; the columns beside
-- it are what the queries filter on. Call ids order bytewise (COLLATE "C"), as on SQLite.
CREATE TABLE tool_waits (
    turn_id      TEXT NOT NULL,
    call_id      TEXT COLLATE "C" NOT NULL,
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    status       TEXT NOT NULL,
    consumed     BOOLEAN NOT NULL DEFAULT false,
    check_at     BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    record       JSONB NOT NULL,
    PRIMARY KEY (turn_id, call_id)
);
CREATE INDEX tool_waits_by_tenant ON tool_waits (tenant_id, created_at) WHERE NOT consumed;
CREATE INDEX tool_waits_due ON tool_waits (check_at) WHERE NOT consumed;
