-- Counters (adapters/postgres/counters.py): one row per (counter, field), with the counter's expiry
-- (epoch seconds) on each of its rows.
CREATE TABLE counters (
    key        TEXT NOT NULL,
    field      TEXT NOT NULL,
    value      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (key, field)
);
CREATE INDEX counters_by_expiry ON counters (expires_at);
