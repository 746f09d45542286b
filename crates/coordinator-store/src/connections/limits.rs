//! A connection's limits for the whole deployment (runtime.yaml `limits`:
//! requests in flight and per second), applied where work is claimed.
//!
//! The rows of a limited connection are queued in its lanes, one per
//! workflow ([`lanes`](super::lanes)), so the in-process claim of due rows
//! leaves them alone, expired leases included. Each claim round then takes,
//! per limited connection and under the lock of its row of `connections`,
//! at most what the shared pace grants
//! ([`coordinator_core::pace::Pace::grant`]): the permit is the lease. In
//! flight means the lanes' rows whose lease has not run out, whichever
//! process holds them — or a process's allowance, when more
//! ([`allowance`](super::allowance), renewed by the claim) — so a crash
//! keeps a permit no longer than its lease (or allowance), and two processes
//! never exceed the limit together. Held-back rows stay
//! as they are (due, unleased, no claim counted) and are taken later in due
//! order, round-robin across workflows (`take_sql!`). The bucket's tokens
//! are written back with the claim; tokens granted for rows that were not
//! there are given back.
//!
//! A remote connection's lanes (one per workflow too) are governed the same
//! way where they are offered ([`Take::Offer`], from `remote`): under runtime.yaml's
//! limits ([`Store::set_offer_limits`]) and the polling worker's own, the
//! stricter bound of each. An offer holds its permit until the worker
//! acquires the row (the lease then holds it) or the assignment window runs
//! out.

use std::collections::{BTreeMap, HashMap};

use coordinator_core::pace::Limits;

use super::pace;
use crate::claims::work_row;
use crate::db::{Arg, Dialect, Tx, Writer};
use crate::types::{ClaimedRun, WorkItem, WorkScope};
use crate::{Store, StoreError};

/// How soon a claim round looks again at a connection whose concurrency is
/// full (ms): its permits come back as answers commit, in any process.
pub const FULL_RECHECK_MS: i64 = 100;

/// PostgreSQL's take of rows of the lanes `$4` (`$1` owner, `$2` lease end,
/// `$3` now, `$5` 1 for receipts only, `$6` how many); `$count` what else the
/// take sets (a claim counts itself, an offer does not), `$rows` which rows.
/// **Fair across workflows** (a lane each): each lane's first `$6` due rows
/// are read in its index's order and numbered, and the take has every
/// lane's first before any lane's second, and so on, oldest first within a
/// turn — so a flood of one workflow's work waits its turns beside
/// another's, and a take reads no more than `$6` rows of each lane however
/// long the queue. No row lock is skipped: takes of a connection are
/// serialised by its row's lock, which every take takes first.
macro_rules! take_sql_pg {
    ($count:literal, $rows:literal) => {
        concat!(
            "UPDATE outbox SET lease_owner = $1, lease_until = $2",
            $count,
            " WHERE (run_id, step, kind) IN (SELECT q.run_id, q.step, q.kind FROM (SELECT c.run_id, c.step, c.kind, \
             c.not_before, row_number() OVER (PARTITION BY c.lane ORDER BY c.not_before, c.run_id, c.step, c.kind) \
             AS turn FROM unnest($4::text[]) AS l(value), LATERAL (SELECT o.lane, o.run_id, o.step, o.kind, \
             o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id WHERE o.lane = l.value AND o.lane IS NOT NULL AND ",
            $rows,
            " AND o.not_before <= $3 AND (NOT r.held OR o.kind = 'receipt') AND ($5 = 0 OR o.kind = 'receipt') \
             ORDER BY o.not_before, o.run_id, o.step, o.kind LIMIT $6) AS c) AS q \
             ORDER BY q.turn, q.not_before, q.run_id, q.step, q.kind LIMIT $6)",
            super::claimed_columns!()
        )
    };
}
/// SQLite's take, as PostgreSQL's with `$4` a JSON array of lanes: each
/// lane's due rows are numbered in one pass (SQLite has no `LATERAL`; its
/// store serves one process).
macro_rules! take_sql_sqlite {
    ($count:literal, $rows:literal) => {
        concat!(
            "UPDATE outbox SET lease_owner = $1, lease_until = $2",
            $count,
            " WHERE (run_id, step, kind) IN (SELECT q.run_id, q.step, q.kind FROM (SELECT o.run_id, o.step, o.kind, \
             o.not_before, row_number() OVER (PARTITION BY o.lane ORDER BY o.not_before, o.run_id, o.step, o.kind) \
             AS turn FROM outbox o JOIN runs r ON r.id = o.run_id \
             WHERE o.lane IN (SELECT l.value FROM json_each($4) AS l) AND o.lane IS NOT NULL AND ",
            $rows,
            " AND o.not_before <= $3 AND (NOT r.held OR o.kind = 'receipt') AND ($5 = 0 OR o.kind = 'receipt')) AS q \
             ORDER BY q.turn, q.not_before, q.run_id, q.step, q.kind LIMIT $6)",
            super::claimed_columns!()
        )
    };
}
/// Unleased rows first, then rows whose lease ran out: a claim, an offer; PostgreSQL, SQLite.
const CLAIM_PG: [&str; 2] = [
    take_sql_pg!(", claims = claims + 1", "o.lease_until IS NULL"),
    take_sql_pg!(", claims = claims + 1", "o.lease_until < $3"),
];
const OFFER_PG: [&str; 2] = [take_sql_pg!("", "o.lease_until IS NULL"), take_sql_pg!("", "o.lease_until < $3")];
const CLAIM_SQLITE: [&str; 2] = [
    take_sql_sqlite!(", claims = claims + 1", "o.lease_until IS NULL"),
    take_sql_sqlite!(", claims = claims + 1", "o.lease_until < $3"),
];
const OFFER_SQLITE: [&str; 2] =
    [take_sql_sqlite!("", "o.lease_until IS NULL"), take_sql_sqlite!("", "o.lease_until < $3")];
/// `$lanes` the lanes (a `FROM` item of rows `l(value)`): their first
/// unleased row's due instant (of a run without a hold, receipt lookups
/// whatever the hold), and their first lease's end + 1, each lane's first
/// read from its index.
macro_rules! next_sql {
    ($lanes:literal) => {
        concat!(
            "SELECT (SELECT MIN(f.due) FROM (SELECT (SELECT o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id \
             WHERE o.lane = l.value AND o.lane IS NOT NULL AND o.lease_until IS NULL \
             AND (NOT r.held OR o.kind = 'receipt') ORDER BY o.not_before LIMIT 1) AS due FROM ",
            $lanes,
            ") AS f), (SELECT MIN(e.due) FROM (SELECT (SELECT o.lease_until + 1 FROM outbox o \
             WHERE o.lane = l.value AND o.lane IS NOT NULL AND o.lease_until IS NOT NULL \
             ORDER BY o.lease_until LIMIT 1) AS due FROM ",
            $lanes,
            ") AS e)"
        )
    };
}
const NEXT_PG: &str = next_sql!("unnest($1::text[]) AS l(value)");
/// Per connection with lanes in the outbox (found by a skip over the lane
/// indexes, as `lanes::of` finds them): `next_sql!`'s two instants.
const LANES_DUE_PG: &str = concat!(
    super::lanes::lanes_with_pg!(),
    " SELECT split_part(l.lane, '/', 1), \
     MIN((SELECT o.not_before FROM outbox o JOIN runs r ON r.id = o.run_id WHERE o.lane = l.lane \
     AND o.lane IS NOT NULL AND o.lease_until IS NULL AND (NOT r.held OR o.kind = 'receipt') \
     ORDER BY o.not_before LIMIT 1)), \
     MIN((SELECT o.lease_until + 1 FROM outbox o WHERE o.lane = l.lane AND o.lane IS NOT NULL \
     AND o.lease_until IS NOT NULL ORDER BY o.lease_until LIMIT 1)) \
     FROM lanes l GROUP BY 1"
);
const NEXT_SQLITE: &str = next_sql!("json_each($1) AS l");
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
        let queued = self.lanes_due().await?;
        for (name, limits) in limited {
            let room = limit.saturating_sub(u32::try_from(work.len()).unwrap_or(u32::MAX));
            // Nothing due nor lapsing, and an allowance to spend for a while yet: no lock to take.
            let quiet = queued.as_ref().map(|queued| match queued.get(&name) {
                None => (true, None),
                Some(&(first, lease_end)) => {
                    let due = first.is_some_and(|at| at <= now) || lease_end.is_some_and(|at| at <= now);
                    let next = [first, lease_end].into_iter().flatten().min();
                    (!due && !self.connections.allowance_renewal_due(&name, now), next)
                }
            });
            let (claimed, lane_next) = match (self.awaiting_until(&name), quiet) {
                // Full at the last look, and no answer of it committed here since: not before the recheck.
                (Some(at), _) if at > now => (Vec::new(), Some(at)),
                (_, Some((true, next))) => (Vec::new(), next),
                _ => self.claim_lane(&name, &limits, scope, now, owner, lease_ms, room).await?,
            };
            work.extend(claimed);
            next = match (next, lane_next) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok((work, next))
    }

    /// PostgreSQL: per connection with lanes in the outbox, its first unleased
    /// row's due instant and its first lease's end + 1 (as `lane_next` reads
    /// them), in one statement without a lock; `None` on SQLite (every claim
    /// round takes each limited connection's lock there).
    async fn lanes_due(&self) -> Result<Option<HashMap<String, (Option<i64>, Option<i64>)>>, StoreError> {
        if !matches!(self.pool, crate::db::Pool::Pg(..)) || self.governed_lanes().is_empty() {
            return Ok(None);
        }
        let mut tx = self.pool.begin_read().await?;
        let mut due = HashMap::new();
        for row in tx.fetch_all(LANES_DUE_PG, Vec::new()).await? {
            due.insert(row.get(0)?, (row.get(1)?, row.get(2)?));
        }
        Ok(Some(due))
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
        let (mut pace, paused) = pace::lock_paused(&mut tx, name, limits, now).await?;
        if paused {
            // Nothing is due while paused: a resume wakes every process.
            tx.commit().await?;
            return Ok((Vec::new(), None));
        }
        let lanes = super::lanes::of(&mut tx, name).await?;
        if lanes.is_empty() {
            // Nothing queued for it at all.
            tx.commit().await?;
            return Ok((Vec::new(), None));
        }
        let lanes_arg = super::lanes::arg(tx.dialect(), &lanes)?;
        // In flight: every owner's leased rows, or its allowance when more (`allowance`).
        let me = match take {
            Take::Claim(_) => Some(owner),
            Take::Offer => None,
        };
        let shares = super::allowance::shares(&mut tx, &self.connections, name, &lanes_arg, now, me).await?;
        // Tokens other processes hold ahead are not refilled; nor this one's, renewed below.
        let ahead = shares.others_tokens + self.connections.allowance_tokens(name, now);
        pace.refill_less(limits, ahead, now);
        let grant = pace.grant(limits, shares.total, room, now);
        let taken_rows = if grant.send > 0 {
            take_rows(&mut tx, &lanes_arg, take, now, owner, lease_ms, grant.send).await?
        } else {
            Vec::new()
        };
        let taken = u32::try_from(taken_rows.len()).unwrap_or(u32::MAX);
        // Written when tokens were spent or a probe went out; a concurrency alone keeps no state.
        let mut spent = false;
        if grant.send > 0 {
            // Tokens granted for rows that were not there go back in the bucket.
            pace.tokens = (pace.tokens + f64::from(grant.send.saturating_sub(taken))).min(limits.bucket());
            spent = (taken > 0 && grant.probe) || (!grant.probe && limits.rate_per_second.is_some());
        }
        if let Some(me) = me {
            let after = super::allowance::Shares { mine: shares.mine + taken, ..shares };
            let memory = &self.connections;
            spent |= super::allowance::renew(&mut tx, memory, name, limits, &mut pace, after, me, now).await?;
        }
        if spent {
            pace::write(&mut tx, name, &pace, None).await?;
        }
        let (next, awaiting) = match take {
            Take::Claim(_) => self.lane_next(&mut tx, lanes_arg, now, grant.retry_at, taken, room).await?,
            Take::Offer => (None, false),
        };
        tx.commit().await?;
        if let Take::Claim(_) = take {
            // Waiting for a permit only when the grant (not the room, the tokens or a hold) fell short:
            // rows another transaction queued since the claim read are not.
            let short_of_permits = grant.send < room && grant.retry_at.is_none() && !grant.probe;
            self.remember_awaiting(name, next.filter(|_| awaiting && short_of_permits));
        }
        if grant.probe && taken > 0 {
            self.remember_pace(name, &pace::view_of(&pace, None), now);
        }
        Ok((taken_rows, next))
    }

    /// When a connection's `lanes` may give more after a claim at `now` that
    /// took `taken` of `room`: at once when it took all it was let; when the
    /// pace says (`retry_at`: tokens, a hold, a probe); else their next due
    /// row, or — while due rows wait for a permit — shortly
    /// ([`FULL_RECHECK_MS`]); and whether due rows wait for a permit.
    async fn lane_next(
        &self,
        tx: &mut Tx,
        lanes: Arg,
        now: i64,
        retry_at: Option<i64>,
        taken: u32,
        room: u32,
    ) -> Result<(Option<i64>, bool), StoreError> {
        if taken > 0 && taken == room {
            return Ok((Some(now), false));
        }
        if let Some(at) = retry_at {
            return Ok((Some(at.max(now + 1)), false));
        }
        let sql = match tx.dialect() {
            Dialect::Pg => NEXT_PG,
            Dialect::Sqlite => NEXT_SQLITE,
        };
        let (first, lease_end): (Option<i64>, Option<i64>) = match tx.fetch_optional(sql, vec![lanes]).await? {
            Some(row) => (row.get(0)?, row.get(1)?),
            None => (None, None),
        };
        Ok(match first {
            Some(due) if due > now => (Some(lease_end.map_or(due, |end| end.min(due))), false),
            Some(_) => (Some(lease_end.map_or(now + FULL_RECHECK_MS, |end| end.min(now + FULL_RECHECK_MS))), true),
            None => (lease_end, false),
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

/// Takes up to `most` due rows of `lanes`: unleased ones first, then rows
/// whose lease ran out.
async fn take_rows(
    tx: &mut Tx,
    lanes: &Arg,
    take: Take,
    now: i64,
    owner: &str,
    lease_ms: i64,
    most: u32,
) -> Result<Vec<(i64, WorkItem, ClaimedRun)>, StoreError> {
    let (statements, receipts_only) = match (take, tx.dialect()) {
        (Take::Claim(scope), Dialect::Pg) => (CLAIM_PG, i64::from(scope == WorkScope::ReceiptsOnly)),
        (Take::Claim(scope), Dialect::Sqlite) => (CLAIM_SQLITE, i64::from(scope == WorkScope::ReceiptsOnly)),
        (Take::Offer, Dialect::Pg) => (OFFER_PG, 0),
        (Take::Offer, Dialect::Sqlite) => (OFFER_SQLITE, 0),
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
            lanes.clone(),
            receipts_only.into(),
            left.into(),
        ];
        for row in tx.fetch_all(sql, args).await? {
            taken.push(work_row(&row, 0)?);
        }
    }
    Ok(taken)
}
