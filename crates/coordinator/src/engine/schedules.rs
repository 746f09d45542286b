//! Schedules (docs/reference/project.md#schedules): runs admitted on the
//! calendar by [`Engine::fire_schedules`], a task of every `serve` and `dev`.
//!
//! Each round: the schedule rows are moved to each workflow's active
//! revision ([`Store::sync_schedules`], once per revision and process), the
//! due rows no live process works are leased, and each is worked move by move
//! ([`round::next_move`]): a firing admits with the idempotency key
//! `schedule:{id}:{instant}` under the owner `schedule:{workflow}/{id}`, then
//! the move is stored under the lease. A crash between the two repeats the
//! admission, which finds the run it admitted: one run per instant whatever
//! process fires it, however often.
//!
//! [`Store::sync_schedules`]: coordinator_store::Store::sync_schedules

use std::collections::HashSet;
use std::time::Duration;

use coordinator_core::machine::time::Instant;
use coordinator_core::model::workflow::Schedule;
use coordinator_core::schedule::round::{self, Move, Rules, Standing};
use coordinator_core::schedule::{calendar_of, calendar_text, catch_up_ms};
use coordinator_store::{ScheduleMove, ScheduleRow, ScheduleSeed};

use crate::auth::access::SCHEDULE_SUBJECT_PREFIX;
use crate::engine::error::EngineError;
use crate::engine::{AdmitRequest, Engine};

/// How long a round's lease lasts; a process that dies holding it is
/// replaced once it runs out.
const LEASE_MS: i64 = 30_000;
/// The pause between rounds.
const ROUND: Duration = Duration::from_millis(500);

/// The subject that owns the runs schedule `id` of `workflow` admits.
pub fn schedule_subject(workflow: &str, id: &str) -> String {
    format!("{SCHEDULE_SUBJECT_PREFIX}{workflow}/{id}")
}

/// The idempotency key of schedule `id`'s firing at nominal instant `at`.
pub fn firing_key(id: &str, at: i64) -> String {
    format!("schedule:{id}:{}", Instant(at).to_rfc3339())
}

/// Why a pause or resume of a schedule was refused before anything was written.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleRefusal {
    /// No active revision of the workflow has that schedule (`schedule.unknown`).
    #[error("workflow `{workflow}` has no schedule `{id}` in its active revision")]
    Unknown {
        /// The workflow.
        workflow: String,
        /// The schedule id.
        id: String,
    },
}

/// A schedule with its definition, for `GET /v1/schedules` and the console.
#[derive(Debug, Clone)]
pub struct ScheduleView {
    /// As stored.
    pub row: ScheduleRow,
    /// As the revision declares it.
    pub schedule: Schedule,
    /// The next firing on the schedule's wall clock (`2026-03-29 03:00:00 CEST (+02:00)`).
    pub next_local: Option<String>,
}

impl Engine {
    /// Fires schedules until the engine drains.
    pub async fn fire_schedules(&self) {
        if self.is_recovery_only() {
            return;
        }
        let mut synced: HashSet<String> = HashSet::new();
        while !self.is_draining() {
            if let Err(e) = self.schedule_round(&mut synced).await {
                tracing::warn!(error = %e, "a schedule round failed; trying again");
            }
            tokio::time::sleep(ROUND).await;
        }
        if let Err(e) = self.store.release_schedules(&self.owner).await {
            tracing::warn!(error = %e, "giving back the schedule leases failed; they run out by themselves");
        }
    }

    /// One round: sync, claim, work each claimed schedule.
    async fn schedule_round(&self, synced: &mut HashSet<String>) -> Result<(), EngineError> {
        for active in self.store.active_revisions().await? {
            if !synced.contains(&active.revision) {
                self.sync_schedules(&active.workflow, &active.revision).await?;
                synced.insert(active.revision);
            }
        }
        let now = self.now();
        if !self.store.schedules_due(&self.owner, now).await? {
            return Ok(());
        }
        for row in self.store.claim_schedules(&self.owner, now, now + LEASE_MS).await? {
            if self.is_draining() {
                break;
            }
            match self.work_schedule(row).await {
                Ok(()) => {}
                // Admissions are closed for now (a restore hold, a stop): said once by what closed them.
                Err(e @ (EngineError::RestoreHoldPlaced | EngineError::Draining | EngineError::RecoveryOnly)) => {
                    tracing::debug!(error = %e, "a schedule waits: admissions are closed for now");
                }
                Err(e) => tracing::warn!(error = %e, "firing a schedule failed; it stays due"),
            }
        }
        Ok(())
    }

    /// Moves `workflow`'s schedule rows to `revision`.
    async fn sync_schedules(&self, workflow: &str, revision: &str) -> Result<(), EngineError> {
        let wf = self.workflow(revision).await?;
        let now = self.now();
        let seeds = wf
            .definition
            .schedules
            .iter()
            .map(|s| ScheduleSeed {
                id: s.id.clone(),
                calendar: calendar_text(s),
                first_at: calendar_of(s).ok().and_then(|c| c.next_after(now)),
            })
            .collect::<Vec<_>>();
        self.store.sync_schedules(workflow, revision, &seeds, now).await?;
        Ok(())
    }

    /// Works one leased schedule until nothing is due or a move is not stored.
    async fn work_schedule(&self, row: ScheduleRow) -> Result<(), EngineError> {
        let wf = self.workflow(&row.revision).await?;
        let Some(schedule) = wf.schedule(&row.id).cloned() else { return Ok(()) };
        let calendar = calendar_of(&schedule).map_err(|e| EngineError::Corrupt(format!("schedule {}: {e}", row.id)))?;
        let rules = Rules {
            calendar: &calendar,
            overlap: schedule.overlap.unwrap_or_default(),
            catch_up_ms: catch_up_ms(&schedule),
        };
        let mut standing = Standing {
            next_at: row.next_at,
            pending_at: row.pending_at,
            previous_running: self.still_running(row.last.as_ref().map(|(_, run)| run.as_str())).await?,
        };
        loop {
            if self.is_draining() {
                return Ok(());
            }
            let now = self.now();
            let Some((step, after)) = round::next_move(rules, standing, now) else { return Ok(()) };
            let (fired_run, line) = match step {
                Move::Fire { at } => match self.fire(&row, &schedule, &wf, at).await? {
                    Ok(run) => (Some(run), None),
                    Err(why) => (None, Some(why)),
                },
                Move::Hold { at } => {
                    (None, Some(format!("{}: instant {} pending until the previous run ends", label(&row), rfc(at))))
                }
                Move::Skip { first, last, count, more, why } => {
                    let many = if more { format!("at least {count}") } else { count.to_string() };
                    let span = if first == last { rfc(first) } else { format!("{} to {}", rfc(first), rfc(last)) };
                    (None, Some(format!("{}: {many} instant(s) skipped, {span}: {}", label(&row), why.words())))
                }
            };
            let fired = match (step, &fired_run) {
                (Move::Fire { at }, Some(run)) => Some((at, run.as_str())),
                _ => None,
            };
            let moved = ScheduleMove { next_at: after.next_at, pending_at: after.pending_at, fired, line };
            if !self.store.advance_schedule(&row, &self.owner, &moved, now).await? {
                return Ok(());
            }
            let (result, count) = match step {
                Move::Fire { .. } if fired.is_some() => ("fired", 1),
                Move::Fire { .. } => ("skipped", 1),
                Move::Hold { .. } => ("held", 1),
                Move::Skip { count, .. } => ("skipped", count),
            };
            self.metrics().schedule_instants(&row.workflow, &row.id, result, count);
            // A firing whose input was refused started no run: the previous one still decides overlap.
            standing = match (step, fired_run) {
                (Move::Fire { .. }, None) => Standing { previous_running: standing.previous_running, ..after },
                _ => after,
            };
        }
    }

    /// Admits the run of instant `at`: `Ok(Ok(run id))`, or `Ok(Err(line))`
    /// when its input was refused (the instant is skipped with that line).
    /// An admission the deployment refuses for now (a restore hold, a
    /// stopping process, another revision activated) is an error: the
    /// instant stays due.
    async fn fire(
        &self,
        row: &ScheduleRow,
        schedule: &Schedule,
        wf: &coordinator_core::machine::compiled::Workflow,
        at: i64,
    ) -> Result<Result<String, String>, EngineError> {
        let input = match wf.schedule_input(schedule, at) {
            Ok(input) => input,
            Err(e) => return Ok(Err(format!("{}: instant {} skipped: {e}", label(row), rfc(at)))),
        };
        let request = AdmitRequest {
            workflow: row.workflow.clone(),
            revision: row.revision.clone(),
            input,
            idempotency_key: Some(firing_key(&row.id, at)),
            run_id: None,
            trace_parent: None,
        };
        match self.admit(request, &schedule_subject(&row.workflow, &row.id)).await {
            Ok(admitted) => {
                tracing::info!(workflow = %row.workflow, schedule = %row.id, run = %admitted.run_id, created = admitted.created, "schedule fired");
                Ok(Ok(admitted.run_id))
            }
            Err(EngineError::SearchKey(e)) => Ok(Err(format!("{}: instant {} skipped: {e}", label(row), rfc(at)))),
            Err(EngineError::InputInvalid { .. }) => Ok(Err(format!(
                "{}: instant {} skipped: the input does not match the input schema",
                label(row),
                rfc(at)
            ))),
            // Admitted before under another revision (a crash between a firing and its move, then an activation).
            Err(EngineError::KeyReused) => {
                Ok(Err(format!("{}: instant {} was admitted before, under another revision", label(row), rfc(at))))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether run `id` (if any) has not ended.
    async fn still_running(&self, id: Option<&str>) -> Result<bool, EngineError> {
        let Some(id) = id else { return Ok(false) };
        Ok(self.store.load(id).await?.is_some_and(|row| !row.state.is_terminal()))
    }

    /// Every schedule of an active revision, with its definition.
    ///
    /// # Errors
    /// A store failure, or a package that cannot be read.
    pub async fn schedules_view(&self) -> Result<Vec<ScheduleView>, EngineError> {
        let mut views = Vec::new();
        for row in self.store.schedules().await? {
            let wf = self.workflow(&row.revision).await?;
            let Some(schedule) = wf.schedule(&row.id).cloned() else { continue };
            let next_local = calendar_of(&schedule).ok().zip(row.next_at).map(|(c, at)| c.wall_clock(at));
            views.push(ScheduleView { row, schedule, next_local });
        }
        Ok(views)
    }

    /// The stored schedule `id` of `workflow`.
    async fn schedule_row(&self, workflow: &str, id: &str) -> Result<ScheduleRow, EngineError> {
        let unknown = || ScheduleRefusal::Unknown { workflow: workflow.to_owned(), id: id.to_owned() };
        let rows = self.store.schedules().await?;
        rows.into_iter().find(|r| r.workflow == workflow && r.id == id).ok_or_else(|| unknown().into())
    }

    /// Pauses schedule `id` of `workflow` for `by` with `reason`; whether it changed.
    ///
    /// # Errors
    /// [`ScheduleRefusal::Unknown`], or a store failure.
    pub async fn pause_schedule(&self, workflow: &str, id: &str, by: &str, reason: &str) -> Result<bool, EngineError> {
        self.schedule_row(workflow, id).await?;
        Ok(self.store.pause_schedule(workflow, id, by, reason, self.now()).await?)
    }

    /// Resumes schedule `id` of `workflow` from its first instant after now;
    /// whether it changed.
    ///
    /// # Errors
    /// [`ScheduleRefusal::Unknown`], or a store failure.
    pub async fn resume_schedule(&self, workflow: &str, id: &str, by: &str, reason: &str) -> Result<bool, EngineError> {
        let row = self.schedule_row(workflow, id).await?;
        let wf = self.workflow(&row.revision).await?;
        let now = self.now();
        let next = wf.schedule(id).and_then(|s| calendar_of(s).ok()).and_then(|c| c.next_after(now));
        Ok(self.store.resume_schedule(workflow, id, by, reason, next, now).await?)
    }
}

/// How journal lines name a schedule.
fn label(row: &ScheduleRow) -> String {
    format!("schedule {} of workflow {}", row.id, row.workflow)
}

fn rfc(ms: i64) -> String {
    Instant(ms).to_rfc3339()
}
