-- RunningTurns (adapters/postgres/running.py): the turns accepted and not yet finished, every
-- node's. Also an index of the Store's usage table (0001_store) by turn id compared bytewise: a
-- turn's step records ("<turn>:step:<n>") are one range of it, whatever the database's collation.
CREATE TABLE running_turns (
    tenant_id    TEXT NOT NULL,
    turn_id      TEXT COLLATE "C" NOT NULL,
    container_id TEXT NOT NULL,
    image_id     TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    queued_at    BIGINT NOT NULL,
    model        TEXT,
    PRIMARY KEY (tenant_id, turn_id)
);
CREATE INDEX running_by_container ON running_turns (tenant_id, container_id, queued_at);
CREATE INDEX running_by_age ON running_turns (queued_at);
CREATE INDEX usage_by_turn_bytewise ON usage ((turn_id COLLATE "C"));
