-- Coordinator store, SQLite dialect, migration 18. Keep in step with
-- migrations/pg/0018_snapshot_base.sql.

-- A run's snapshot in two sealed parts (src/snapshot_frame.rs): the base,
-- written at admission and whenever the engine rebases, and `snapshot`, the
-- head written with every decision (the changes since the base, or nothing).
-- An update that keeps the base leaves its bytes as they were, so PostgreSQL
-- logs only the head of the row (a HOT update on the same page logs the new
-- row without the bytes it shares with the old one at its start and end,
-- and the base is the row's last column). NULL: `snapshot` holds the whole
-- snapshot (every row written before this migration).
ALTER TABLE runs ADD COLUMN snapshot_base BLOB;
