-- Coordinator store, PostgreSQL dialect, migration 26. Keep in step with
-- migrations/sqlite/0026_schedules.sql.

-- Schedules (src/schedules.rs; docs/reference/project.md#schedules): one row
-- per schedule of a workflow's active revision, with the next nominal
-- instant not yet fired or skipped. Whichever process holds a row's lease
-- fires it; each firing admits with the idempotency key
-- schedule:{id}:{instant}, so a firing repeated after a crash or a lost
-- lease finds the run it admitted. `calendar` is the calendar's text: a new
-- revision with the same text keeps `next_at`.
CREATE TABLE schedules (
    workflow      TEXT NOT NULL,
    schedule_id   TEXT NOT NULL,
    revision      TEXT NOT NULL,
    calendar      TEXT NOT NULL,
    next_at       BIGINT,
    pending_at    BIGINT,
    last_at       BIGINT,
    last_run_id   TEXT,
    paused_at     BIGINT,
    paused_by     TEXT,
    pause_reason  TEXT,
    lease_owner   TEXT,
    lease_until   BIGINT,
    PRIMARY KEY (workflow, schedule_id)
);
