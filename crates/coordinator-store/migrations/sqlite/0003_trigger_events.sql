-- Coordinator store, SQLite dialect, migration 3. Keep in step with
-- migrations/pg/0003_trigger_events.sql: the same tables, columns and constraints.

-- Every product event a trigger admitted a run from (docs/reference/runs.md,
-- "Admission": an event id is deduplicated), keyed per workflow and trigger by the event's `eventId`. Written in
-- the same transaction as the admission it caused, so a run admitted from an event
-- always has its row and a recorded event always has its run. A replayed event id
-- admits nothing new and answers with `run_id`. Only the id is kept, never the body.
CREATE TABLE trigger_events (
    workflow     TEXT NOT NULL,
    trigger_name TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    run_id       TEXT NOT NULL REFERENCES runs (id),
    received_at  INTEGER NOT NULL,
    PRIMARY KEY (workflow, trigger_name, event_id)
);
