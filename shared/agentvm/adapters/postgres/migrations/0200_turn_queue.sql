-- The cluster's turn queue (adapters/postgres/queue.py). Numbers 0200-0299 belong to the queue and
-- fan-out (issue 28 items 2 and 3) so they never collide with the stores' migrations.
CREATE TABLE turn_jobs (
    seq          BIGSERIAL PRIMARY KEY,          -- enqueue order (per session: commit order too)
    job_key      TEXT NOT NULL UNIQUE,           -- TurnJob.jobKey: turnId, or turnId#resume
    session_id   TEXT NOT NULL,
    tenant_id    TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    available_at TIMESTAMPTZ NOT NULL DEFAULT now(),  -- the database's clock: nodes' clocks may differ
    owner        TEXT,                           -- the node running it
    claim        BIGINT NOT NULL DEFAULT 0,      -- fencing token: +1 per claim; outcomes name theirs
    lease_until  TIMESTAMPTZ,                    -- running: past it, the owner is taken for dead
    enqueued_at  BIGINT NOT NULL,                -- TurnJob.enqueuedAt (epoch ms), for metrics
    job          TEXT NOT NULL                   -- the TurnJob as JSON
);
-- a session's live rows in order: its head, and the "nothing earlier is live" check of a claim
CREATE INDEX turn_jobs_live_by_session ON turn_jobs (session_id, seq) WHERE state <> 'dead';
-- the waiting rows of each tenant, oldest first (fair claims)
CREATE INDEX turn_jobs_queued_by_tenant ON turn_jobs (tenant_id, seq) WHERE state = 'queued';
-- running rows: tenants' shares, heartbeats and expired leases
CREATE INDEX turn_jobs_running ON turn_jobs (owner, lease_until) WHERE state = 'running';
