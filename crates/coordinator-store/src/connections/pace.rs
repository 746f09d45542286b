//! A connection's shared pace ([`Pace`]) in its row of `connections`: read
//! under the row's lock, changed by the pure rules of
//! [`coordinator_core::pace`], written back in the same transaction.
//!
//! An answer of the product changes the pace ([`Store::record_answer`]):
//! a `Retry-After` holds the connection for everyone, failures in a row open
//! its breaker, a healthy answer closes it. Opening and closing are journaled
//! (kind `connection`, no run, no actor) with why, never a value. A
//! connection at full pace with nothing to recover from is not written for a
//! healthy answer: the caller asks [`Store::pace_unsettled`] first, so the
//! steady state writes nothing.

use coordinator_core::pace::{Breaker, BreakerChange, BreakerSettings, Health, Limits, Pace};

use crate::audit::{self, Line};
use crate::db::{Dialect, Row, Tx};
use crate::{Store, StoreError, wakeups};

/// The audit kind of a breaker's change (no run), as of a pause.
const CONNECTION: &str = "connection";
/// Millionths: how `factor` and `tokens` are stored.
const MILLION: f64 = 1_000_000.0;

const ENSURE: &str = "INSERT INTO connections (name) VALUES ($1) ON CONFLICT (name) DO NOTHING";
/// The pace columns, in the order [`pace_of`] reads them.
macro_rules! pace_columns {
    () => {
        "hold_until, breaker, failures, breaker_since, probe_at, factor, tokens, refilled_at"
    };
}
pub(crate) use pace_columns;
const READ_PG: &str =
    concat!("SELECT ", pace_columns!(), ", paused_at IS NOT NULL FROM connections WHERE name = $1 FOR UPDATE");
const READ_SQLITE: &str =
    concat!("SELECT ", pace_columns!(), ", paused_at IS NOT NULL FROM connections WHERE name = $1");
const WRITE: &str = "UPDATE connections SET hold_until = $2, breaker = $3, failures = $4, breaker_since = $5, \
     probe_at = $6, factor = $7, tokens = $8, refilled_at = $9, breaker_why = COALESCE($10, breaker_why) \
     WHERE name = $1";

/// The pace part of a connection's state, as operators see it.
#[derive(Debug, Clone, PartialEq)]
pub struct PaceView {
    /// `closed`, `open` or `half-open`.
    pub breaker: &'static str,
    /// When the breaker opened (ms), while it is not closed.
    pub since: Option<i64>,
    /// Why it opened (a status or a transport failure, never a value).
    pub why: Option<String>,
    /// When the next probe may go (ms), while it is open.
    pub probe_at: Option<i64>,
    /// Nothing is sent before this instant (ms): a product's `Retry-After`.
    pub hold_until: i64,
    /// The slow-down, 1 (full pace) to 1/64.
    pub factor: f64,
    /// Failures in a row while closed.
    pub failures: u32,
}

impl Default for PaceView {
    /// A connection never called: closed, no hold, full pace.
    fn default() -> Self {
        PaceView { breaker: "closed", since: None, why: None, probe_at: None, hold_until: 0, factor: 1.0, failures: 0 }
    }
}

impl PaceView {
    /// Whether the pace is as a connection never called has it at `now`:
    /// closed, no failure, full pace, no hold.
    pub fn settled(&self, now: i64) -> bool {
        self.breaker == "closed" && self.failures == 0 && self.factor >= 1.0 && self.hold_until <= now
    }
}

/// The pace columns of a row, from `at` on ([`pace_columns`]' order).
pub(crate) fn pace_of(row: &Row, at: usize, limits: &Limits, now: i64) -> Result<Pace, StoreError> {
    let breaker: String = row.get(at + 1)?;
    let failures: i64 = row.get(at + 2)?;
    let since: Option<i64> = row.get(at + 3)?;
    let probe_at: Option<i64> = row.get(at + 4)?;
    let breaker = match breaker.as_str() {
        "closed" => Breaker::Closed { failures: u32::try_from(failures).unwrap_or(u32::MAX) },
        "open" => Breaker::Open { since: since.unwrap_or(now), probe_at: probe_at.unwrap_or(now) },
        "half-open" => Breaker::HalfOpen { since: since.unwrap_or(now) },
        other => return Err(StoreError::Corrupt(format!("connection breaker `{other}`"))),
    };
    let factor: i64 = row.get(at + 5)?;
    let tokens: Option<i64> = row.get(at + 6)?;
    let refilled_at: Option<i64> = row.get(at + 7)?;
    #[allow(clippy::cast_precision_loss, reason = "millionths of small numbers")]
    let (factor, tokens) = (factor as f64 / MILLION, tokens.map(|t| t as f64 / MILLION));
    Ok(Pace {
        tokens: tokens.unwrap_or_else(|| limits.bucket()),
        refilled_at: refilled_at.unwrap_or(now),
        factor,
        hold_until: row.get(at)?,
        breaker,
    })
}

/// What operators see of `pace` (with the breaker's `why` as stored).
pub(crate) fn view_of(pace: &Pace, why: Option<String>) -> PaceView {
    let (since, probe_at, failures) = match pace.breaker {
        Breaker::Closed { failures } => (None, None, failures),
        Breaker::Open { since, probe_at } => (Some(since), Some(probe_at), 0),
        Breaker::HalfOpen { since } => (Some(since), None, 0),
    };
    let open = !matches!(pace.breaker, Breaker::Closed { .. });
    PaceView {
        breaker: pace.breaker.as_str(),
        since,
        why: why.filter(|_| open),
        probe_at,
        hold_until: pace.hold_until,
        factor: pace.factor,
        failures,
    }
}

/// Locks connection `name`'s row (made when missing) and reads its pace.
pub(crate) async fn lock(tx: &mut Tx, name: &str, limits: &Limits, now: i64) -> Result<Pace, StoreError> {
    lock_paused(tx, name, limits, now).await.map(|(pace, _)| pace)
}

/// [`lock`], and whether an operator paused the connection: one statement
/// when the row exists (the steady state), two more the first time.
pub(crate) async fn lock_paused(
    tx: &mut Tx,
    name: &str,
    limits: &Limits,
    now: i64,
) -> Result<(Pace, bool), StoreError> {
    let sql = match tx.dialect() {
        Dialect::Pg => READ_PG,
        Dialect::Sqlite => READ_SQLITE,
    };
    let row = match tx.fetch_optional(sql, vec![name.into()]).await? {
        Some(row) => row,
        None => {
            tx.execute(ENSURE, vec![name.into()]).await?;
            match tx.fetch_optional(sql, vec![name.into()]).await? {
                Some(row) => row,
                None => return Err(StoreError::Corrupt(format!("connection {name} vanished as it was locked"))),
            }
        }
    };
    Ok((pace_of(&row, 0, limits, now)?, row.get(8)?))
}

/// Writes `pace` back to `name`'s row; `why` replaces the breaker's reason when given.
pub(crate) async fn write(tx: &mut Tx, name: &str, pace: &Pace, why: Option<&str>) -> Result<(), StoreError> {
    let (breaker, failures, since, probe_at) = match pace.breaker {
        Breaker::Closed { failures } => ("closed", i64::from(failures), None, None),
        Breaker::Open { since, probe_at } => ("open", 0, Some(since), Some(probe_at)),
        Breaker::HalfOpen { since } => ("half-open", 0, Some(since), None),
    };
    #[allow(clippy::cast_possible_truncation, reason = "millionths of small numbers")]
    let (factor, tokens) = ((pace.factor * MILLION).round() as i64, (pace.tokens * MILLION).round() as i64);
    let args = vec![
        name.into(),
        pace.hold_until.into(),
        breaker.into(),
        failures.into(),
        since.into(),
        probe_at.into(),
        factor.into(),
        tokens.into(),
        pace.refilled_at.into(),
        why.into(),
    ];
    tx.execute(WRITE, args).await?;
    Ok(())
}

impl Store {
    /// Takes in what an answer of connection `name`'s product at `now` says of
    /// its health (`why`: the status or transport failure, never a value):
    /// holds it for a `Retry-After`, counts a failure and opens the breaker
    /// after `breaker`'s failures in a row, closes it on a healthy answer.
    /// Journals an opening (from closed) or a closing, wakes every process when
    /// it closes. Returns the pace now, and that change if any.
    pub async fn record_answer(
        &self,
        name: &str,
        health: Health,
        breaker: &BreakerSettings,
        why: &str,
        now: i64,
    ) -> Result<(PaceView, Option<BreakerChange>), StoreError> {
        let mut tx = self.pool.begin_for(crate::db::Writer::Background).await?;
        let limits = self.limits_of(name);
        let mut pace = lock(&mut tx, name, &limits, now).await?;
        let was_closed = matches!(pace.breaker, Breaker::Closed { .. });
        // A failed probe opens the breaker again: not a change worth a journal line.
        let change = pace.answered(health, breaker, now).filter(|c| was_closed || *c == BreakerChange::Closed);
        let opened_why = match change {
            Some(BreakerChange::Opened) => Some(why),
            _ => None,
        };
        write(&mut tx, name, &pace, opened_why).await?;
        if let Some(change) = change {
            let detail = match change {
                BreakerChange::Opened => format!(
                    "connection {name}: breaker opened ({why}); one probe every {} s until an answer closes it",
                    breaker.probe_every_ms / 1000
                ),
                BreakerChange::Closed => format!("connection {name}: breaker closed ({why})"),
            };
            let line = Line { kind: CONNECTION, step: None, detail: detail.into() };
            audit::append(&mut tx, None, now, None, &[line]).await?;
            if change == BreakerChange::Closed {
                wakeups::notify(&mut tx);
            }
        }
        tx.commit().await?;
        let view = view_of(&pace, Some(why.to_owned()));
        self.remember_pace(name, &view, now);
        Ok((view, change))
    }

    /// Whether this process last knew connection `name`'s pace as not
    /// settled (an answer then changes it: a healthy one is worth writing).
    pub fn pace_unsettled(&self, name: &str) -> bool {
        self.connections.unsettled(name)
    }
}
