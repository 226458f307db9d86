-- The ConfigStore (adapters/postgres/config.py): one versioned row of values per scope (secrets
-- arrive sealed by the config centre), and the audit log of changes.
CREATE TABLE config_values (
    scope   TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    record  JSONB NOT NULL
);
CREATE TABLE config_changes (
    id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope  TEXT NOT NULL,
    record JSONB NOT NULL
);
CREATE INDEX config_changes_by_scope ON config_changes (scope, id);
