-- Coordinator store, PostgreSQL dialect, migration 24. Keep in step with
-- migrations/sqlite/0024_search_keys.sql.

-- Search keys (docs/reference/project.md#searchkeys): the named values a
-- workflow computes from a run's input at admission, declared not secret by
-- its author, stored in clear beside the run and indexed so a run is found by
-- them (`GET /v1/runs?key.NAME=VALUE`). Written in the admission's own
-- transaction (src/search_keys.rs), removed with the run's other rows by
-- retention (by run id range: `run_keys_run`).
CREATE TABLE run_keys (
    name   TEXT NOT NULL,
    value  TEXT NOT NULL,
    run_id UUID NOT NULL,
    PRIMARY KEY (name, value, run_id)
);
CREATE INDEX run_keys_run ON run_keys (run_id);

-- A run found by the idempotency key it was admitted with (the caller's own
-- identifier), whoever admitted it.
CREATE INDEX admission_keys_by_key ON admission_keys (idempotency_key);
