-- Coordinator store, SQLite dialect, migration 20. Keep in step with
-- migrations/pg/0020_uuid_run_ids.sql.

-- PostgreSQL now holds run ids as `uuid`. SQLite has no such type and keeps
-- their text: its tables stay as they are. Nothing to do here.
SELECT 1;
