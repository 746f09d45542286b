-- Coordinator store, PostgreSQL dialect. Keep in step with migrations/sqlite/0001_init.sql:
-- the same tables, columns and constraints; only the types differ.

CREATE TABLE packages (
    revision TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    digest   TEXT NOT NULL,
    bytes    BYTEA NOT NULL
);

CREATE TABLE active_revisions (
    workflow TEXT PRIMARY KEY,
    revision TEXT NOT NULL REFERENCES packages (revision)
);

CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
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
    UNIQUE (owner, workflow, idempotency_key)
);
CREATE INDEX runs_listing ON runs (admitted_at, id);

CREATE TABLE outbox (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    step        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('attempt', 'receipt', 'observation')),
    attempt     BIGINT NOT NULL,
    not_before  BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until BIGINT,
    PRIMARY KEY (run_id, step, kind)
);
CREATE INDEX outbox_due ON outbox (not_before);

CREATE TABLE timers (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    timer       TEXT NOT NULL,
    due_at      BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until BIGINT,
    PRIMARY KEY (run_id, timer)
);
CREATE INDEX timers_due ON timers (due_at);

CREATE TABLE audit (
    seq    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id TEXT,
    at     BIGINT NOT NULL,
    kind   TEXT NOT NULL,
    step   TEXT,
    detail TEXT NOT NULL
);
CREATE INDEX audit_run ON audit (run_id, seq);
