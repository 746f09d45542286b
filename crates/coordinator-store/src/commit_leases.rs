//! Eager dispatch: work a batch of reports queues is leased, in the same
//! transaction, to the worker that committed it
//! (docs/internals/engine.md#group-commit), so no claim round
//! — no `UPDATE` of the row, no second round trip — stands between a
//! decision and its next request.
//!
//! A queued row is leased this way only when a claim would take it at that
//! instant: due (`not_before` at or before the batch's instant), in no lane
//! (a remote connection's rows are offered to remote workers), and allowed by
//! the lease's [`WorkScope`] and the run's restore hold (a held run's
//! attempts and observations wait; its receipt lookups do not). The lease is
//! the claim's: the same owner, lease end and claim count (1, so the row is
//! not `reclaimed`), fenced and finished as any claim. Nothing is leased
//! while the restore fence holds, and never more rows than the lease's
//! [`EagerLease::rows`] (the room the worker has for work in hand): what
//! is left over is queued unleased, for a claim.
//!
//! On PostgreSQL the row is inserted leased (`batch`: the grouped queue
//! statement takes an eager flag per row and returns what it leased); on
//! SQLite one claim of the applied runs' due rows follows the batch's
//! writes, in the same transaction. This module must not decide anything.

use crate::StoreError;
use crate::claims::{in_work_order, work_row};
use crate::db::{Arg, Row, Tx};
use crate::persist::Write;
use crate::types::{ClaimedRun, EagerLease, WorkItem, WorkKind, WorkScope};

/// What a batch of reports did: per report, the run's new version or why
/// it was not applied; and the work it leased to its worker (eager
/// dispatch), each with its run as committed.
#[derive(Debug, Default)]
pub struct Batched {
    /// Per report, in order.
    pub results: Vec<Result<i64, StoreError>>,
    /// The queued rows leased to the worker, in claim order.
    pub leased: Vec<(WorkItem, ClaimedRun)>,
}

/// Whether `write` queues a row a claim at `at` would take under `lease`,
/// for a run `held` (or not) once the decision committed.
pub(crate) fn leases(write: &Write<'_>, at: i64, held: bool, lease: Option<EagerLease>) -> bool {
    match (write, lease) {
        (Write::QueueWork { kind, not_before, lane: None, .. }, Some(lease)) => {
            claimable(*kind, *not_before, at, held, lease)
        }
        _ => false,
    }
}

/// The connection of `write`'s row when it is queued in a lane and would
/// be leased under `lease` otherwise ([`leases`]'s other rules): leased at
/// once only as far as a limited connection's pace grants
/// (`connections::eager`); a remote connection's rows never are.
pub(crate) fn leases_in_lane<'a>(write: &Write<'a>, at: i64, held: bool, lease: Option<EagerLease>) -> Option<&'a str> {
    match (write, lease) {
        (Write::QueueWork { kind, not_before, lane: Some(_), conn: Some(conn), .. }, Some(lease)) => {
            claimable(*kind, *not_before, at, held, lease).then_some(*conn)
        }
        _ => None,
    }
}

/// Whether a claim at `at` under `lease` takes a row of `kind` due at
/// `not_before` (none: at once) of a run `held` or not.
fn claimable(kind: WorkKind, not_before: Option<i64>, at: i64, held: bool, lease: EagerLease) -> bool {
    let due = not_before.is_none_or(|t| t <= at);
    due && (kind == WorkKind::Receipt || (!held && lease.scope == WorkScope::All))
}

/// SQLite: leases at most `$6` of the due unleased rows without a lane of
/// the runs in `$3` (a JSON array of run ids), in claim order, as a claim of
/// those runs alone would (`$1` owner, `$2` lease end, `$4` now, `$5` 1 for
/// receipts only), returning them as a claim does.
const LEASE_QUEUED_SQLITE: &str = "UPDATE outbox SET lease_owner = $1, lease_until = $2, claims = claims + 1 \
     WHERE (run_id, step, kind) IN (SELECT o.run_id, o.step, o.kind FROM outbox o JOIN runs r ON r.id = o.run_id \
     WHERE o.run_id IN (SELECT j.value FROM json_each($3) AS j) \
     AND o.lease_until IS NULL AND o.lane IS NULL AND o.not_before <= $4 \
     AND ($5 = 0 OR o.kind = 'receipt') AND (o.kind = 'receipt' OR NOT r.held) AND \
     NOT EXISTS (SELECT 1 FROM connections pc WHERE pc.name = o.conn AND (pc.paused_at IS NOT NULL \
     OR pc.hold_until > $4 OR pc.breaker <> 'closed')) \
     ORDER BY o.not_before, o.run_id, o.step, o.kind LIMIT $6) \
     RETURNING run_id, step, kind, attempt, not_before, claims, \
     (SELECT r.revision FROM runs r WHERE r.id = outbox.run_id), \
     (SELECT r.snapshot FROM runs r WHERE r.id = outbox.run_id), \
     (SELECT r.trace_parent FROM runs r WHERE r.id = outbox.run_id), \
     (SELECT r.snapshot_base FROM runs r WHERE r.id = outbox.run_id)";

/// SQLite: leases what the decisions of `runs` left due, at most
/// `lease.rows`, in one statement after the batch's writes (see the module doc).
pub(crate) async fn lease_runs_sqlite(
    tx: &mut Tx,
    runs: &[&str],
    owner: &str,
    at: i64,
    lease: EagerLease,
) -> Result<Vec<(WorkItem, ClaimedRun)>, StoreError> {
    if runs.is_empty() || lease.rows == 0 {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(runs).map_err(|e| StoreError::Corrupt(format!("run ids: {e}")))?;
    let receipts_only = i64::from(lease.scope == WorkScope::ReceiptsOnly);
    let most = i64::try_from(lease.rows).unwrap_or(i64::MAX);
    let args: Vec<Arg> =
        vec![owner.into(), lease.until.into(), Arg::Text(ids), at.into(), receipts_only.into(), most.into()];
    let rows = tx.fetch_all(LEASE_QUEUED_SQLITE, args).await?;
    Ok(in_work_order(rows.iter().map(|row| work_row(row, 0)).collect::<Result<_, _>>()?))
}

/// The run of a leased row, as its batch (or admission) committed it.
pub(crate) struct Committed<'a> {
    pub(crate) revision: &'a str,
    pub(crate) snapshot: &'a [u8],
    pub(crate) trace_parent: Option<&'a str>,
}

impl Committed<'_> {
    /// The run as a claim of its row due at `due_at` would return it.
    pub(crate) fn claimed(&self, due_at: i64) -> ClaimedRun {
        ClaimedRun {
            revision: self.revision.to_owned(),
            snapshot: self.snapshot.to_vec(),
            trace_parent: self.trace_parent.map(str::to_owned),
            due_at,
        }
    }
}

/// PostgreSQL: a row the grouped queue statement returned (run, step, kind,
/// attempt, not_before, claims, lease owner), when it was leased; `run` finds
/// its run as committed.
pub(crate) fn leased_row<'a>(
    row: &Row,
    run: impl Fn(&str) -> Option<Committed<'a>>,
) -> Result<Option<(i64, WorkItem, ClaimedRun)>, StoreError> {
    if row.get::<Option<String>>(6)?.is_none() {
        return Ok(None);
    }
    let run_id: String = row.get(0)?;
    let Some(committed) = run(&run_id) else {
        return Err(StoreError::Corrupt(format!("a leased row of run {run_id}, which the batch did not decide")));
    };
    let kind: String = row.get(2)?;
    let kind = WorkKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("outbox kind `{kind}`")))?;
    let claims: i64 = row.get(5)?;
    let due_at: i64 = row.get(4)?;
    let item = WorkItem { run_id, step: row.get(1)?, kind, attempt: row.get(3)?, reclaimed: claims > 1, claims };
    Ok(Some((due_at, item, committed.claimed(due_at))))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Option<EagerLease> = Some(EagerLease { scope: WorkScope::All, until: 99, rows: 9 });
    const RECEIPTS: Option<EagerLease> = Some(EagerLease { scope: WorkScope::ReceiptsOnly, until: 99, rows: 9 });

    fn queue(kind: WorkKind, not_before: Option<i64>, lane: Option<&str>) -> Write<'_> {
        Write::QueueWork { step: "s", kind, attempt: 1, not_before, lane, conn: None }
    }

    #[test]
    fn only_what_a_claim_would_take_now_is_leased() {
        let now = queue(WorkKind::Attempt, Some(10), None);
        assert!(leases(&now, 10, false, ALL));
        assert!(leases(&queue(WorkKind::Attempt, None, None), 10, false, ALL), "due at the instant");
        assert!(!leases(&now, 10, false, None), "no lease offered");
        assert!(!leases(&queue(WorkKind::Attempt, Some(11), None), 10, false, ALL), "a backoff waits");
        assert!(!leases(&queue(WorkKind::Attempt, Some(10), Some("breg")), 10, false, ALL), "a lane's row is offered");
        assert!(!leases(&now, 10, true, ALL), "a held run's attempt waits");
        assert!(!leases(&now, 10, false, RECEIPTS), "recovery-only takes receipts alone");
        let receipt = queue(WorkKind::Receipt, None, None);
        assert!(leases(&receipt, 10, true, ALL) && leases(&receipt, 10, false, RECEIPTS));
        let timer = coordinator_core::machine::event::Timer::RunDeadline;
        assert!(!leases(&Write::SetTimer { timer: &timer, due_at: 1 }, 10, false, ALL));
    }
}
