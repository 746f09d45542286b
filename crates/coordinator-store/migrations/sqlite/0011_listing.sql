-- Coordinator store, SQLite dialect, migration 11. Keep in step with
-- migrations/pg/0011_listing.sql.

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
ALTER TABLE runs ADD COLUMN attention_since INTEGER;
UPDATE runs SET attention_since = updated_at WHERE state = 'attention';

-- Newest-first listing by revision (`Store::list_runs_newest`): a revision
-- serves the runs admitted while it was active, so an old revision's runs
-- lie behind every newer run in `runs_listing`. Its columns never change:
-- only an admission writes to it.
CREATE INDEX runs_revision_listing ON runs (revision, admitted_at, id);

-- Newest-first listing by state, for every state but `finished` (the common
-- end, which `runs_listing` serves as densely as no filter). Partial: an
-- admission adds an entry, an update that changes the state moves or removes
-- it. A query must name the predicate (`state <> 'finished'`) for SQLite to
-- use the index.
CREATE INDEX runs_state_listing ON runs (state, admitted_at, id) WHERE state <> 'finished';

-- The attention inbox (`Store::attention_groups`, `Store::attention_runs`)
-- and the monitoring count (`Store::attention_by_reason`) read only runs in
-- attention, by workflow and hold (the reason), in the order they entered
-- attention; the step is carried so grouping reads no table row. Only
-- updates into, within or out of attention write to it.
DROP INDEX runs_attention;
CREATE INDEX runs_attention ON runs (workflow, held, attention_since, id, attention_step) WHERE state = 'attention';

-- Building the indexes holds the database's write lock (about 1.7 s at 1 M
-- runs): run it while the service is stopped (`coordinator migrate`).
