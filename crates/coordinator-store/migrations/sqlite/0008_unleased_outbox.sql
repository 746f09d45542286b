-- The earliest unleased outbox row (when work is next due) is read from this
-- partial index. SQLite's claims keep reading `outbox_claim_order` in one
-- order: its claimers take turns, so none steps over another's rows for long.
CREATE INDEX outbox_unleased ON outbox (not_before, run_id, step, kind) WHERE lease_until IS NULL;
