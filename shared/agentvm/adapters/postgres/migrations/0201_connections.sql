-- The cluster's live WebSockets and the fan-out between nodes (adapters/postgres/connections.py,
-- adapters/postgres/push.py). Numbers 0200-0299: the queue and fan-out (issue 28 items 2 and 3).
CREATE TABLE cluster_nodes (
    node        TEXT PRIMARY KEY,
    alive_until TIMESTAMPTZ NOT NULL  -- renewed by the node's push heartbeat; past it, taken for dead
);
CREATE TABLE ws_connections (
    connection_id TEXT PRIMARY KEY,
    node          TEXT NOT NULL,       -- the node holding the socket
    tenant_id     TEXT,
    key_id        TEXT,
    connected_at  BIGINT NOT NULL,
    protocol      TEXT,
    batch         BOOLEAN NOT NULL DEFAULT false,
    cadence       TEXT
);
CREATE INDEX ws_connections_by_node ON ws_connections (node);
CREATE INDEX ws_connections_by_key ON ws_connections (key_id) WHERE key_id IS NOT NULL;
CREATE INDEX ws_connections_by_tenant ON ws_connections (tenant_id) WHERE tenant_id IS NOT NULL;
CREATE TABLE ws_subscriptions (
    session_id    TEXT NOT NULL,
    connection_id TEXT NOT NULL REFERENCES ws_connections (connection_id) ON DELETE CASCADE,
    after_seq     BIGINT,
    PRIMARY KEY (session_id, connection_id)
);
CREATE INDEX ws_subscriptions_by_connection ON ws_subscriptions (connection_id);
-- frames too big for a NOTIFY payload: the notification carries the row's id
CREATE TABLE push_frames (
    id         BIGSERIAL PRIMARY KEY,
    body       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
