-- Indexes in the exact order claims and `next_due` read due rows, so that a
-- claim of N rows stops after N rows however many are due at the same
-- instant (with only `due_at` indexed, 100 000 timers due at once made each
-- claim read all of them), and the earliest leased row is found without a scan.
CREATE INDEX timers_claim_order ON timers (due_at, run_id, timer);
CREATE INDEX outbox_claim_order ON outbox (not_before, run_id, step, kind);
CREATE INDEX timers_leased ON timers (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX outbox_leased ON outbox (lease_until) WHERE lease_until IS NOT NULL;
DROP INDEX timers_due;
DROP INDEX outbox_due;
