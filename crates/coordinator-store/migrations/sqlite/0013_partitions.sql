-- Coordinator store, SQLite dialect, migration 13. Keep in step with
-- migrations/pg/0013_partitions.sql.

-- PostgreSQL partitions runs and audit by day; SQLite keeps plain tables and
-- retention deletes rows instead (docs/operations.md, "Retention"). What the
-- two share: idempotency keys in `admission_keys` (the PostgreSQL runs table
-- cannot hold a unique index without its partition key), and the journal's
-- checkpoint after a retention cut. `runs` keeps its old unique constraint on
-- the key columns; `admission_keys` is written first, so it never fires.

CREATE TABLE admission_keys (
    owner           TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    PRIMARY KEY (owner, workflow, idempotency_key)
);
CREATE INDEX admission_keys_run ON admission_keys (run_id);
INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id)
    SELECT owner, workflow, idempotency_key, id FROM runs WHERE idempotency_key IS NOT NULL;
CREATE INDEX trigger_events_run ON trigger_events (run_id);

CREATE TABLE audit_checkpoint (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    position  INTEGER NOT NULL,
    hash      TEXT NOT NULL,
    cut_at    INTEGER NOT NULL
);
CREATE INDEX audit_at ON audit (at);
