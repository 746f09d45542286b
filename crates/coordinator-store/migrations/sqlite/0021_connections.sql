-- Coordinator store, SQLite dialect, migration 21. Keep in step with
-- migrations/pg/0021_connections.sql.

-- Flow control (src/connections.rs; docs/reference/operations.md#connections):
-- every queued outbox row names the connection its request goes to
-- (`conn`; NULL for rows queued before this migration, which no pause
-- holds back). A claim, an offer or an eager lease takes no row whose
-- connection an operator paused.
ALTER TABLE outbox ADD COLUMN conn TEXT;
-- The deployment's state of each connection that has one (no row: running).
-- A pause is recorded with who paused it, when, and why; it is journaled too.
CREATE TABLE connections (
    name TEXT PRIMARY KEY,
    paused_by TEXT,
    paused_at BIGINT,
    paused_reason TEXT
);
