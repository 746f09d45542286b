//! Housekeeping of the queue tables on PostgreSQL.
//!
//! Outbox and timer rows live for moments: queued, claimed (an update), done
//! (a delete). Each leaves index entries behind that only `VACUUM` removes,
//! and a claim's index scan steps over every one of them that is older than
//! its instant, so between autovacuum's visits (a minute apart by default)
//! each claim costs more. [`Store::tidy_queues`] vacuums the two tables
//! without waiting for a lock another vacuum holds (`SKIP_LOCKED`) and without
//! giving back the empty pages at their end (`TRUNCATE false`: that would take
//! a lock every claim waits for). SQLite deletes in place: nothing to do.
//!
//! The same command analyzes them (`ANALYZE`): without column statistics the
//! planner takes `lease_until IS NULL` (the predicate of `outbox_unleased`)
//! to match 0.5 % of the rows, estimates a claim's due rows at one or two,
//! and reads them all through a bitmap scan, joins each to its run and sorts
//! them before the limit — 1 780 due rows and 5 700 buffers for a claim of 32,
//! a third of PostgreSQL's time in the throughput bench. With statistics of
//! the second before, the claim reads its index in order and stops at the limit.

use crate::db::{Pool, db};
use crate::{Store, StoreError};

const VACUUM_QUEUES: &str = "VACUUM (ANALYZE, SKIP_LOCKED, TRUNCATE false) outbox, timers";

impl Store {
    /// Vacuums and analyzes the outbox and timer tables on PostgreSQL (a no-op on SQLite).
    /// Cheap when little changed since the last time; safe beside claims and
    /// commits of any process.
    pub async fn tidy_queues(&self) -> Result<(), StoreError> {
        if let Pool::Pg(pool, _) = &self.pool {
            // VACUUM cannot run inside a transaction: the simple protocol, on its own.
            sqlx::raw_sql(VACUUM_QUEUES).execute(pool).await.map_err(db)?;
        }
        Ok(())
    }
}
