//! The restore hold across a deployment (docs/reference/recovery.md#the-restore-hold).
//!
//! Placing it writes the deployment's flag first (admissions are refused from
//! then on), then puts every unfinished run under the hold with the
//! machine's [`RestoreHoldPlaced`] (each run in its own transaction, like any
//! event): the run goes to `attention` with reason `restore-hold`, its timers
//! stop, and an attempt in flight becomes an unknown effect. Releasing sends
//! [`RestoreHoldReleased`] to every held run, then removes the flag. Both are
//! idempotent and can be repeated after a crash half-way; `serve` finishes a
//! placement at start while the flag is placed, so no run escapes it.
//!
//! This module decides nothing itself: the machine does, run by run. The
//! operator who places or releases the hold is the actor of every audit
//! entry it causes (the deployment's and each run's); a start that finishes
//! a placement acts as the coordinator (no actor).
//!
//! [`RestoreHoldPlaced`]: coordinator_core::machine::event::Event::RestoreHoldPlaced
//! [`RestoreHoldReleased`]: coordinator_core::machine::event::Event::RestoreHoldReleased

use coordinator_core::machine::event::Event;
use coordinator_store::{Cursor, RunFilter};

use crate::engine::Engine;
use crate::engine::error::EngineError;

/// Runs read per page while placing or releasing.
const PAGE: u32 = 200;

/// The restore hold as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldStatus {
    /// Whether the hold is placed.
    pub placed: bool,
    /// When it was placed (ms since the epoch).
    pub placed_at: Option<i64>,
    /// Who placed it.
    pub placed_by: Option<String>,
    /// Why: the operator's reason, or the fence's evidence when the fence placed it.
    pub reason: Option<String>,
    /// How many runs are held now.
    pub held_runs: u64,
}

impl Engine {
    /// The restore hold and how many runs it holds.
    ///
    /// # Errors
    /// A store failure.
    pub async fn restore_hold(&self) -> Result<HoldStatus, EngineError> {
        let hold = self.store.hold().await?;
        let mut held_runs = 0;
        self.each_run(|row| {
            held_runs += u64::from(row.held);
            false
        })
        .await?;
        Ok(HoldStatus {
            placed: hold.is_some(),
            placed_at: hold.as_ref().map(|h| h.placed_at),
            placed_by: hold.as_ref().map(|h| h.placed_by.clone()),
            reason: hold.and_then(|h| h.reason),
            held_runs,
        })
    }

    /// Places the restore hold (as `by`, for `reason`) on the deployment and every unfinished run.
    ///
    /// # Errors
    /// A store or seal failure; runs held before it stay held.
    pub async fn place_restore_hold(&self, by: &str, reason: Option<&str>) -> Result<HoldStatus, EngineError> {
        self.store.place_hold(self.now(), by, reason).await?;
        tracing::warn!(actor = by, "restore hold placed: nothing is dispatched until it is released");
        self.hold_unfinished_runs(Some(by)).await?;
        self.restore_hold().await
    }

    /// Puts every unfinished run that is not held yet under the hold (as `by`, when an operator asked).
    pub(crate) async fn hold_unfinished_runs(&self, by: Option<&str>) -> Result<(), EngineError> {
        let mut todo = Vec::new();
        self.each_run(|row| {
            if !row.held && !row.state.is_terminal() {
                todo.push(row.id.clone());
            }
            false
        })
        .await?;
        for id in todo {
            self.apply_hold_event(&id, &Event::RestoreHoldPlaced, by).await?;
        }
        Ok(())
    }

    /// Releases every held run (as `by`), then the deployment's hold (journaled with `reason`).
    ///
    /// # Errors
    /// A store or seal failure; the flag stays placed until every run is released.
    pub async fn release_restore_hold(&self, by: &str, reason: Option<&str>) -> Result<HoldStatus, EngineError> {
        let mut todo = Vec::new();
        self.each_run(|row| {
            if row.held {
                todo.push(row.id.clone());
            }
            false
        })
        .await?;
        for id in todo {
            self.apply_hold_event(&id, &Event::RestoreHoldReleased, Some(by)).await?;
        }
        self.store.release_hold(self.now(), by, reason).await?;
        // The operator reviewed the database as it is: the fence takes it from here on (every process).
        self.store.accept_database(self.now()).await?;
        tracing::info!(actor = by, "restore hold released");
        self.wake.notify_one();
        self.restore_hold().await
    }

    /// Applies a hold event; a run that changed meanwhile (ended, already held) is fine.
    async fn apply_hold_event(&self, run_id: &str, event: &Event, by: Option<&str>) -> Result<(), EngineError> {
        let handled = match by {
            Some(by) => self.handle_as(run_id, event, self.now(), by).await,
            None => self.handle(run_id, event, self.now()).await,
        };
        match handled {
            Ok(()) | Err(EngineError::Ignored(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Calls `visit` on every run row, page by page, until it returns `true`.
    async fn each_run(&self, mut visit: impl FnMut(&coordinator_store::RunRow) -> bool) -> Result<(), EngineError> {
        let filter = RunFilter::default();
        let mut cursor: Option<Cursor> = None;
        loop {
            let page = self.store.list_runs(&filter, cursor.as_ref(), PAGE).await?;
            for row in &page.runs {
                if visit(row) {
                    return Ok(());
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }
}
