//! Allowances: permits (and tokens) of a limited connection a process takes
//! now and then, under the lock of the connection's row, and spends as its
//! decisions and admissions commit, without that lock (`eager`) — so limits
//! that do not bind cost about nothing at commit.
//!
//! - **Taken** by a claim round of the process (`limits::take_lane`, which
//!   holds the lock and has counted what is in flight): while the limit
//!   leaves more than [`CLAIM_ROOM`] free beyond every other process's
//!   share, the process takes up to [`MOST_PERMITS`] of the rest, for
//!   [`ALLOWANCE_MS`]; with a rate, up to as many tokens, taken out of the
//!   bucket, only while the bucket is more than half full. Tokens held ahead
//!   are recorded with the allowance and held back from the bucket's size
//!   (`Pace::refill_less`) until the allowance is renewed or lapses, so the
//!   bucket and every allowance together never hold more than its size.
//!   Near the limit it takes none, and every permit goes through the claims.
//! - **Counted** by every process as in flight: an owner with an allowance
//!   holds `max(allowance, its leased rows)` permits; another owner its
//!   leased rows. So the limit holds for the sum of every process.
//! - **Spent** at commit: the statement that counts the owner's leased rows
//!   of the connection also takes a key-share lock on its allowance row, so a
//!   process removing a lapsed allowance (under the connection's lock) waits
//!   for the commits that spend it and then sees their rows; the owner counts
//!   its own commits in progress in memory ([`Pending`]). A clock running
//!   ahead elsewhere cannot cut a spending commit short.
//! - **Lapses** after [`ALLOWANCE_MS`] unless renewed; tokens not spent by
//!   then are lost (the product is sent less, never more). A crashed
//!   process's allowance is removed by the next claim after it lapses.
//!
//! PostgreSQL only: on SQLite one process serves the database and claims
//! every limited row.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use coordinator_core::pace::{Breaker, Limits, Pace};

use super::Memory;
use super::eager::CLAIM_ROOM;
use crate::StoreError;
use crate::db::{Arg, Dialect, Tx};

/// How long an allowance lasts unless a claim round renews it (ms).
pub const ALLOWANCE_MS: i64 = 1_000;
/// The most permits (and tokens) one allowance holds.
pub const MOST_PERMITS: u32 = 1024;

const FORGET: &str = "DELETE FROM connection_allowances WHERE connection = $1 AND until < $2";
/// Per owner: its allowance of connection `$1` and its rows in flight at
/// `$2` among the lanes `$lanes` (a `FROM` item of rows `l(value)`).
macro_rules! shares_sql {
    ($lanes:literal) => {
        concat!(
            "SELECT w.owner, max(w.permits), max(w.leased), max(w.tokens) FROM (\
             SELECT owner, permits, 0 AS leased, tokens FROM connection_allowances WHERE connection = $1 \
             UNION ALL SELECT o.lease_owner, 0, count(*), 0 FROM outbox o WHERE o.lane IN (SELECT l.value FROM ",
            $lanes,
            ") AND o.lane IS NOT NULL AND o.lease_until >= $2 GROUP BY o.lease_owner) AS w GROUP BY w.owner"
        )
    };
}
const SHARES_PG: &str = shares_sql!("unnest($3::text[]) AS l(value)");
const SHARES_SQLITE: &str = shares_sql!("json_each($3) AS l");
const DROP: &str = "DELETE FROM connection_allowances WHERE connection = $1 AND owner = $2";
const KEEP: &str = "INSERT INTO connection_allowances (connection, owner, permits, tokens, until) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (connection, owner) \
     DO UPDATE SET permits = excluded.permits, tokens = excluded.tokens, until = excluded.until";
/// Owner `$2`'s allowance of connection `$1` at `$3`, key-share locked to the
/// commit (see the module doc), and its leased rows of the connection's lanes
/// (found as `lanes::of` finds them, in the same statement).
const SPEND_PG: &str = concat!(
    super::lanes::lanes_with_pg!(),
    ", mine AS (SELECT lane FROM lanes WHERE split_part(lane, '/', 1) = $1), \
     a AS (SELECT permits FROM connection_allowances WHERE connection = $1 AND owner = $2 AND until >= $3 \
     FOR KEY SHARE) \
     SELECT (SELECT permits FROM a), (SELECT count(*) FROM outbox o WHERE o.lane = ANY(ARRAY(SELECT lane FROM mine)) \
     AND o.lane IS NOT NULL AND o.lease_until >= $3 AND o.lease_owner = $2)"
);

/// What this process remembers of one connection's allowance.
#[derive(Debug, Default, Clone)]
pub(crate) struct Local {
    permits: u32,
    /// Tokens taken, for a connection with a rate (`None`: none needed).
    tokens: Option<f64>,
    until: i64,
    /// Permits spent by commits of this process not committed yet.
    pending: u32,
}

/// This process's allowances, by connection.
#[derive(Debug, Default)]
pub(crate) struct Allowances(Mutex<HashMap<String, Local>>);

impl Allowances {
    /// Whether this process holds an allowance of connection `name` with a
    /// permit not spent at `now` (as far as it knows: its commits in progress).
    pub(crate) fn usable(&self, name: &str, now: i64) -> bool {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.get(name).is_some_and(|local| {
            local.until > now && local.permits > local.pending && local.tokens.is_none_or(|t| t >= 1.0)
        })
    }

    /// The tokens this process holds ahead for connection `name` at `now`.
    pub(crate) fn tokens(&self, name: &str, now: i64) -> f64 {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.get(name).filter(|local| local.until > now).and_then(|local| local.tokens).unwrap_or(0.0)
    }

    /// Whether this process's allowance of connection `name` lapses within
    /// half its life at `now` (or there is none): a claim round renews it.
    pub(crate) fn renewal_due(&self, name: &str, now: i64) -> bool {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.get(name).is_none_or(|local| local.until.saturating_sub(now) < ALLOWANCE_MS / 2)
    }

    fn with<T>(&self, name: &str, f: impl FnOnce(&mut Local) -> T) -> T {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(all.entry(name.to_owned()).or_default())
    }
}

/// The permits in flight of a limited connection, as a claim counts them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Shares {
    /// Every owner's: the sum of `max(allowance, leased rows)`.
    pub(crate) total: u32,
    /// The claiming owner's leased rows, its commits in progress included.
    pub(crate) mine: u32,
    /// Every other owner's share.
    pub(crate) others: u32,
    /// Every other owner's tokens taken ahead, which the bucket holds back.
    pub(crate) others_tokens: f64,
}

/// Removes connection `name`'s lapsed allowances (waiting for the commits
/// that spend them) and counts what is in flight among its `lanes` at
/// `now`: each owner's `max(allowance, leased rows)`; `me`, the claiming
/// process, with its commits in progress.
pub(crate) async fn shares(
    tx: &mut Tx,
    memory: &Memory,
    name: &str,
    lanes: &Arg,
    now: i64,
    me: Option<&str>,
) -> Result<Shares, StoreError> {
    tx.execute(FORGET, vec![name.into(), now.into()]).await?;
    let sql = match tx.dialect() {
        Dialect::Pg => SHARES_PG,
        Dialect::Sqlite => SHARES_SQLITE,
    };
    let pending = me.map_or(0, |_| memory.allowances.with(name, |l| l.pending));
    let mut shares = Shares::default();
    for row in tx.fetch_all(sql, vec![name.into(), now.into(), lanes.clone()]).await? {
        let owner: String = row.get(0)?;
        let (permits, leased, tokens): (i64, i64, i64) = (row.get(1)?, row.get(2)?, row.get(3)?);
        let mut leased = u32::try_from(leased).unwrap_or(u32::MAX);
        let mine = me == Some(owner.as_str());
        if mine {
            leased = leased.saturating_add(pending);
            shares.mine = leased;
        }
        let held = u32::try_from(permits).unwrap_or(u32::MAX).max(leased);
        shares.total = shares.total.saturating_add(held);
        if !mine {
            shares.others = shares.others.saturating_add(held);
            #[allow(clippy::cast_precision_loss, reason = "a few thousand tokens")]
            let tokens = tokens as f64;
            shares.others_tokens += tokens;
        }
    }
    Ok(shares)
}

/// Renews `me`'s allowance of connection `name` after a claim that left
/// `shares` in flight (its own rows and commits in progress in
/// `shares.mine`): see the module doc. Takes its tokens out of `pace`;
/// returns whether it did (the pace is then to be written).
#[allow(clippy::too_many_arguments, reason = "a claim's parts, as `take_lane` has them")]
pub(crate) async fn renew(
    tx: &mut Tx,
    memory: &Memory,
    name: &str,
    limits: &Limits,
    pace: &mut Pace,
    shares: Shares,
    me: &str,
    now: i64,
) -> Result<bool, StoreError> {
    if tx.dialect() != Dialect::Pg {
        return Ok(false);
    }
    let healthy = matches!(pace.breaker, Breaker::Closed { .. }) && pace.hold_until <= now;
    let permits = match pace.room(limits, shares.others) {
        _ if !healthy => 0,
        Some(room) => room.saturating_sub(CLAIM_ROOM).min(MOST_PERMITS),
        None => MOST_PERMITS,
    };
    let leftover = memory.allowances.tokens(name, now);
    let tokens = match limits.rate_per_second {
        Some(_) if permits > 0 => {
            let spare = pace.tokens - f64::from(CLAIM_ROOM).max(limits.bucket() / 2.0);
            spare.floor().clamp(0.0, (f64::from(MOST_PERMITS) - leftover).max(0.0))
        }
        _ => 0.0,
    };
    pace.tokens -= tokens;
    // Held back from the bucket until spent or lapsed: what this process holds ahead now.
    let ahead = if permits == 0 { 0.0 } else { leftover + tokens };
    let until = now.saturating_add(ALLOWANCE_MS);
    if permits == 0 {
        // None: this process's rows count as leased rows alone (its commits spending the old one end first).
        tx.execute(DROP, vec![name.into(), me.into()]).await?;
    } else {
        // Never below what this process has in flight, its commits in progress included.
        let recorded = permits.max(shares.mine);
        #[allow(clippy::cast_possible_truncation, reason = "whole tokens, at most a few thousand")]
        let ahead_whole = ahead.ceil() as i64;
        let args = vec![name.into(), me.into(), i64::from(recorded).into(), ahead_whole.into(), until.into()];
        tx.execute(KEEP, args).await?;
    }
    memory.allowances.with(name, |local| {
        local.permits = permits;
        local.until = until;
        // Dropped with the allowance: tokens held back no more may not be spent.
        local.tokens = limits.rate_per_second.map(|_| ahead);
    });
    Ok(tokens > 0.0)
}

/// Commits of this process in progress that spend allowances: released
/// (counted no more in memory) when dropped, after the commit.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    memory: Option<Arc<Memory>>,
    held: Vec<(String, u32)>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(memory) = &self.memory {
            for (name, n) in self.held.drain(..) {
                memory.allowances.with(&name, |local| local.pending = local.pending.saturating_sub(n));
            }
        }
    }
}

/// Spends up to `want` of `me`'s allowance of connection `name` in the
/// commit `tx` at `now`; returns how many, held in `pending` until that
/// commit ends.
pub(crate) async fn spend(
    tx: &mut Tx,
    memory: &Arc<Memory>,
    name: &str,
    want: u32,
    me: &str,
    now: i64,
    pending: &mut Pending,
) -> Result<u32, StoreError> {
    let Some((permits, before)) = memory.allowances.with(name, |local| {
        (local.until > now && local.permits > 0 && want > 0).then(|| {
            let before = local.pending;
            local.pending = local.pending.saturating_add(want);
            (local.permits, before)
        })
    }) else {
        return Ok(0);
    };
    pending.memory.get_or_insert_with(|| Arc::clone(memory));
    pending.held.push((name.to_owned(), want));
    let args = vec![name.into(), me.into(), now.into()];
    let (recorded, leased): (Option<i64>, i64) = match tx.fetch_optional(SPEND_PG, args).await? {
        Some(row) => (row.get(0)?, row.get(1)?),
        None => (None, 0),
    };
    let used = u32::try_from(leased).unwrap_or(u32::MAX).saturating_add(before);
    let mut allowed = match recorded {
        // Lapsed and removed by another process, or never recorded: nothing.
        None => 0,
        Some(recorded) => permits.min(u32::try_from(recorded).unwrap_or(0)).saturating_sub(used).min(want),
    };
    memory.allowances.with(name, |local| {
        if let Some(tokens) = &mut local.tokens {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped whole tokens")]
            let whole = (*tokens + 1e-9).floor().clamp(0.0, f64::from(u32::MAX)) as u32;
            allowed = allowed.min(whole);
            *tokens -= f64::from(allowed);
        }
        // What is not spent is not pending.
        local.pending = local.pending.saturating_sub(want - allowed);
    });
    if let Some(last) = pending.held.last_mut() {
        last.1 = allowed;
    }
    Ok(allowed)
}
