-- ElicitationStore (adapters/postgres/elicitations.py): the open MCP questions of the cluster's
-- calls, one row each until the waiting node finishes it; the answer as JSON once given.
CREATE TABLE elicitations (
    elicitation_id TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL,
    deadline_at    BIGINT NOT NULL,
    question       JSONB NOT NULL,
    answer         JSONB
);
CREATE INDEX elicitations_by_tenant ON elicitations (tenant_id, deadline_at) WHERE answer IS NULL;
CREATE INDEX elicitations_by_deadline ON elicitations (deadline_at);
