-- The restore fence (src/fence.rs): the database file's identity (a random
-- id written at its first start, so a copy carries it), its commit epoch
-- (advanced every second by each process that watches it), and how many
-- times an operator accepted a new history (releasing a restore hold).
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
