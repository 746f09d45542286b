-- Coordinator store, PostgreSQL dialect, migration 17. Keep in step with
-- migrations/sqlite/0017_journal_rows.sql.

-- One journal row per decision and run (src/audit/rows.rs): a row holds the
-- first of the decision's entries for its run in its own columns (its
-- `position` and `hash` are that entry's) and the others, in order, in
-- `more`: a JSON array of `[kind, step, detail, hash]` (`hash` null while
-- pending), at the positions after the row's. All of a row's entries share its
-- run, instant and actor. At most 64 entries per row. NULL: the row holds one
-- entry (every row written before this migration).
ALTER TABLE audit ADD COLUMN more TEXT;
