//! Schedules (docs/reference/project.md#schedules), kept in `schedules`
//! (migration 0026): one row per schedule of a workflow's active revision.
//!
//! - [`Store::sync_schedules`] moves a workflow's rows to its active
//!   revision: a schedule whose calendar text is unchanged keeps its next
//!   instant, its pause and its last firing; a new or changed one starts at
//!   the first instant its caller computed; one the revision no longer has is
//!   removed (journaled).
//! - [`Store::claim_schedules`] leases the due rows no live process works;
//!   [`Store::advance_schedule`] stores each move (fire, hold, skip) under
//!   the lease and the revision it was made for, with its journal line in the
//!   same transaction, so a process that lost either writes nothing.
//! - Pausing and resuming are journaled (kind `schedule`, no run, the
//!   operator as actor) when they change the row.

use crate::audit::{self, Line};
use crate::db::{Dialect, Writer};
use crate::{Store, StoreError};

/// The kind of a schedule's journal lines.
const SCHEDULE: &str = "schedule";
/// The most rows one claim leases.
const CLAIM_MOST: i64 = 64;

/// The columns [`row_of`] reads, in its order.
macro_rules! select_schedules {
    () => {
        "SELECT workflow, schedule_id, revision, next_at, pending_at, last_at, last_run_id, paused_at, paused_by, \
         pause_reason FROM schedules"
    };
}
const ALL: &str = concat!(select_schedules!(), " ORDER BY workflow, schedule_id");
const OF_WORKFLOW: &str = "SELECT schedule_id, revision FROM schedules WHERE workflow = $1";
const UPSERT: &str = "INSERT INTO schedules (workflow, schedule_id, revision, calendar, next_at) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workflow, schedule_id) DO UPDATE SET revision = excluded.revision, \
     calendar = excluded.calendar, \
     next_at = CASE WHEN schedules.calendar = excluded.calendar THEN schedules.next_at ELSE excluded.next_at END, \
     pending_at = CASE WHEN schedules.calendar = excluded.calendar THEN schedules.pending_at ELSE NULL END \
     WHERE schedules.revision <> excluded.revision";
const REMOVE: &str = "DELETE FROM schedules WHERE workflow = $1 AND schedule_id = $2";
/// Whether a row is due at `$2` (an instant reached, or one held pending),
/// unpaused, with a lease free, run out or `$1`'s own.
const DUE: &str = "SELECT schedule_id FROM schedules WHERE paused_at IS NULL \
     AND (next_at <= $2 OR pending_at IS NOT NULL) \
     AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until < $2) LIMIT 1";
const CLAIM_PG: &str = concat!(
    "UPDATE schedules SET lease_owner = $1, lease_until = $2 WHERE (workflow, schedule_id) IN (",
    "SELECT workflow, schedule_id FROM schedules WHERE paused_at IS NULL ",
    "AND (next_at <= $3 OR pending_at IS NOT NULL) ",
    "AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until < $3) ORDER BY next_at LIMIT $4 ",
    "FOR UPDATE SKIP LOCKED) RETURNING workflow, schedule_id, revision, next_at, pending_at, last_at, last_run_id, ",
    "paused_at, paused_by, pause_reason"
);
const CLAIM_SQLITE: &str = concat!(
    "UPDATE schedules SET lease_owner = $1, lease_until = $2 WHERE (workflow, schedule_id) IN (",
    "SELECT workflow, schedule_id FROM schedules WHERE paused_at IS NULL ",
    "AND (next_at <= $3 OR pending_at IS NOT NULL) ",
    "AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until < $3) ORDER BY next_at LIMIT $4) ",
    "RETURNING workflow, schedule_id, revision, next_at, pending_at, last_at, last_run_id, ",
    "paused_at, paused_by, pause_reason"
);
const ADVANCE: &str = "UPDATE schedules SET next_at = $5, pending_at = $6, last_at = COALESCE($7, last_at), \
     last_run_id = COALESCE($8, last_run_id) \
     WHERE workflow = $1 AND schedule_id = $2 AND lease_owner = $3 AND revision = $4 AND paused_at IS NULL \
     RETURNING schedule_id";
const RELEASE: &str = "UPDATE schedules SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1";
const PAUSE: &str = "UPDATE schedules SET paused_at = $3, paused_by = $4, pause_reason = $5 \
     WHERE workflow = $1 AND schedule_id = $2 AND paused_at IS NULL RETURNING schedule_id";
const RESUME: &str = "UPDATE schedules SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, next_at = $3 \
     WHERE workflow = $1 AND schedule_id = $2 AND paused_at IS NOT NULL RETURNING schedule_id";

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    /// The workflow.
    pub workflow: String,
    /// The schedule's id.
    pub id: String,
    /// The revision whose definition it fires.
    pub revision: String,
    /// The next nominal instant not yet fired or skipped (ms); `None` when
    /// the calendar has no more.
    pub next_at: Option<i64>,
    /// An instant held back by `overlap: one-pending`.
    pub pending_at: Option<i64>,
    /// The last instant fired and the run it admitted.
    pub last: Option<(i64, String)>,
    /// When it was paused, by whom and why.
    pub paused: Option<Paused>,
}

/// A pause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paused {
    /// When (ms).
    pub at: i64,
    /// The operator's subject.
    pub by: String,
    /// The operator's reason.
    pub reason: String,
}

/// A schedule of an active revision, as [`Store::sync_schedules`] takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSeed {
    /// The schedule's id.
    pub id: String,
    /// Its calendar's text (equal texts fire at the same instants).
    pub calendar: String,
    /// Its first instant from now, used when the row is new or its calendar changed.
    pub first_at: Option<i64>,
}

/// A move of one schedule, stored by [`Store::advance_schedule`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleMove<'a> {
    /// The next instant not yet fired or skipped.
    pub next_at: Option<i64>,
    /// The instant held pending, if any.
    pub pending_at: Option<i64>,
    /// The instant fired and its run, when the move fired one.
    pub fired: Option<(i64, &'a str)>,
    /// The journal line the move writes (skips), if any.
    pub line: Option<String>,
}

fn row_of(row: &crate::db::Row) -> Result<ScheduleRow, StoreError> {
    let last_at: Option<i64> = row.get(5)?;
    let last_run: Option<String> = row.get(6)?;
    let paused_at: Option<i64> = row.get(7)?;
    let paused_by: Option<String> = row.get(8)?;
    let reason: Option<String> = row.get(9)?;
    Ok(ScheduleRow {
        workflow: row.get(0)?,
        id: row.get(1)?,
        revision: row.get(2)?,
        next_at: row.get(3)?,
        pending_at: row.get(4)?,
        last: last_at.zip(last_run),
        paused: paused_at.map(|at| Paused {
            at,
            by: paused_by.unwrap_or_default(),
            reason: reason.unwrap_or_default(),
        }),
    })
}

impl Store {
    /// Moves `workflow`'s schedules to `revision` (its active one) with the
    /// schedules it declares; rows already at `revision` are left as they are.
    pub async fn sync_schedules(
        &self,
        workflow: &str,
        revision: &str,
        seeds: &[ScheduleSeed],
        at: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let stored = tx.fetch_all(OF_WORKFLOW, vec![workflow.into()]).await?;
        let mut lines = Vec::new();
        for row in &stored {
            let id: String = row.get(0)?;
            if !seeds.iter().any(|s| s.id == id) {
                tx.execute(REMOVE, vec![workflow.into(), id.as_str().into()]).await?;
                let detail = format!("schedule {id} of workflow {workflow} removed: revision {revision} has none");
                lines.push(Line { kind: SCHEDULE, step: None, detail: detail.into() });
            }
        }
        for seed in seeds {
            let args = vec![
                workflow.into(),
                seed.id.as_str().into(),
                revision.into(),
                seed.calendar.as_str().into(),
                seed.first_at.into(),
            ];
            tx.execute(UPSERT, args).await?;
        }
        audit::append(&mut tx, None, at, None, &lines).await?;
        tx.commit().await
    }

    /// The revisions `workflow`'s schedule rows fire, by schedule id.
    pub async fn schedule_revisions(&self, workflow: &str) -> Result<Vec<(String, String)>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let rows = tx.fetch_all(OF_WORKFLOW, vec![workflow.into()]).await?;
        rows.iter().map(|r| Ok((r.get(0)?, r.get(1)?))).collect()
    }

    /// Every schedule, by workflow and id.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRow>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let rows = tx.fetch_all(ALL, Vec::new()).await?;
        rows.iter().map(row_of).collect()
    }

    /// Whether some schedule is due at `now` for `owner` (a read, so an idle
    /// round writes nothing).
    pub async fn schedules_due(&self, owner: &str, now: i64) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let row = tx.fetch_optional(DUE, vec![owner.into(), now.into()]).await?;
        Ok(row.is_some())
    }

    /// Leases the schedules due at `now` that no live process works to
    /// `owner` until `until`.
    pub async fn claim_schedules(&self, owner: &str, now: i64, until: i64) -> Result<Vec<ScheduleRow>, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let sql = match tx.dialect() {
            Dialect::Pg => CLAIM_PG,
            Dialect::Sqlite => CLAIM_SQLITE,
        };
        let rows = tx.fetch_all(sql, vec![owner.into(), until.into(), now.into(), CLAIM_MOST.into()]).await?;
        let claimed = rows.iter().map(row_of).collect::<Result<Vec<_>, _>>()?;
        tx.commit().await?;
        Ok(claimed)
    }

    /// Stores one move of `schedule` made by `owner` for `revision`, with its
    /// journal line; `false` (nothing written) when the lease, the revision
    /// or the schedule's running state changed: stop working it.
    pub async fn advance_schedule(
        &self,
        schedule: &ScheduleRow,
        owner: &str,
        moved: &ScheduleMove<'_>,
        at: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let args = vec![
            schedule.workflow.as_str().into(),
            schedule.id.as_str().into(),
            owner.into(),
            schedule.revision.as_str().into(),
            moved.next_at.into(),
            moved.pending_at.into(),
            moved.fired.map(|(at, _)| at).into(),
            moved.fired.map(|(_, run)| run).into(),
        ];
        if tx.fetch_optional(ADVANCE, args).await?.is_none() {
            tx.abandon().await?;
            return Ok(false);
        }
        if let Some(detail) = &moved.line {
            let line = Line { kind: SCHEDULE, step: None, detail: detail.as_str().into() };
            audit::append(&mut tx, None, at, None, &[line]).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Gives back every schedule lease `owner` holds.
    pub async fn release_schedules(&self, owner: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        tx.execute(RELEASE, vec![owner.into()]).await?;
        tx.commit().await
    }

    /// Pauses schedule `id` of `workflow` (journaled with `reason`); whether
    /// it changed (a paused schedule stays as it is).
    pub async fn pause_schedule(
        &self,
        workflow: &str,
        id: &str,
        by: &str,
        reason: &str,
        at: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let args = vec![workflow.into(), id.into(), at.into(), by.into(), reason.into()];
        let changed = tx.fetch_optional(PAUSE, args).await?.is_some();
        if changed {
            let detail = format!("schedule {id} of workflow {workflow} paused: {reason}");
            audit::append(&mut tx, None, at, Some(by), &[Line { kind: SCHEDULE, step: None, detail: detail.into() }])
                .await?;
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Resumes schedule `id` of `workflow` from `next_at` (the instants it
    /// missed while paused are not fired), journaled with `reason`; whether it changed.
    pub async fn resume_schedule(
        &self,
        workflow: &str,
        id: &str,
        by: &str,
        reason: &str,
        next_at: Option<i64>,
        at: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let changed = tx.fetch_optional(RESUME, vec![workflow.into(), id.into(), next_at.into()]).await?.is_some();
        if changed {
            let detail = format!("schedule {id} of workflow {workflow} resumed: {reason}");
            audit::append(&mut tx, None, at, Some(by), &[Line { kind: SCHEDULE, step: None, detail: detail.into() }])
                .await?;
        }
        tx.commit().await?;
        Ok(changed)
    }
}
