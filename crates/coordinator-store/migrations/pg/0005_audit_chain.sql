-- The audit journal's hash chain (docs/reference/protection.md; coordinator_core::audit): each
-- entry gets its chain position (1, 2, 3, … in commit order), the hash of the
-- entry before it and its own hash, computed in the transaction that writes
-- it, and the authenticated subject who caused it (NULL: the coordinator).
-- audit_head is the chain's last position and hash: appending locks it, so
-- positions follow commit order across processes. Entries written before this
-- migration are chained by `Store::migrate` right after it.
ALTER TABLE audit ADD COLUMN actor TEXT;
ALTER TABLE audit ADD COLUMN position BIGINT;
ALTER TABLE audit ADD COLUMN prev_hash TEXT;
ALTER TABLE audit ADD COLUMN hash TEXT;
CREATE UNIQUE INDEX audit_position ON audit (position);
CREATE INDEX audit_run_position ON audit (run_id, position);

CREATE TABLE audit_head (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    position  BIGINT NOT NULL,
    hash      TEXT NOT NULL
);
INSERT INTO audit_head (singleton, position, hash)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
