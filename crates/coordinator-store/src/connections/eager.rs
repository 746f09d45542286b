//! Permits for eager leases: a batch of reports (`batch`) that queues rows
//! of a limited connection may lease them at once to its worker, as it does
//! the rows of a connection without limits (`commit_leases`), when the
//! connection's pace grants them in the batch's own transaction — so limits
//! that do not bind cost no claim round and no second write of the row.
//!
//! The grant is taken as a claim takes it ([`limits`](super::limits)), under
//! the lock of the connection's row, with the rows in flight counted after
//! the lock: a permit is still the lease, and two processes never exceed
//! the limit together. Unlike a claim, a batch never waits for the lock: a
//! row locked by another process's claim or batch grants nothing now
//! (`SKIP LOCKED`), and the rows wait for a claim round.
//!
//! **Only while the limit does not bind**: a batch leases at once only what
//! the pace grants beyond [`CLAIM_ROOM`] more permits (and tokens), which
//! it leaves for the claims. Rows due before the batch's (a new run's first
//! request, a retry) are taken by claims, in due order and round-robin
//! across workflows; as a limit nears, batches lease nothing and every
//! permit goes through those claims, so a run in progress never takes a
//! permit ahead of work that waited for it. Nothing is leased while the
//! breaker is not closed (its probe is claimed).
//!
//! PostgreSQL only: a SQLite batch leases no lane's rows (its service does
//! not lease at commit, `Store::eager_dispatch`).

use std::collections::HashMap;

use coordinator_core::pace::{Breaker, Limits};

use super::pace;
use crate::StoreError;
use crate::db::{Dialect, Tx};

/// Connection `$1`'s pace and pause, locked unless another transaction holds it.
const LOCK_PG: &str = concat!(
    "SELECT ",
    pace::pace_columns!(),
    ", paused_at IS NOT NULL FROM connections WHERE name = $1 FOR UPDATE SKIP LOCKED"
);
const EXISTS: &str = "SELECT 1 FROM connections WHERE name = $1";
const ENSURE: &str = "INSERT INTO connections (name) VALUES ($1) ON CONFLICT (name) DO NOTHING";
/// The permits (and tokens) a batch leaves for claims: what one claim
/// round of the service takes at most.
pub const CLAIM_ROOM: u32 = 32;

/// Connection `$1`'s rows in flight at `$2` (leased, the lease not run
/// out): its lanes found by a skip over the lane indexes, as `lanes::of`
/// finds them, in the same statement.
const IN_FLIGHT_PG: &str = "WITH RECURSIVE fresh(lane) AS (\
     SELECT (SELECT min(lane) FROM outbox WHERE lease_until IS NULL AND lane IS NOT NULL) \
     UNION ALL SELECT (SELECT min(o.lane) FROM outbox o WHERE o.lease_until IS NULL AND o.lane IS NOT NULL \
     AND o.lane > fresh.lane) FROM fresh WHERE fresh.lane IS NOT NULL), \
     leased(lane) AS (\
     SELECT (SELECT min(lane) FROM outbox WHERE lease_until IS NOT NULL AND lane IS NOT NULL) \
     UNION ALL SELECT (SELECT min(o.lane) FROM outbox o WHERE o.lease_until IS NOT NULL AND o.lane IS NOT NULL \
     AND o.lane > leased.lane) FROM leased WHERE leased.lane IS NOT NULL), \
     mine AS (SELECT lane FROM fresh WHERE split_part(lane, '/', 1) = $1 \
     UNION SELECT lane FROM leased WHERE split_part(lane, '/', 1) = $1) \
     SELECT count(*) FROM outbox o WHERE o.lane = ANY(ARRAY(SELECT lane FROM mine)) \
     AND o.lane IS NOT NULL AND o.lease_until >= $2";

/// What each connection of `wanted` (its limits, and how many of the
/// batch's rows would be leased at once) grants the batch at `now`, writing
/// the tokens it spends; a connection absent from the answer grants nothing.
pub(crate) async fn grant(
    tx: &mut Tx,
    wanted: &[(String, Limits, u32)],
    now: i64,
) -> Result<HashMap<String, u32>, StoreError> {
    let mut granted = HashMap::new();
    if tx.dialect() != Dialect::Pg {
        return Ok(granted);
    }
    for (name, limits, want) in wanted {
        let send = grant_one(tx, name, limits, *want, now).await?;
        if send > 0 {
            granted.insert(name.clone(), send);
        }
    }
    Ok(granted)
}

/// [`grant`] for one connection.
async fn grant_one(tx: &mut Tx, name: &str, limits: &Limits, want: u32, now: i64) -> Result<u32, StoreError> {
    if want == 0 {
        return Ok(0);
    }
    let row = match tx.fetch_optional(LOCK_PG, vec![name.into()]).await? {
        Some(row) => row,
        // Locked by another transaction, which may be taking permits: nothing now.
        None if tx.fetch_optional(EXISTS, vec![name.into()]).await?.is_some() => return Ok(0),
        // Never made yet (its first rows): made here, as a claim makes it.
        None => {
            tx.execute(ENSURE, vec![name.into()]).await?;
            match tx.fetch_optional(LOCK_PG, vec![name.into()]).await? {
                Some(row) => row,
                None => return Ok(0),
            }
        }
    };
    let mut pace = pace::pace_of(&row, 0, limits, now)?;
    let paused: bool = row.get(8)?;
    if paused || !matches!(pace.breaker, Breaker::Closed { .. }) || pace.hold_until > now {
        return Ok(0);
    }
    let Some(row) = tx.fetch_optional(IN_FLIGHT_PG, vec![name.into(), now.into()]).await? else {
        return Ok(0);
    };
    let in_flight = u32::try_from(row.get::<i64>(0)?).unwrap_or(u32::MAX);
    let grant = pace.grant(limits, in_flight, want.saturating_add(CLAIM_ROOM), now);
    let Some(leased) = grant.send.checked_sub(CLAIM_ROOM).filter(|n| *n > 0) else {
        // Near the limit: every permit goes through the claims (nothing spent here).
        return Ok(0);
    };
    if limits.rate_per_second.is_some() {
        // The claims' room stays in the bucket.
        pace.tokens = (pace.tokens + f64::from(CLAIM_ROOM)).min(limits.bucket());
        pace::write(tx, name, &pace, None).await?;
    }
    Ok(leased)
}
