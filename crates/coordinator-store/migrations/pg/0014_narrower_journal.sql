-- Coordinator store, PostgreSQL dialect, migration 14. Keep in step with
-- migrations/sqlite/0014_narrower_journal.sql.

-- The journal writes less per entry (bench/RESULTS.md, fourth sitting):
-- * No primary key `(seq, at)`: nothing reads a sealed entry by `seq`, and
--   the sealer finds each pending row through the partial index
--   `audit_pending (seq) WHERE hash IS NULL`. The key cost an index entry per
--   insert and another per sealing update (about 1 KB of WAL per run).
-- * `prev_hash` is no longer written: an entry's predecessor is the entry at
--   the position before it (or the retention checkpoint, or the genesis), so
--   readers take its hash from there (`audit::link`). Rows written before
--   keep their column, and it is read as before. The column stays nullable.
ALTER TABLE audit DROP CONSTRAINT audit_pkey;
