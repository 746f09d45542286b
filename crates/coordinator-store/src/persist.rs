//! Actions → SQL: what each decided [`Action`] writes, inside the event's
//! transaction, on either backend.
//!
//! [`writes`] is the one table of the mapping: an exhaustive `match` over
//! `Action` (no `_ =>` arm, so a new action breaks the build here). Actions that
//! only change the snapshot write no row of their own; the snapshot itself is
//! written by the caller with the run row. This module must not decide
//! anything, read a clock, or touch the run row.
//!
//! Deletes that match no row are not stale: the machine may end work the store
//! never queued (a `RecordEffect` for a call settled by a receipt, a
//! `ResolveWait` of a wait-until, which has no observation or wait row).
//! Staleness is caught by the run row's version, which every apply checks.
//!
//! A transaction that queues work or sets a timer also notifies other
//! processes ([`wakeups::notify`](crate::wakeups::notify), once, on PostgreSQL; sent after commit by [`db::notify::Announcer`](crate::db::notify::Announcer)).
//!
//! Audit entries are not written here: [`persist`] returns them, and the
//! caller writes them ([`audit::append`](crate::audit::append)) with the run row, as pending entries
//! the sealer chains after commit. `batch` groups the same writes of many
//! runs' decisions into set-based statements.
//!
//! A queued row's lane and connection come from the decision, not the
//! action ([`decision_writes`]): a row of a step the decision lists in
//! `Decision::lanes` is written in that lane, any other without one; a row
//! of a step it lists in `Decision::connections` names that connection
//! (which a pause holds back, [`connections`](crate::connections)); queueing
//! a row again sets both afresh.

use coordinator_core::machine::action::{Action, AuditKind};
use coordinator_core::machine::event::Timer;

use crate::audit::Line;
use crate::db::{Arg, Tx};
use crate::types::WorkKind;
use crate::{StoreError, wakeups};

/// One row-level write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write<'a> {
    /// Upsert the outbox row of (step, kind), clearing any lease and its claim
    /// count; due at once when `not_before` is `None`; in `lane` (a remote
    /// connection's), or served in-process when `None`; its request goes to
    /// connection `conn` (`None`: unknown to the store).
    QueueWork {
        step: &'a str,
        kind: WorkKind,
        attempt: i64,
        not_before: Option<i64>,
        lane: Option<&'a str>,
        conn: Option<&'a str>,
    },
    /// Delete the outbox row of (step, kind); only with this attempt when given.
    FinishWork { step: &'a str, kind: WorkKind, attempt: Option<i64> },
    /// Upsert a timer, clearing any lease.
    SetTimer { timer: &'a Timer, due_at: i64 },
    /// Delete a timer.
    ClearTimer { timer: &'a Timer },
    /// Record the completion reference an open wait-for observes.
    OpenWait { step: &'a str, reference: &'a str },
    /// Forget a wait's reference (it is resolved).
    CloseWait { step: &'a str },
    /// Delete every outbox, timer and wait row of the run.
    EndWork,
    /// Append an audit entry (returned by [`persist`], written by the caller).
    Journal { kind: AuditKind, step: Option<&'a str>, detail: &'a str },
}

/// A timer due this far (ms) or further after its commit wakes no worker:
/// every worker looks for due work at least this often (its longest sleep
/// without a claim round, the service's `hints::SWEEP`), and the round that
/// finds the timer sleeps until it is due. Without this every admission
/// (which sets the run's deadline, days away) woke every worker for nothing.
pub const TIMER_WAKE_HORIZON_MS: i64 = 2_000;

/// Whether a timer due at `due_at`, set by a commit at `at`, wakes workers
/// (due within [`TIMER_WAKE_HORIZON_MS`]).
pub fn timer_wakes(due_at: i64, at: i64) -> bool {
    due_at < at.saturating_add(TIMER_WAKE_HORIZON_MS)
}

impl<'a> Write<'a> {
    /// The audit entry of a `Journal` write (`None` for every other write).
    pub(crate) fn journal_line(&self) -> Option<Line<'a>> {
        match self {
            Write::Journal { kind, step, detail } => {
                Some(Line { kind: audit_kind(*kind), step: step.map(Into::into), detail: (*detail).into() })
            }
            _ => None,
        }
    }

    /// Whether the write, committed at `at`, makes something claimable soon
    /// (work queued, a timer set due within [`TIMER_WAKE_HORIZON_MS`]): what
    /// wakes workers.
    pub(crate) fn wakes(&self, at: i64) -> bool {
        match self {
            Write::QueueWork { .. } => true,
            Write::SetTimer { due_at, .. } => timer_wakes(*due_at, at),
            _ => false,
        }
    }
}

/// Whether committing `actions` at `at` queues work or sets a timer due
/// soon — what a transaction notifies other processes of, and what the
/// committing process wakes its own worker for.
pub fn wakes_workers(actions: &[Action], at: i64) -> bool {
    actions.iter().flat_map(writes).any(|w| w.wakes(at))
}

/// The writes of one action.
pub(crate) fn writes(action: &Action) -> Vec<Write<'_>> {
    use Write::*;
    match action {
        Action::Dispatch { step, attempt, not_before } => {
            vec![QueueWork {
                step,
                kind: WorkKind::Attempt,
                attempt: i64::from(*attempt),
                not_before: Some(not_before.0),
                lane: None,
                conn: None,
            }]
        }
        Action::RecordEffect { step, attempt, .. } => vec![
            FinishWork { step, kind: WorkKind::Attempt, attempt: Some(i64::from(*attempt)) },
            // A found receipt settles the call through RecordEffect: its lookup is done too.
            FinishWork { step, kind: WorkKind::Receipt, attempt: None },
        ],
        // A receipt lookup has no attempt of its own; its lease owner alone fences it.
        Action::RequestReceipt { step } => {
            vec![QueueWork { step, kind: WorkKind::Receipt, attempt: 0, not_before: None, lane: None, conn: None }]
        }
        Action::RecordReceipt { step, .. } => vec![FinishWork { step, kind: WorkKind::Receipt, attempt: None }],
        Action::Observe { step, seq, at } => {
            vec![QueueWork {
                step,
                kind: WorkKind::Observation,
                attempt: i64::from(*seq),
                not_before: Some(at.0),
                lane: None,
                conn: None,
            }]
        }
        Action::RecordObservation { step, .. } => {
            vec![FinishWork { step, kind: WorkKind::Observation, attempt: None }]
        }
        Action::StartWait { step, reference, .. } => vec![OpenWait { step, reference }],
        Action::ResolveWait { step, .. } => {
            vec![FinishWork { step, kind: WorkKind::Observation, attempt: None }, CloseWait { step }]
        }
        Action::ScheduleTimer { timer, at } => vec![SetTimer { timer, due_at: at.0 }],
        Action::CancelTimer { timer } => vec![ClearTimer { timer }],
        Action::EndRun { .. } => vec![EndWork],
        Action::Audit { kind, step, detail } => vec![Journal { kind: *kind, step: step.as_deref(), detail }],
        Action::EnterStep { .. }
        | Action::PrepareCommand { .. }
        | Action::StartTimer { .. }
        | Action::EnterAttention { .. }
        | Action::LeaveAttention
        | Action::RequestCancel { .. }
        | Action::PlaceHold
        | Action::ReleaseHold => Vec::new(),
    }
}

/// The writes of a decision's actions, in order, each queued row in the lane
/// `lanes` lists for its step and naming the connection `connections` lists
/// for it (none when the step is not listed).
pub(crate) fn decision_writes<'a>(
    actions: &'a [Action],
    lanes: &'a [(String, String)],
    connections: &'a [(String, String)],
) -> Vec<Write<'a>> {
    let mut all: Vec<Write<'a>> = actions.iter().flat_map(writes).collect();
    let of = |list: &'a [(String, String)], step: &str| {
        list.iter().find(|(listed, _)| listed == step).map(|(_, named)| named.as_str())
    };
    if !lanes.is_empty() || !connections.is_empty() {
        for write in &mut all {
            if let Write::QueueWork { step, lane, conn, .. } = write {
                *lane = of(lanes, step);
                *conn = of(connections, step);
            }
        }
    }
    all
}

/// The spelling of an audit kind in the `kind` column.
pub(crate) fn audit_kind(kind: AuditKind) -> &'static str {
    match kind {
        AuditKind::Admission => "admission",
        AuditKind::Decision => "decision",
        AuditKind::Dispatch => "dispatch",
        AuditKind::Classification => "classification",
        AuditKind::Operator => "operator",
        AuditKind::Hold => "hold",
    }
}

/// The canonical JSON of a timer: its key in the `timers` table.
pub(crate) fn timer_key(timer: &Timer) -> Result<String, StoreError> {
    serde_json_canonicalizer::to_string(timer).map_err(|e| StoreError::Corrupt(format!("timer {timer:?}: {e}")))
}

/// Reads a timer key back.
pub(crate) fn parse_timer(key: &str) -> Result<Timer, StoreError> {
    serde_json::from_str(key).map_err(|e| StoreError::Corrupt(format!("timer {key}: {e}")))
}

const QUEUE_WORK: &str = "INSERT INTO outbox (run_id, step, kind, attempt, not_before, lease_owner, lease_until, \
     claims, lane, conn) VALUES ($1, $2, $3, $4, $5, NULL, NULL, 0, $6, $7) \
     ON CONFLICT (run_id, step, kind) DO UPDATE SET attempt = excluded.attempt, \
     not_before = excluded.not_before, lease_owner = NULL, lease_until = NULL, claims = 0, lane = excluded.lane, \
     conn = excluded.conn";
const FINISH_WORK: &str = "DELETE FROM outbox WHERE run_id = $1 AND step = $2 AND kind = $3";
const FINISH_ATTEMPT: &str = "DELETE FROM outbox WHERE run_id = $1 AND step = $2 AND kind = $3 AND attempt = $4";
const SET_TIMER: &str = "INSERT INTO timers (run_id, timer, due_at, lease_owner, lease_until) \
     VALUES ($1, $2, $3, NULL, NULL) \
     ON CONFLICT (run_id, timer) DO UPDATE SET due_at = excluded.due_at, lease_owner = NULL, lease_until = NULL";
const CLEAR_TIMER: &str = "DELETE FROM timers WHERE run_id = $1 AND timer = $2";
const END_OUTBOX: &str = "DELETE FROM outbox WHERE run_id = $1";
const END_TIMERS: &str = "DELETE FROM timers WHERE run_id = $1";
const OPEN_WAIT: &str = "INSERT INTO waits (run_id, step, reference) VALUES ($1, $2, $3) \
     ON CONFLICT (run_id, step) DO UPDATE SET reference = excluded.reference";
const CLOSE_WAIT: &str = "DELETE FROM waits WHERE run_id = $1 AND step = $2";
const END_WAITS: &str = "DELETE FROM waits WHERE run_id = $1";

/// Persists every action of a decision, in order, inside `tx` (queued rows
/// in the lanes `lanes` lists, naming `connections`, [`decision_writes`]); notifies other
/// processes once if any of them queued work or set a timer. Returns the
/// decision's audit entries, in order, for the caller to write.
pub(crate) async fn persist<'a>(
    tx: &mut Tx,
    run_id: &str,
    at: i64,
    actions: &'a [Action],
    lanes: &'a [(String, String)],
    connections: &'a [(String, String)],
) -> Result<Vec<Line<'a>>, StoreError> {
    let mut wakes = false;
    let mut journal = Vec::new();
    for write in decision_writes(actions, lanes, connections) {
        wakes |= write.wakes(at);
        match write.journal_line() {
            Some(line) => journal.push(line),
            None => execute(tx, run_id, at, write).await?,
        }
    }
    if wakes {
        wakeups::notify(tx);
    }
    Ok(journal)
}

pub(crate) async fn execute(tx: &mut Tx, run_id: &str, at: i64, write: Write<'_>) -> Result<(), StoreError> {
    let run = Arg::id(run_id);
    match write {
        Write::QueueWork { step, kind, attempt, not_before, lane, conn } => {
            let not_before = not_before.unwrap_or(at);
            let args = vec![
                run,
                step.into(),
                kind.as_str().into(),
                attempt.into(),
                not_before.into(),
                lane.into(),
                conn.into(),
            ];
            tx.execute(QUEUE_WORK, args).await?;
        }
        Write::FinishWork { step, kind, attempt: None } => {
            tx.execute(FINISH_WORK, vec![run, step.into(), kind.as_str().into()]).await?;
        }
        Write::FinishWork { step, kind, attempt: Some(attempt) } => {
            tx.execute(FINISH_ATTEMPT, vec![run, step.into(), kind.as_str().into(), attempt.into()]).await?;
        }
        Write::SetTimer { timer, due_at } => {
            tx.execute(SET_TIMER, vec![run, timer_key(timer)?.into(), due_at.into()]).await?;
        }
        Write::ClearTimer { timer } => {
            tx.execute(CLEAR_TIMER, vec![run, timer_key(timer)?.into()]).await?;
        }
        Write::OpenWait { step, reference } => {
            tx.execute(OPEN_WAIT, vec![run, step.into(), reference.into()]).await?;
        }
        Write::CloseWait { step } => {
            tx.execute(CLOSE_WAIT, vec![run, step.into()]).await?;
        }
        Write::EndWork => {
            tx.execute(END_OUTBOX, vec![run.clone()]).await?;
            tx.execute(END_TIMERS, vec![run.clone()]).await?;
            tx.execute(END_WAITS, vec![run]).await?;
        }
        // Returned by `persist`, never executed.
        Write::Journal { .. } => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use coordinator_core::machine::time::Instant;

    use super::*;

    #[test]
    fn queued_work_and_timers_due_soon_wake_workers_and_a_distant_timer_does_not() {
        let at = 10_000;
        let timer = |due: i64| [Action::ScheduleTimer { timer: Timer::RunDeadline, at: Instant(due) }];
        assert!(wakes_workers(&timer(at), at), "due now");
        assert!(wakes_workers(&timer(at + TIMER_WAKE_HORIZON_MS - 1), at));
        assert!(!wakes_workers(&timer(at + TIMER_WAKE_HORIZON_MS), at), "found by a round before it is due");
        let queued = [Action::Dispatch { step: "s".into(), attempt: 1, not_before: Instant(at + 86_400_000) }];
        assert!(wakes_workers(&queued, at), "queued work always wakes (its lane's workers are told)");
        assert!(!wakes_workers(&[Action::CancelTimer { timer: Timer::RunDeadline }], at));
    }

    #[test]
    fn timer_keys_are_canonical_and_round_trip() {
        let timer = Timer::WaitTimeout { step: "wait-review".into() };
        let key = timer_key(&timer).unwrap_or_default();
        assert_eq!(key, r#"{"step":"wait-review","type":"wait-timeout"}"#);
        assert_eq!(parse_timer(&key).ok(), Some(timer));
    }

    #[test]
    fn snapshot_only_actions_write_nothing() {
        assert!(writes(&Action::LeaveAttention).is_empty());
        let dispatch = Action::Dispatch { step: "s".into(), attempt: 2, not_before: Instant(7) };
        assert_eq!(
            writes(&dispatch),
            vec![Write::QueueWork {
                step: "s",
                kind: WorkKind::Attempt,
                attempt: 2,
                not_before: Some(7),
                lane: None,
                conn: None
            }]
        );
    }

    #[test]
    fn queued_rows_take_the_lane_and_connection_of_their_step_only() {
        let actions = [
            Action::Dispatch { step: "s".into(), attempt: 1, not_before: Instant(7) },
            Action::RequestReceipt { step: "s".into() },
            Action::Dispatch { step: "t".into(), attempt: 1, not_before: Instant(7) },
        ];
        let lanes = vec![("s".to_owned(), "breg".to_owned()), ("u".to_owned(), "casework".to_owned())];
        let connections = vec![("s".to_owned(), "breg".to_owned()), ("t".to_owned(), "messaging".to_owned())];
        let laned: Vec<(Option<&str>, Option<&str>)> = decision_writes(&actions, &lanes, &connections)
            .iter()
            .map(|w| match w {
                Write::QueueWork { lane, conn, .. } => (*lane, *conn),
                _ => (Some("not queued"), None),
            })
            .collect();
        assert_eq!(laned, vec![(Some("breg"), Some("breg")), (Some("breg"), Some("breg")), (None, Some("messaging"))]);
    }

    #[test]
    fn waits_are_opened_and_closed_with_the_wait() {
        let start = Action::StartWait {
            step: "w".into(),
            reference: "ref".into(),
            started_at: Instant(1),
            interval_seconds: 30,
            timeout_at: Instant(2),
        };
        assert_eq!(writes(&start), vec![Write::OpenWait { step: "w", reference: "ref" }]);
        let resolve = Action::ResolveWait {
            step: "w".into(),
            resolution: coordinator_core::machine::action::WaitResolution::Completed,
            value: None,
        };
        assert!(writes(&resolve).contains(&Write::CloseWait { step: "w" }));
    }
}
