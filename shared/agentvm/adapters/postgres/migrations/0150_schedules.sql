-- Schedules (adapters/postgres/schedules.py): a row per schedule and a row per run, each record as
-- JSON beside the columns the queries filter on. A run's primary key is (schedule, tick): of any
-- number of nodes, the one whose INSERT ... ON CONFLICT DO NOTHING stores it fires that tick.
CREATE TABLE schedules (
    tenant_id   TEXT NOT NULL,
    schedule_id TEXT COLLATE "C" NOT NULL,
    paused      BOOLEAN NOT NULL,
    next_at     BIGINT NOT NULL,
    record      JSONB NOT NULL,
    PRIMARY KEY (tenant_id, schedule_id)
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused;
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL,
    tick_at     BIGINT NOT NULL,
    tenant_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    claimed_at  BIGINT NOT NULL,
    record      JSONB NOT NULL,
    PRIMARY KEY (schedule_id, tick_at)
);
CREATE INDEX schedule_runs_claimed ON schedule_runs (claimed_at) WHERE status = 'claimed';
