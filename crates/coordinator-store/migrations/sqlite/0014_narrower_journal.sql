-- Coordinator store, SQLite dialect, migration 14. Keep in step with
-- migrations/pg/0014_narrower_journal.sql.

-- `prev_hash` is no longer written (readers take the hash of the entry at the
-- position before, `audit::link`); rows written before keep theirs. The
-- primary key PostgreSQL drops is SQLite's rowid `seq`, which costs nothing
-- extra: nothing to change here.
SELECT 1;
