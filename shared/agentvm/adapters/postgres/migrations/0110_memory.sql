-- The MemoryStore (adapters/postgres/memory.py): what agents keep about end users across sessions,
-- one row per item of a (tenant, scope); ``words`` is its full-text vector ('simple': no stemming,
-- as SQLite's FTS5 unicode61), searched through a GIN index.
CREATE TABLE memory_items (
    tenant_id  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    id         TEXT NOT NULL,
    topic      TEXT,
    text       TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    size       INTEGER NOT NULL,
    words      tsvector GENERATED ALWAYS AS (to_tsvector('simple', coalesce(topic, '') || ' ' || text)) STORED,
    PRIMARY KEY (tenant_id, scope, id)
);
CREATE INDEX memory_items_words ON memory_items USING GIN (words);
