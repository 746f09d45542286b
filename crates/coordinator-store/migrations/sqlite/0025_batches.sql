-- Coordinator store, SQLite dialect, migration 25. Keep in step with
-- migrations/pg/0025_batches.sql.

-- Durable batches (src/batches.rs; docs/api.md#batches): an operator's
-- command over every run a filter matched when the batch was started, worked
-- through in chunks by whichever process holds its lease. `batch_runs` holds
-- the runs it matched, each with its outcome once acted on: `done` is written
-- in the same transaction as the run's decision and only while the outcome
-- is still empty, so no run is acted on twice; `refused` carries the rule's
-- code.
CREATE TABLE batches (
    id           TEXT PRIMARY KEY,
    action       TEXT NOT NULL,
    filter       TEXT NOT NULL,
    reason       TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    state        TEXT NOT NULL,
    matched      BIGINT NOT NULL,
    lease_owner  TEXT,
    lease_until  BIGINT,
    ended_at     BIGINT,
    cancelled_by TEXT
);
CREATE INDEX batches_running ON batches (created_at) WHERE state = 'running';

CREATE TABLE batch_runs (
    batch_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    outcome  TEXT,
    code     TEXT,
    at       BIGINT,
    PRIMARY KEY (batch_id, run_id)
);
CREATE INDEX batch_runs_pending ON batch_runs (batch_id, run_id) WHERE outcome IS NULL;
