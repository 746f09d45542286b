-- The restore and failover fence (src/fence.rs): the identity of the
-- database the deployment last accepted, and how many times an operator
-- accepted a new one (releasing a restore hold). On PostgreSQL the identity
-- is the cluster's system identifier, the timeline and the database's oid;
-- the commit epoch is the WAL position, read, never stored.
CREATE TABLE fence (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    system TEXT NOT NULL,
    timeline BIGINT NOT NULL,
    database TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    generation BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL
);
-- Why a hold was placed, when the deployment placed it itself (the fence's evidence).
ALTER TABLE restore_hold ADD COLUMN reason TEXT;
