-- The LogStore (adapters/postgres/logs.py): the cluster's recent log lines for /v1/logs, every
-- node's, one row per line; log_store_size holds the lines' total size (one row), kept by each insert
-- so that any node knows when the cluster-wide cap is passed without summing the table.
CREATE TABLE log_lines (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts           BIGINT NOT NULL,
    level        INTEGER NOT NULL,
    tenant_id    TEXT,
    container_id TEXT,
    session_id   TEXT,
    turn_id      TEXT,
    line         TEXT NOT NULL
);
CREATE INDEX log_lines_by_tenant ON log_lines (tenant_id, id);
CREATE INDEX log_lines_by_turn ON log_lines (turn_id, id);
CREATE TABLE log_store_size (
    one   BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    bytes BIGINT NOT NULL
);
INSERT INTO log_store_size (bytes) VALUES (0);
