-- Coordinator store, PostgreSQL dialect, migration 21. Keep in step with
-- migrations/sqlite/0021_connections.sql.

-- Flow control (src/connections/; docs/reference/service.md#connections):
-- every queued outbox row names the connection its request goes to
-- (`conn`; NULL for rows queued before this migration, which no pause
-- holds back). A claim, an offer or an eager lease takes no row whose
-- connection is paused, held or behind an open breaker (but the probe).
ALTER TABLE outbox ADD COLUMN conn TEXT;
-- The deployment's state of each connection that has one (no row: running
-- at full pace). A pause is recorded with who paused it, when, and why; it is
-- journaled too. The pace (coordinator_core::pace) is shared by every
-- process: `hold_until` (a product's Retry-After), the breaker (`closed`,
-- `open`, `half-open`; failures in a row while closed; since when, why, when
-- the next probe may go), the slow-down `factor` and the token bucket's
-- `tokens` (both in millionths) as of `refilled_at`.
CREATE TABLE connections (
    name TEXT PRIMARY KEY,
    paused_by TEXT,
    paused_at BIGINT,
    paused_reason TEXT,
    hold_until BIGINT NOT NULL DEFAULT 0,
    breaker TEXT NOT NULL DEFAULT 'closed' CHECK (breaker IN ('closed', 'open', 'half-open')),
    failures BIGINT NOT NULL DEFAULT 0,
    breaker_since BIGINT,
    breaker_why TEXT,
    probe_at BIGINT,
    factor BIGINT NOT NULL DEFAULT 1000000,
    tokens BIGINT,
    refilled_at BIGINT
);
