-- Coordinator store, PostgreSQL dialect, migration 22. Keep in step with
-- migrations/sqlite/0022_console_sign_outs.sql.

-- Console sessions ended by signing out (src/console_sessions.rs;
-- docs/console.md#signing-in): a session's cookie is signed, not stored, so
-- every process accepts it until it expires; a sign-out records a digest of
-- the cookie's signature (never the cookie) until then, and every process
-- refuses a cookie whose digest is here. Rows past their expiry are removed
-- as sign-outs are written.
CREATE TABLE console_sign_outs (
    session TEXT PRIMARY KEY,
    until BIGINT NOT NULL
);
