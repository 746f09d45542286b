-- Coordinator store, SQLite dialect, migration 19. Keep in step with
-- migrations/pg/0019_revision_prefix.sql.

-- PostgreSQL's revision listing index keys a run by a prefix of its revision
-- (narrower index entries, less WAL). SQLite keeps the whole revision in
-- `runs_revision_listing`: its listing names the revision as an equality,
-- which that index serves, and it writes no WAL per index entry worth the
-- change. Nothing to do here.
SELECT 1;
