-- Claims of outbox rows read unleased due rows from this partial index, and
-- rows whose lease ran out from `outbox_leased`: a claim in one index order
-- stepped over every row in flight (leased, not yet reported) older than the
-- first unleased one, and `outbox_claim_order` is then read by nothing.
CREATE INDEX outbox_unleased ON outbox (not_before, run_id, step, kind) WHERE lease_until IS NULL;
DROP INDEX outbox_claim_order;
