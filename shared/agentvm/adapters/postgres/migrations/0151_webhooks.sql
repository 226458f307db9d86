-- Webhooks (adapters/postgres/webhooks.py): endpoints with their sealed secrets, and the outbox of
-- deliveries; (endpoint, event) is unique, so an event is delivered once per endpoint.
CREATE TABLE webhook_endpoints (
    tenant_id   TEXT NOT NULL,
    endpoint_id TEXT COLLATE "C" NOT NULL,
    secret      TEXT NOT NULL,
    record      JSONB NOT NULL,
    PRIMARY KEY (tenant_id, endpoint_id)
);
CREATE TABLE webhook_deliveries (
    delivery_id     TEXT COLLATE "C" PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    endpoint_id     TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    status          TEXT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    record          JSONB NOT NULL,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (tenant_id, endpoint_id, created_at);
