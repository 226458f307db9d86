-- Each node's own metrics (requests, turns, tokens, sockets, process), published on an interval so
-- /v1/metrics on any node shows every live node's figures (adapters/postgres/node_metrics.py).
CREATE TABLE node_metrics (
    node         TEXT PRIMARY KEY,
    published_at BIGINT NOT NULL,  -- epoch ms; older than the stale window, the node is left out
    families     JSONB NOT NULL    -- the node's metric families: name, type, help, unit, samples
);
