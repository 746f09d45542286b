-- Coordinator store, SQLite dialect, migration 12. Keep in step with
-- migrations/pg/0012_runs_fillfactor.sql.

-- PostgreSQL leaves half of each page of `runs` free for the next version of
-- its rows (HOT updates). SQLite updates a row in place in its B-tree and has
-- no such setting: nothing to change here.
SELECT 1;
