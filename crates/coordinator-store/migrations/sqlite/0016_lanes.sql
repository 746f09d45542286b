-- Coordinator store, SQLite dialect, migration 16. Keep in step with
-- migrations/pg/0016_lanes.sql.

-- Remote workers (src/remote.rs): an outbox row of a connection configured
-- `dispatch: remote` is in that connection's lane (its name) and is offered
-- to the workers serving the lane, never claimed in-process while it waits;
-- NULL is served in-process. A row of any lane whose lease ran out is still
-- claimed in-process, as before.
ALTER TABLE outbox ADD COLUMN lane TEXT;
-- When in-process work is next due is read from unleased rows without a lane.
DROP INDEX outbox_unleased;
CREATE INDEX outbox_unleased ON outbox (not_before, run_id, step, kind) WHERE lease_until IS NULL AND lane IS NULL;
-- An offer reads its lanes in claim order, leased rows included, as
-- SQLite's claim reads `outbox_claim_order` (its claimers take turns).
CREATE INDEX outbox_lanes ON outbox (lane, not_before, run_id, step, kind) WHERE lane IS NOT NULL;
