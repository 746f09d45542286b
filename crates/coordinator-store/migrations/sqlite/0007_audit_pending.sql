-- Audit entries are written pending (no position, prev_hash or hash) in the
-- transaction that records what they describe, and sealed into the hash chain
-- shortly after, in `seq` order (`Store::seal_audit`). This partial index holds
-- only the pending rows, so finding them — and seeing that there are none —
-- costs nothing however long the journal grows.
CREATE INDEX audit_pending ON audit (seq) WHERE hash IS NULL;
