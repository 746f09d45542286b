-- Coordinator store, PostgreSQL dialect, migration 2. Keep in step with
-- migrations/sqlite/0002_claims_and_waits.sql: the same tables, columns and constraints.

-- How often the outbox row was claimed since it was queued, less the claims given back
-- (`Store::release`). A claim that makes it 2 or more knows an earlier worker held the row
-- and neither finished nor released it: that worker may have acted.
ALTER TABLE outbox ADD COLUMN claims BIGINT NOT NULL DEFAULT 0;
-- A row leased when the database is upgraded was claimed at least once.
UPDATE outbox SET claims = 1 WHERE lease_owner IS NOT NULL;

-- The completion reference each open wait-for observes, so a completion notification
-- finds its run without opening snapshots. Written by StartWait, removed by ResolveWait
-- and EndRun. Waits started before this migration have no row (their snapshots are
-- sealed): a notification for them is not delivered, and they are still observed on
-- their schedule.
CREATE TABLE waits (
    run_id    TEXT NOT NULL REFERENCES runs (id),
    step      TEXT NOT NULL,
    reference TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
);
CREATE INDEX waits_reference ON waits (reference);
