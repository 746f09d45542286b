-- The deployment-wide restore hold (docs/reference/recovery.md): at most
-- one row. While it exists, admissions are refused and every unfinished run
-- carries the hold (runs.held); only its release resumes work.
CREATE TABLE restore_hold (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    placed_at BIGINT NOT NULL,
    placed_by TEXT NOT NULL
);
