-- Coordinator store, PostgreSQL dialect, migration 20. Keep in step with
-- migrations/sqlite/0020_uuid_run_ids.sql.

-- Run ids as `uuid` (16 bytes) instead of their 36-character text in every
-- table and index that holds one: `runs.id` and each `run_id`. A run id is
-- a UUIDv7 (src/run_id.rs in the service); it sorts as a `uuid` as its
-- lowercase text sorted under "C", so every order and range stays the same.
-- The store binds and reads run ids as text (src/db.rs: `Arg::Id`, and a
-- `uuid` column reads as its hyphenated text).
--
-- `runs` is partitioned by its id, and a partition key cannot change type:
-- its rows are copied aside, the table made again with the same day
-- partitions (`partition_days`; `runs_before` from MINVALUE) and its DEFAULT
-- partition, and the rows put back. The other tables change in place. Each
-- is rewritten once: run it with the service stopped (docs/deploy.md).

-- The bound of instant `ms` as a whole UUID: the instant's 12 hex digits,
-- then zeros (sorts before every UUIDv7 made then, after every one before).
CREATE OR REPLACE FUNCTION coordinator_run_id_bound(ms BIGINT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT
    AS $$ SELECT substr(lpad(to_hex(ms), 12, '0'), 1, 8) || '-' || substr(lpad(to_hex(ms), 12, '0'), 9, 4)
              || '-0000-0000-000000000000' $$;

ALTER TABLE outbox ALTER COLUMN run_id TYPE UUID USING run_id::uuid;
ALTER TABLE timers ALTER COLUMN run_id TYPE UUID USING run_id::uuid;
ALTER TABLE waits ALTER COLUMN run_id TYPE UUID USING run_id::uuid;
ALTER TABLE trigger_events ALTER COLUMN run_id TYPE UUID USING run_id::uuid;
ALTER TABLE admission_keys ALTER COLUMN run_id TYPE UUID USING run_id::uuid;
ALTER TABLE audit ALTER COLUMN run_id TYPE UUID USING run_id::uuid;

CREATE TEMPORARY TABLE runs_aside ON COMMIT DROP AS SELECT * FROM runs;
DROP TABLE runs;
CREATE TABLE runs (
    id              UUID NOT NULL,
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
    snapshot_base   BYTEA,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);
CREATE INDEX runs_listing ON runs (admitted_at, id);
CREATE INDEX runs_revision_listing ON runs (substr(revision, 1, 16), admitted_at, id);
CREATE INDEX runs_state_listing ON runs (state, admitted_at, id) WHERE state <> 'finished';
CREATE INDEX runs_attention ON runs (workflow, held, attention_since, id, attention_step) WHERE state = 'attention';
DO $$
DECLARE
    day RECORD;
BEGIN
    FOR day IN SELECT name, lo_ms, hi_ms FROM partition_days WHERE tbl = 'runs' ORDER BY lo_ms LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF runs FOR VALUES FROM (%s) TO (%L) WITH (fillfactor = 50)',
                       day.name,
                       CASE WHEN day.name = 'runs_before' THEN 'MINVALUE'
                            ELSE quote_literal(coordinator_run_id_bound(day.lo_ms)) END,
                       coordinator_run_id_bound(day.hi_ms));
    END LOOP;
END
$$;
CREATE TABLE runs_default PARTITION OF runs DEFAULT WITH (fillfactor = 50);
INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at,
                  updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since, snapshot_base)
    SELECT id::uuid, workflow, revision, owner, idempotency_key, input_digest, state, held, admitted_at,
           updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since, snapshot_base
    FROM runs_aside;
