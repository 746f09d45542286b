-- Coordinator store, SQLite dialect. Keep in step with migrations/pg/0001_init.sql:
-- the same tables, columns and constraints; only the types differ.

CREATE TABLE packages (
    revision TEXT PRIMARY KEY NOT NULL,
    workflow TEXT NOT NULL,
    digest   TEXT NOT NULL,
    bytes    BLOB NOT NULL
);

CREATE TABLE active_revisions (
    workflow TEXT PRIMARY KEY NOT NULL,
    revision TEXT NOT NULL REFERENCES packages (revision)
);

CREATE TABLE runs (
    id              TEXT PRIMARY KEY NOT NULL,
    workflow        TEXT NOT NULL,
    revision        TEXT NOT NULL,
    owner           TEXT NOT NULL,
    idempotency_key TEXT,
    input_digest    TEXT NOT NULL,
    state           TEXT NOT NULL,
    held            INTEGER NOT NULL,
    admitted_at     INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL,
    snapshot        BLOB NOT NULL,
    UNIQUE (owner, workflow, idempotency_key)
);
CREATE INDEX runs_listing ON runs (admitted_at, id);

CREATE TABLE outbox (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    step        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('attempt', 'receipt', 'observation')),
    attempt     INTEGER NOT NULL,
    not_before  INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    PRIMARY KEY (run_id, step, kind)
);
CREATE INDEX outbox_due ON outbox (not_before);

CREATE TABLE timers (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    timer       TEXT NOT NULL,
    due_at      INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    PRIMARY KEY (run_id, timer)
);
CREATE INDEX timers_due ON timers (due_at);

CREATE TABLE audit (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT,
    at     INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    step   TEXT,
    detail TEXT NOT NULL
);
CREATE INDEX audit_run ON audit (run_id, seq);
