//! The leases of a PostgreSQL batch of reports (`batch`): read before its
//! decisions, held from its runs' update to its commit.
//!
//! A report may be applied only while its claim is still leased to the
//! reporting worker, and that must still hold when the batch commits: a
//! claimer in another process must not take the row meanwhile and do the
//! work again. The batch therefore
//! 1. reads which claims are still leased ([`leased`], no lock: it only
//!    keeps a lost lease's report out of the decisions), then, after the
//!    runs' rows were updated (their locks first, the order a single apply
//!    takes them in),
//! 2. holds each decided claim's row ([`hold`]): a claim whose decision
//!    finishes its own row (an answer recorded: the row's attempt deleted)
//!    is held by that delete, made under the lease (`lease_owner` and
//!    `attempt` in its `WHERE`); any other by `SELECT … FOR UPDATE`.
//!
//! If a row read as leased in 1 is not found in 2, its lease was taken in
//! between: [`hold`] fails and the batch fails as a whole (nothing written;
//! the caller applies the reports one by one, each with its own locks).
//!
//! Deleting instead of locking saves a WAL record per report (the lock's),
//! and the delete the decision would make anyway: [`Held`] names those rows
//! so the batch does not delete them again.

use std::collections::HashSet;

use crate::db::{Arg, Tx};
use crate::persist::{Write, timer_key};
use crate::types::{Claim, WorkItem, WorkKind};
use crate::{StoreError, claims};

macro_rules! leased_timers {
    ($lock:literal) => {
        concat!(
            "SELECT t.run_id FROM timers t \
             JOIN unnest($1::uuid[], $2::text[], $3::bigint[]) AS c(run_id, timer, due_at) \
             ON t.run_id = c.run_id AND t.timer = c.timer AND t.due_at = c.due_at \
             WHERE t.lease_owner = $4",
            $lock
        )
    };
}
macro_rules! leased_work {
    ($lock:literal) => {
        concat!(
            "SELECT o.run_id FROM outbox o \
             JOIN unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[]) AS c(run_id, step, kind, attempt) \
             ON o.run_id = c.run_id AND o.step = c.step AND o.kind = c.kind AND o.attempt = c.attempt \
             WHERE o.lease_owner = $5",
            $lock
        )
    };
}
const READ_TIMERS: &str = leased_timers!("");
const READ_WORK: &str = leased_work!("");
const LOCK_TIMERS: &str = leased_timers!(" FOR UPDATE OF t");
const LOCK_WORK: &str = leased_work!(" FOR UPDATE OF o");
const DELETE_WORK: &str = "DELETE FROM outbox o \
     USING unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[]) AS c(run_id, step, kind, attempt) \
     WHERE o.run_id = c.run_id AND o.step = c.step AND o.kind = c.kind AND o.attempt = c.attempt \
     AND o.lease_owner = $5";

/// The runs whose claim in `claims` is leased to `owner` (read, not locked).
pub(crate) async fn leased(tx: &mut Tx, claims: &[Claim], owner: &str) -> Result<HashSet<String>, StoreError> {
    let (timers, work) = columns(claims.iter())?;
    let mut leased = HashSet::new();
    if !timers.0.is_empty() {
        for row in tx.fetch_all(READ_TIMERS, timer_args(timers, owner)).await? {
            leased.insert(row.get::<String>(0)?);
        }
    }
    if !work.0.is_empty() {
        for row in tx.fetch_all(READ_WORK, work_args(work, owner)).await? {
            leased.insert(row.get::<String>(0)?);
        }
    }
    Ok(leased)
}

/// The outbox rows [`hold`] deleted, by run, step and kind: the batch must
/// not delete them again.
#[derive(Debug, Default)]
pub(crate) struct Held<'a> {
    deleted: HashSet<(&'a str, &'a str, WorkKind)>,
}

impl Held<'_> {
    /// Whether `write` of `run`'s decision deletes a row [`hold`] already
    /// deleted (the primary key is run, step and kind: nothing else can be
    /// in that row's place before the decision's inserts).
    pub(crate) fn done(&self, run: &str, write: &Write<'_>) -> bool {
        match write {
            Write::FinishWork { step, kind, .. } => self.deleted.contains(&(run, *step, *kind)),
            _ => false,
        }
    }
}

/// Whether a decision with `writes` (grouped: deletes before inserts)
/// deletes `item`'s own row, so that row can be held by deleting it.
pub(crate) fn finishes(item: &WorkItem, writes: &[Write<'_>]) -> bool {
    writes.iter().any(|w| {
        matches!(w, Write::FinishWork { step, kind, attempt }
            if *step == item.step && *kind == item.kind && attempt.is_none_or(|a| a == item.attempt))
    })
}

/// Holds the lease of every decided claim until commit: `decided` pairs each
/// claim with whether its decision finishes its own row. Fails as a whole
/// (`StoreError::LeaseLost`) when any was taken since [`leased`] read it.
pub(crate) async fn hold<'a>(tx: &mut Tx, decided: &[(&'a Claim, bool)], owner: &str) -> Result<Held<'a>, StoreError> {
    let finishing = decided.iter().filter(|(_, f)| *f).map(|(c, _)| *c);
    let locking = decided.iter().filter(|(_, f)| !*f).map(|(c, _)| *c);
    let mut held = Held::default();
    let lost = |claim: Option<&Claim>| StoreError::LeaseLost {
        what: format!(
            "a lease of this batch, taken since it was read ({})",
            claim.map_or_else(String::new, claims::describe)
        ),
    };
    let (_, work) = columns(finishing.clone())?;
    if !work.0.is_empty() {
        let expected = work.0.len();
        let deleted = tx.execute(DELETE_WORK, work_args(work, owner)).await?;
        if deleted != u64::try_from(expected).unwrap_or(u64::MAX) {
            return Err(lost(finishing.clone().next()));
        }
        for claim in finishing {
            if let Claim::Work(w) = claim {
                held.deleted.insert((w.run_id.as_str(), w.step.as_str(), w.kind));
            }
        }
    }
    let (timers, work) = columns(locking.clone())?;
    let (n_timers, n_work) = (timers.0.len(), work.0.len());
    let timers_held = n_timers == 0 || tx.fetch_all(LOCK_TIMERS, timer_args(timers, owner)).await?.len() == n_timers;
    let work_held = n_work == 0 || tx.fetch_all(LOCK_WORK, work_args(work, owner)).await?.len() == n_work;
    if !(timers_held && work_held) {
        return Err(lost(locking.clone().next()));
    }
    Ok(held)
}

/// Timer claims' (run, timer, due at) and work claims' (run, step, kind, attempt) columns.
type TimerColumns = (Vec<String>, Vec<String>, Vec<i64>);
type WorkColumns = (Vec<String>, Vec<String>, Vec<String>, Vec<i64>);

fn columns<'a>(claims: impl Iterator<Item = &'a Claim>) -> Result<(TimerColumns, WorkColumns), StoreError> {
    let mut timers: TimerColumns = Default::default();
    let mut work: WorkColumns = Default::default();
    for claim in claims {
        match claim {
            Claim::Timer(t) => {
                timers.0.push(t.run_id.clone());
                timers.1.push(timer_key(&t.timer)?);
                timers.2.push(t.due_at);
            }
            Claim::Work(w) => {
                work.0.push(w.run_id.clone());
                work.1.push(w.step.clone());
                work.2.push(w.kind.as_str().to_owned());
                work.3.push(w.attempt);
            }
        }
    }
    Ok((timers, work))
}

fn timer_args(c: TimerColumns, owner: &str) -> Vec<Arg> {
    vec![Arg::Ids(c.0), Arg::Texts(c.1), Arg::Ints(c.2), owner.into()]
}

fn work_args(c: WorkColumns, owner: &str) -> Vec<Arg> {
    vec![Arg::Ids(c.0), Arg::Texts(c.1), Arg::Texts(c.2), Arg::Ints(c.3), owner.into()]
}
