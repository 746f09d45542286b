-- Coordinator store, PostgreSQL dialect, migration 23. Keep in step with
-- migrations/sqlite/0023_connection_allowances.sql.

-- Allowances of a limited connection's permits (src/connections/allowance.rs;
-- docs/reference/service.md#limits): a process (`owner`) may lease up to
-- `permits` of the connection's rows as their decisions commit, until
-- `until` (ms), without taking the connection's lock each time; every other
-- process counts the allowance as that many requests in flight (or the
-- owner's leased rows, when more) until it is removed; and its `tokens`
-- (taken out of the connection's bucket ahead, none without a rate) as
-- held back from the bucket's size. An allowance is taken and renewed under
-- the lock of the connection's row, and removed there once it lapsed.
CREATE TABLE connection_allowances (
    connection TEXT NOT NULL,
    owner TEXT NOT NULL,
    permits BIGINT NOT NULL,
    tokens BIGINT NOT NULL DEFAULT 0,
    until BIGINT NOT NULL,
    PRIMARY KEY (connection, owner)
);
