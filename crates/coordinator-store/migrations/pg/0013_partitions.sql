-- Coordinator store, PostgreSQL dialect, migration 13. Keep in step with
-- migrations/sqlite/0013_partitions.sql.

-- Run-scoped history partitioned by day, so retention drops a day at once
-- instead of deleting row by row (docs/operations.md, "Retention"):
--   runs   by run id (a UUIDv7: its text sorts by the time it was made, in
--          the "C" collation, which every run id column now uses so joins
--          between them compare alike);
--   audit  by `at` (ms), the instant each entry was written.
-- The queue tables (outbox, timers, waits) stay small and plain. Partitions
-- are created ahead by the service (`Store::prepare_partitions`, at start and
-- hourly) and listed in `partition_days`; `runs_before` and `audit_before`
-- hold everything up to the end of the day this migration ran, and a DEFAULT
-- partition of each catches a row no day partition covers, so no insert ever
-- fails for want of a partition (retention never drops a DEFAULT partition).
--
-- An idempotency key cannot stay unique in a partitioned `runs` (a unique
-- index must hold the partition key), so the keys move to `admission_keys`;
-- the foreign keys to `runs` go too (a referenced partition could not be
-- dropped, and each check locked the run's row: WAL per queue insert). The
-- store writes queue rows only in the transaction of their run's decision.

ALTER TABLE outbox DROP CONSTRAINT IF EXISTS outbox_run_id_fkey;
ALTER TABLE timers DROP CONSTRAINT IF EXISTS timers_run_id_fkey;
ALTER TABLE waits DROP CONSTRAINT IF EXISTS waits_run_id_fkey;
ALTER TABLE trigger_events DROP CONSTRAINT IF EXISTS trigger_events_run_id_fkey;
ALTER TABLE outbox ALTER COLUMN run_id TYPE TEXT COLLATE "C";
ALTER TABLE timers ALTER COLUMN run_id TYPE TEXT COLLATE "C";
ALTER TABLE waits ALTER COLUMN run_id TYPE TEXT COLLATE "C";
ALTER TABLE trigger_events ALTER COLUMN run_id TYPE TEXT COLLATE "C";
CREATE INDEX trigger_events_run ON trigger_events (run_id);

CREATE TABLE admission_keys (
    owner           TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    run_id          TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (owner, workflow, idempotency_key)
);
CREATE INDEX admission_keys_run ON admission_keys (run_id);
INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id)
    SELECT owner, workflow, idempotency_key, id FROM runs WHERE idempotency_key IS NOT NULL;

-- The day partitions the service made: `tbl` is `runs` or `audit`; a day
-- covers [lo_ms, hi_ms). Retention reads and removes these rows.
CREATE TABLE partition_days (
    tbl   TEXT NOT NULL,
    name  TEXT NOT NULL,
    lo_ms BIGINT NOT NULL,
    hi_ms BIGINT NOT NULL,
    PRIMARY KEY (tbl, lo_ms)
);

-- Where the journal starts after a retention cut: the last entry removed
-- (`audit verify` starts there). No row: the journal starts at position 1.
CREATE TABLE audit_checkpoint (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    position  BIGINT NOT NULL,
    hash      TEXT NOT NULL,
    cut_at    BIGINT NOT NULL
);

-- The run id bound of instant `ms`: the first 12 hex digits of a UUIDv7 made
-- then, with its dash ('0190a1b2-c3d4' sorts before every id of that ms).
CREATE FUNCTION coordinator_run_id_bound(ms BIGINT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT
    AS $$ SELECT substr(lpad(to_hex(ms), 12, '0'), 1, 8) || '-' || substr(lpad(to_hex(ms), 12, '0'), 9, 4) $$;

ALTER TABLE runs RENAME TO runs_unpartitioned;
ALTER TABLE runs_unpartitioned RENAME CONSTRAINT runs_pkey TO runs_unpartitioned_pkey;
ALTER INDEX runs_listing RENAME TO runs_unpartitioned_listing;
ALTER INDEX runs_revision_listing RENAME TO runs_unpartitioned_revision_listing;
ALTER INDEX runs_state_listing RENAME TO runs_unpartitioned_state_listing;
ALTER INDEX runs_attention RENAME TO runs_unpartitioned_attention;
CREATE TABLE runs (
    id              TEXT COLLATE "C" NOT NULL,
    workflow        TEXT NOT NULL,
    revision        TEXT NOT NULL,
    owner           TEXT NOT NULL,
    idempotency_key TEXT,
    input_digest    TEXT NOT NULL,
    state           TEXT NOT NULL,
    held            BOOLEAN NOT NULL,
    admitted_at     BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    version         BIGINT NOT NULL,
    snapshot        BYTEA NOT NULL,
    trace_parent    TEXT,
    outcome         TEXT,
    attention_step  TEXT,
    attention_since BIGINT,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);
CREATE INDEX runs_listing ON runs (admitted_at, id);
CREATE INDEX runs_revision_listing ON runs (revision, admitted_at, id);
CREATE INDEX runs_state_listing ON runs (state, admitted_at, id) WHERE state <> 'finished';
CREATE INDEX runs_attention ON runs (workflow, held, attention_since, id, attention_step) WHERE state = 'attention';

ALTER TABLE audit RENAME TO audit_unpartitioned;
ALTER TABLE audit_unpartitioned RENAME CONSTRAINT audit_pkey TO audit_unpartitioned_pkey;
ALTER INDEX audit_pending RENAME TO audit_unpartitioned_pending;
ALTER INDEX audit_sealed_position RENAME TO audit_unpartitioned_sealed_position;
ALTER INDEX audit_run_sealed RENAME TO audit_unpartitioned_run_sealed;
CREATE SEQUENCE audit_seq;
CREATE TABLE audit (
    seq       BIGINT NOT NULL DEFAULT nextval('audit_seq'),
    run_id    TEXT COLLATE "C",
    at        BIGINT NOT NULL,
    kind      TEXT NOT NULL,
    step      TEXT,
    detail    TEXT NOT NULL,
    actor     TEXT,
    position  BIGINT,
    prev_hash TEXT,
    hash      TEXT,
    PRIMARY KEY (seq, at)
) PARTITION BY RANGE (at);
ALTER SEQUENCE audit_seq OWNED BY audit.seq;
CREATE INDEX audit_pending ON audit (seq) WHERE hash IS NULL;
CREATE INDEX audit_sealed_position ON audit (position) WHERE position IS NOT NULL;
CREATE INDEX audit_run_sealed ON audit (run_id, position) WHERE position IS NOT NULL;

DO $$
DECLARE
    tomorrow BIGINT := (floor(extract(epoch FROM now()) / 86400) + 1)::bigint * 86400000;
BEGIN
    EXECUTE format('CREATE TABLE runs_before PARTITION OF runs FOR VALUES FROM (MINVALUE) TO (%L) WITH (fillfactor = 50)',
                   coordinator_run_id_bound(tomorrow));
    EXECUTE format('CREATE TABLE audit_before PARTITION OF audit FOR VALUES FROM (MINVALUE) TO (%s)', tomorrow);
    INSERT INTO partition_days (tbl, name, lo_ms, hi_ms) VALUES
        ('runs', 'runs_before', 0, tomorrow), ('audit', 'audit_before', 0, tomorrow);
END
$$;
CREATE TABLE runs_default PARTITION OF runs DEFAULT WITH (fillfactor = 50);
CREATE TABLE audit_default PARTITION OF audit DEFAULT;

INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at,
                  updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since)
    SELECT id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at,
           updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since
    FROM runs_unpartitioned;
INSERT INTO audit (seq, run_id, at, kind, step, detail, actor, position, prev_hash, hash)
    SELECT seq, run_id, at, kind, step, detail, actor, position, prev_hash, hash FROM audit_unpartitioned;
SELECT setval('audit_seq', COALESCE((SELECT max(seq) FROM audit_unpartitioned), 0) + 1, false);
DROP TABLE runs_unpartitioned;
DROP TABLE audit_unpartitioned;
