//! A connection's limits for the whole deployment (runtime.yaml `limits`:
//! requests in flight and per second), applied where work is claimed.
//!
//! The rows of a limited connection are queued in its lane (the
//! connection's name, as a remote connection's are), so the in-process
//! claim of due rows leaves them alone, expired leases included. Each claim
//! round then takes, per limited connection and under the lock of its row
//! of `connections`, at most what the shared pace grants
//! ([`coordinator_core::pace::Pace::grant`]): the permit is the lease. In
//! flight means the lane's rows whose lease has not run out, whichever
//! process holds them, so a crash keeps a permit no longer than its lease,
//! and two processes never exceed the limit together. Held-back rows stay
//! as they are (due, unleased, no claim counted) and are taken later in due
//! order, round-robin across workflows (`take_lane_sql!`). The bucket's
//! tokens are written back with the claim; tokens granted for rows that were
//! not there are given back.
//!
//! A remote connection's lane is governed the same way where it is offered
//! ([`Take::Offer`], from `remote`): under runtime.yaml's limits
//! ([`Store::set_offer_limits`]) and the polling worker's own, the stricter
//! bound of each. An offer holds its permit until the worker acquires the
//! row (the lease then holds it) or the assignment window runs out.

use std::collections::BTreeMap;

use coordinator_core::pace::Limits;

use super::pace;
use crate::claims::work_row;
use crate::db::{Arg, Dialect, Tx, Writer};
use crate::types::{ClaimedRun, WorkItem, WorkScope};
use crate::{Store, StoreError};

/// How soon a claim round looks again at a connection whose concurrency is
/// full (ms): its permits come back as answers commit, in any process.
pub const FULL_RECHECK_MS: i64 = 100;

/// `$1` the connection: whether an operator paused it.
const PAUSED: &str = "SELECT 1 FROM connections WHERE name = $1 AND paused_at IS NOT NULL";
/// `$1` the lane, `$2` now: its rows in flight.
const IN_FLIGHT: &str = "SELECT count(*) FROM outbox WHERE lane = $1 AND lease_until >= $2";

/// A take of rows of lane `$4` (`$1` owner, `$2` lease end, `$3` now, `$5`
/// 1 for receipts only, `$6` how many); `$count` what else the take sets (a
/// claim counts itself, an offer does not), `$rows` which rows. **Fair
/// across workflows:** each workflow's due rows are numbered oldest first,
/// and the take has every workflow's first before any workflow's second,
/// and so on, oldest first within a turn — so a flood of one workflow's work
/// waits its turns beside another's. No row lock is skipped: takes of a lane
/// are serialised by the connection row's lock, which every take of the
/// lane takes first.
macro_rules! take_lane_sql {
    ($count:literal, $rows:literal) => {
        concat!(
            "UPDATE outbox SET lease_owner = $1, lease_until = $2",
            $count,
            " WHERE (run_id, step, kind) IN (SELECT q.run_id, q.step, q.kind FROM (SELECT o.run_id, o.step, o.kind, \
             o.not_before, row_number() OVER (PARTITION BY r.workflow ORDER BY o.not_before, o.run_id, o.step, o.kind) \
             AS turn FROM outbox o JOIN runs r ON r.id = o.run_id WHERE o.lane = $4 AND ",
            $rows,
            " AND o.not_before <= $3 AND (NOT r.held OR o.kind = 'receipt') AND ($5 = 0 OR o.kind = 'receipt') AND ",
            super::not_paused!("o.lane"),
            ") AS q ORDER BY q.turn, q.not_before, q.run_id, q.step, q.kind LIMIT $6)",
            super::claimed_columns!()
        )
    };
}
/// A claim: unleased rows first, then rows whose lease ran out.
const CLAIM: [&str; 2] = [
    take_lane_sql!(", claims = claims + 1", "o.lease_until IS NULL"),
    take_lane_sql!(", claims = claims + 1", "o.lease_until < $3"),
];
/// An offer to a remote worker, in the same order: nothing claimed yet.
const OFFER: [&str; 2] = [take_lane_sql!("", "o.lease_until IS NULL"), take_lane_sql!("", "o.lease_until < $3")];
/// `$1` the lane: its first unleased row's due instant (of a run without a
/// hold, receipt lookups whatever the hold), and its first lease's end + 1.
const NEXT: &str = "SELECT (SELECT o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id \
     WHERE o.lane = $1 AND o.lease_until IS NULL AND (NOT r.held OR o.kind = 'receipt') \
     ORDER BY o.not_before LIMIT 1), \
     (SELECT o.lease_until + 1 FROM outbox o WHERE o.lane = $1 AND o.lease_until IS NOT NULL \
     ORDER BY o.lease_until LIMIT 1)";
/// Rows of the connections `$1` (a JSON array, or PostgreSQL's `text[]`)
/// queued before they were limited go in their lane.
const LANE_ROWS_SQLITE: &str = "UPDATE outbox SET lane = conn WHERE lane IS NULL AND lease_until IS NULL \
     AND conn IN (SELECT l.value FROM json_each($1) AS l)";
const LANE_ROWS_PG: &str =
    "UPDATE outbox SET lane = conn WHERE lane IS NULL AND lease_until IS NULL AND conn = ANY($1::text[])";

impl Store {
    /// Sets the connections this process claims under limits (runtime.yaml
    /// `limits`), by name; every process of a deployment should set the same.
    pub fn set_limits(&self, limits: BTreeMap<String, Limits>) {
        *self.connections.limits.write().unwrap_or_else(std::sync::PoisonError::into_inner) = limits;
    }

    /// Sets the remote connections' limits (runtime.yaml `limits` of a
    /// `dispatch: remote` connection), applied where their lanes are offered.
    pub fn set_offer_limits(&self, limits: BTreeMap<String, Limits>) {
        *self.connections.offer_limits.write().unwrap_or_else(std::sync::PoisonError::into_inner) = limits;
    }

    /// Remote lane `name`'s limits under this deployment and a worker's own (`asked`).
    pub(crate) fn offer_limits_of(&self, name: &str, asked: Option<&Limits>) -> Limits {
        let limits = self.connections.offer_limits.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let deployment = limits.get(name).copied().unwrap_or_default();
        asked.map_or(deployment, |asked| deployment.stricter(asked))
    }

    /// The limited connections' names: their lanes.
    pub(crate) fn governed_lanes(&self) -> Vec<String> {
        self.connections.limits.read().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect()
    }

    /// [`Store::governed_lanes`] as a JSON array (SQLite's statements).
    pub(crate) fn governed_lanes_json(&self) -> Result<Arg, StoreError> {
        serde_json::to_string(&self.governed_lanes())
            .map(Arg::Text)
            .map_err(|e| StoreError::Corrupt(format!("lanes: {e}")))
    }

    /// Puts the unleased rows of `connections` queued without a lane (before
    /// they were limited) in their lanes. Returns how many moved.
    pub async fn lane_rows(&self, connections: &[String]) -> Result<u64, StoreError> {
        if connections.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let moved = match tx.dialect() {
            Dialect::Pg => tx.execute(LANE_ROWS_PG, vec![Arg::Texts(connections.to_vec())]).await?,
            Dialect::Sqlite => {
                let lanes = serde_json::to_string(connections).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                tx.execute(LANE_ROWS_SQLITE, vec![Arg::Text(lanes)]).await?
            }
        };
        tx.commit().await?;
        Ok(moved)
    }

    /// `work` and `next` of a claim round, with what each limited connection
    /// grants now, within the round's `limit`, and when each may grant more.
    #[allow(clippy::too_many_arguments, reason = "a claim round's parts, as `claim_due` has them")]
    pub(crate) async fn with_governed(
        &self,
        mut work: Vec<(WorkItem, ClaimedRun)>,
        mut next: Option<i64>,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
        limit: u32,
    ) -> Result<(Vec<(WorkItem, ClaimedRun)>, Option<i64>), StoreError> {
        let limited: Vec<(String, Limits)> = {
            let limits = self.connections.limits.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            limits.iter().map(|(name, l)| (name.clone(), *l)).collect()
        };
        for (name, limits) in limited {
            let room = limit.saturating_sub(u32::try_from(work.len()).unwrap_or(u32::MAX));
            let (claimed, lane_next) = self.claim_lane(&name, &limits, scope, now, owner, lease_ms, room).await?;
            work.extend(claimed);
            next = match (next, lane_next) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok((work, next))
    }

    /// Claims what connection `name`'s pace grants of its due rows, at most
    /// `room`; and when asking again may grant more.
    #[allow(clippy::too_many_arguments, reason = "a claim round's parts, as `claim_due` has them")]
    async fn claim_lane(
        &self,
        name: &str,
        limits: &Limits,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
        room: u32,
    ) -> Result<(Vec<(WorkItem, ClaimedRun)>, Option<i64>), StoreError> {
        let (claimed, next) = self.take_lane(name, limits, Take::Claim(scope), now, owner, lease_ms, room).await?;
        Ok((claimed.into_iter().map(|(_, item, run)| (item, run)).collect(), next))
    }

    /// Takes (`take`) what lane `name`'s pace under `limits` grants of its
    /// due rows, at most `room`, for `owner` until `now + lease_ms`, under the
    /// connection row's lock; with a claim, when asking again may grant more.
    #[allow(clippy::too_many_arguments, reason = "a claim round's parts, as `claim_due` has them")]
    pub(crate) async fn take_lane(
        &self,
        name: &str,
        limits: &Limits,
        take: Take,
        now: i64,
        owner: &str,
        lease_ms: i64,
        room: u32,
    ) -> Result<(Vec<(i64, WorkItem, ClaimedRun)>, Option<i64>), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        crate::fence::refuse(&self.fence)?;
        if tx.fetch_optional(PAUSED, vec![name.into()]).await?.is_some() {
            // Nothing is due while paused: a resume wakes every process.
            tx.commit().await?;
            return Ok((Vec::new(), None));
        }
        let mut pace = pace::lock(&mut tx, name, limits, now).await?;
        let in_flight: i64 = match tx.fetch_optional(IN_FLIGHT, vec![name.into(), now.into()]).await? {
            Some(row) => row.get(0)?,
            None => 0,
        };
        let grant = pace.grant(limits, u32::try_from(in_flight).unwrap_or(u32::MAX), room, now);
        let taken_rows = if grant.send > 0 {
            take_rows(&mut tx, name, take, now, owner, lease_ms, grant.send).await?
        } else {
            Vec::new()
        };
        let taken = u32::try_from(taken_rows.len()).unwrap_or(u32::MAX);
        if grant.send > 0 {
            // Tokens granted for rows that were not there go back in the bucket.
            pace.tokens = (pace.tokens + f64::from(grant.send.saturating_sub(taken))).min(limits.bucket());
            if taken > 0 || !grant.probe {
                pace::write(&mut tx, name, &pace, None).await?;
            }
        }
        let next = match take {
            Take::Claim(_) => self.lane_next(&mut tx, name, now, grant.retry_at, taken, room).await?,
            Take::Offer => None,
        };
        tx.commit().await?;
        if grant.probe && taken > 0 {
            self.remember_pace(name, &pace::view_of(&pace, None), now);
        }
        Ok((taken_rows, next))
    }

    /// When lane `name` may give more after a claim at `now` that took
    /// `taken` of `room`: at once when it took all it was let; when the pace
    /// says (`retry_at`: tokens, a hold, a probe); else its next due row, or
    /// — while due rows wait for a permit — shortly ([`FULL_RECHECK_MS`]).
    async fn lane_next(
        &self,
        tx: &mut Tx,
        name: &str,
        now: i64,
        retry_at: Option<i64>,
        taken: u32,
        room: u32,
    ) -> Result<Option<i64>, StoreError> {
        if taken > 0 && taken == room {
            return Ok(Some(now));
        }
        if let Some(at) = retry_at {
            return Ok(Some(at.max(now + 1)));
        }
        let (first, lease_end): (Option<i64>, Option<i64>) = match tx.fetch_optional(NEXT, vec![name.into()]).await? {
            Some(row) => (row.get(0)?, row.get(1)?),
            None => (None, None),
        };
        Ok(match first {
            Some(due) if due > now => Some(lease_end.map_or(due, |end| end.min(due))),
            Some(_) => Some(lease_end.map_or(now + FULL_RECHECK_MS, |end| end.min(now + FULL_RECHECK_MS))),
            None => lease_end,
        })
    }
}

/// What a governed take does with the rows it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Claims them in-process (of `WorkScope`): the lease is the claimer's
    /// and the claim is counted.
    Claim(WorkScope),
    /// Offers them to a remote worker: the lease is the offer's, nothing is
    /// claimed until the worker acquires it (`remote`). The offer holds the
    /// permit until then.
    Offer,
}

/// Takes up to `most` due rows of lane `name`: unleased ones first, then
/// rows whose lease ran out.
async fn take_rows(
    tx: &mut Tx,
    name: &str,
    take: Take,
    now: i64,
    owner: &str,
    lease_ms: i64,
    most: u32,
) -> Result<Vec<(i64, WorkItem, ClaimedRun)>, StoreError> {
    let (statements, receipts_only) = match take {
        Take::Claim(scope) => (CLAIM, i64::from(scope == WorkScope::ReceiptsOnly)),
        Take::Offer => (OFFER, 0),
    };
    let mut taken = Vec::new();
    for sql in statements {
        let left = i64::from(most) - i64::try_from(taken.len()).unwrap_or(i64::MAX);
        if left <= 0 {
            break;
        }
        let args: Vec<Arg> = vec![
            owner.into(),
            now.saturating_add(lease_ms).into(),
            now.into(),
            name.into(),
            receipts_only.into(),
            left.into(),
        ];
        for row in tx.fetch_all(sql, args).await? {
            taken.push(work_row(&row, 0)?);
        }
    }
    Ok(taken)
}
