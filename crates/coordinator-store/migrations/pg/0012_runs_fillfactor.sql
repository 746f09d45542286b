-- Coordinator store, PostgreSQL dialect, migration 12. Keep in step with
-- migrations/sqlite/0012_runs_fillfactor.sql.

-- A run's row is rewritten by every decision (its sealed snapshot, its
-- version), a few times a second while it runs. Filled to the brim, a heap
-- page has no room for the new version, so each update goes to another page
-- and adds an entry to every index of `runs` (six of them): in the
-- throughput bench only 1 update in 18 was HOT. Half-full pages keep the new
-- version beside the old one, and an update that changes no indexed column
-- (a step answered, a wait observed) then writes no index entry at all.
-- Applies to pages written from now on; `VACUUM FULL runs` (offline) would
-- repack the existing ones.
ALTER TABLE runs SET (fillfactor = 50);
