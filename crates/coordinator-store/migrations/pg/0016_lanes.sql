-- Coordinator store, PostgreSQL dialect, migration 16. Keep in step with
-- migrations/sqlite/0016_lanes.sql.

-- Remote workers (src/remote.rs): an outbox row of a connection configured
-- `dispatch: remote` is in that connection's lane (its name) and is offered
-- to the workers serving the lane, never claimed in-process while it waits;
-- NULL is served in-process. A row of any lane whose lease ran out is still
-- claimed in-process, as before (`outbox_leased`).
ALTER TABLE outbox ADD COLUMN lane TEXT;
-- In-process claims read unleased rows without a lane only: the rows waiting
-- for remote workers are not stepped over.
DROP INDEX outbox_unleased;
CREATE INDEX outbox_unleased ON outbox (not_before, run_id, step, kind) WHERE lease_until IS NULL AND lane IS NULL;
-- An offer reads each of its lanes in claim order, and the rows of a lane
-- whose offer or lease ran out by their lease; when a lane's work is next due
-- is the first of each. Only laned rows have entries.
CREATE INDEX outbox_lanes ON outbox (lane, not_before, run_id, step, kind) WHERE lease_until IS NULL AND lane IS NOT NULL;
CREATE INDEX outbox_lanes_leased ON outbox (lane, lease_until) WHERE lease_until IS NOT NULL AND lane IS NOT NULL;
