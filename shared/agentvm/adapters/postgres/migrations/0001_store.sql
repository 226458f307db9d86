-- The Store port (adapters/postgres/store.py): containers, images and their sessions, messages,
-- compaction summaries, turns, usage and interrupt marks. Records are kept as their JSON text
-- (what pydantic parses fastest), with the columns needed for keys, scoping and ordering copied
-- out next to it. Times are epoch milliseconds, as in the records.

CREATE TABLE containers (
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    record       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, container_id)
);

CREATE TABLE images (
    image_id     TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    record       TEXT NOT NULL
);
CREATE INDEX images_by_tenant ON images (tenant_id, created_at DESC, image_id DESC);
CREATE INDEX images_by_container ON images (tenant_id, container_id, created_at DESC, image_id DESC);

CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    record     TEXT NOT NULL
);
CREATE INDEX sessions_by_tenant ON sessions (tenant_id);

-- One row per message, numbered per session from 1. NULL keys never collide in a UNIQUE
-- constraint, so appends without a key are unconstrained.
CREATE TABLE messages (
    session_id      TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    idempotency_key TEXT,
    message         TEXT NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, idempotency_key)
);

CREATE TABLE summaries (
    session_id TEXT PRIMARY KEY,
    up_to_seq  BIGINT NOT NULL,
    record     TEXT NOT NULL
);

-- session_id, status and poller are copied out of the record: a tenant's purge and the interrupt
-- poll (running turns of one poller) read them.
CREATE TABLE turns (
    turn_id    TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    status     TEXT NOT NULL,
    poller     TEXT,
    record     TEXT NOT NULL
);
CREATE INDEX turns_by_session ON turns (session_id);
CREATE INDEX turns_running_by_poller ON turns (poller) WHERE status = 'running' AND poller IS NOT NULL;

CREATE TABLE usage (
    turn_id      TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    container_id TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    record       TEXT NOT NULL
);
CREATE INDEX usage_by_tenant ON usage (tenant_id, created_at, turn_id);
CREATE INDEX usage_by_container ON usage (tenant_id, container_id, created_at, turn_id);

-- One interrupt mark per cancelled turn.
CREATE TABLE cancel_marks (
    session_id TEXT NOT NULL,
    turn_id    TEXT NOT NULL,
    PRIMARY KEY (session_id, turn_id)
);
CREATE INDEX cancel_marks_by_turn ON cancel_marks (turn_id);
