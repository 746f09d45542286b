-- Coordinator store, PostgreSQL dialect, migration 19. Keep in step with
-- migrations/sqlite/0019_revision_prefix.sql.

-- The revision listing's index keys a run by the first 16 characters of its
-- revision (`sha256:` and 9 hex digits) instead of all 71: every run's
-- insert and its last update write an entry here, and the whole revision
-- made each entry about 170 bytes of WAL. The listing names the prefix and
-- the whole revision (src/listing.rs); two revisions sharing a prefix only
-- cost the listing the rows of the other it steps over.
DROP INDEX runs_revision_listing;
CREATE INDEX runs_revision_listing ON runs (substr(revision, 1, 16), admitted_at, id);
