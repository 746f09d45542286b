-- Coordinator store, PostgreSQL dialect, migration 11. Keep in step with
-- migrations/sqlite/0011_listing.sql.

-- Copied from the run after each decision, like `state` and `held`, so the
-- operator console lists and groups runs without opening snapshots: the
-- finish outcome of an ended run, and the step of the unknown effect a run
-- in attention waits on (NULL otherwise, also under a restore hold). Every
-- admission and run update writes both. Runs last written before this
-- migration have NULL in both: their snapshots are sealed, and the store
-- never reads them.
ALTER TABLE runs ADD COLUMN outcome TEXT;
ALTER TABLE runs ADD COLUMN attention_step TEXT;

-- When the run last entered state `attention`, NULL while it is not in
-- attention: the store computes it in each update from the stored state and
-- the new one. A run already in attention gets its last change, `updated_at`
-- (no earlier instant is known without its snapshot).
ALTER TABLE runs ADD COLUMN attention_since BIGINT;
UPDATE runs SET attention_since = updated_at WHERE state = 'attention';

-- Newest-first listing by revision (`Store::list_runs_newest`): a revision
-- serves the runs admitted while it was active, so an old revision's runs
-- lie behind every newer run in `runs_listing`; at 1 M runs that scan took
-- 170–240 ms a page. `revision` never changes: the index costs one entry per
-- admission and per update that is not HOT (one that changes the state or
-- the hold), and does not make any update non-HOT.
CREATE INDEX runs_revision_listing ON runs (revision, admitted_at, id);

-- Newest-first listing by state, for every state but `finished` (the common
-- end, which `runs_listing` serves as densely as no filter). Partial: an
-- admission adds an entry, an update to a state other than `finished` adds
-- one when it is not HOT, a run's finish adds none; `state` was already
-- indexed (by the predicate of `runs_attention`), so no update that was HOT
-- stops being so.
CREATE INDEX runs_state_listing ON runs (state, admitted_at, id) WHERE state <> 'finished';

-- The attention inbox (`Store::attention_groups`, `Store::attention_runs`)
-- and the monitoring count (`Store::attention_by_reason`) read only runs in
-- attention, by workflow and hold (the reason), in the order they entered
-- attention; the step is carried so grouping reads no table row. Its new
-- columns change only with the state or the hold (already indexed here), so
-- HOT updates stay HOT; only updates into or within attention add entries.
DROP INDEX runs_attention;
CREATE INDEX runs_attention ON runs (workflow, held, attention_since, id, attention_step) WHERE state = 'attention';

-- Building the indexes reads every run and blocks writes to `runs`
-- meanwhile (about 2.5 s at 1.26 M runs, 1.4 s of it `runs_revision_listing`):
-- run it while the service is stopped (`coordinator migrate`).
