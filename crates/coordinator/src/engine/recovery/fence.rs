//! The restore and failover fence in a running service
//! (docs/reference/recovery.md#the-fence; docs/operations.md, "The fence"). The
//! store reads the database and remembers ([`coordinator_store`]'s `fence`); this
//! module arms that memory at a normal start, reads the database every
//! [`INTERVAL`] from the worker's loop, and acts on a trip: the evidence is
//! logged and journaled, the restore hold placed (`coordinator` as who placed
//! it, the evidence as its reason) and every unfinished run put under it, as
//! `restore-hold place` would. Meanwhile nothing is claimed (the store
//! refuses), `/readyz` answers `503 fenced` and `coordinator_fenced` is 1 (set
//! at scrape time). The operator reviews and releases as after any restore; the
//! release accepts the database as it now is, which lifts the fence of every
//! process.
//!
//! Recovery-only mode never arms it: that mode is the operator's own review.

use std::time::Duration;

use coordinator_store::{StoreError, WorkItem};
use tokio::time::Instant;

use crate::engine::Engine;
use crate::engine::error::EngineError;

/// How often the worker's loop reads the database for the fence.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The engine's side of the fence: whether it is armed, when it last read,
/// and the trip it placed the hold for.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    state: tokio::sync::Mutex<WatchState>,
}

#[derive(Debug, Default)]
struct WatchState {
    armed: bool,
    last_read: Option<Instant>,
    placed_for: Option<String>,
}

impl Engine {
    /// Arms the fence at a normal start: records the database's identity at
    /// the deployment's first start, and trips (placing the restore hold at
    /// once) when the database is not the one recorded.
    ///
    /// # Errors
    /// The database cannot be read or the hold not placed.
    pub async fn arm_fence(&self) -> Result<(), EngineError> {
        self.store.arm_fence(self.now()).await?;
        {
            let mut watch = self.fence.state.lock().await;
            watch.armed = true;
            watch.last_read = Some(Instant::now());
        }
        self.keep_fence().await
    }

    /// Whether the fence holds (tripped, and not yet lifted by a release).
    pub fn is_fenced(&self) -> bool {
        self.store.fence_tripped().is_some()
    }

    /// One round of the watch (each round of the worker): reads the database
    /// when [`INTERVAL`] has passed, places the hold for a new trip, and says
    /// when a release lifted the fence.
    pub(crate) async fn keep_fence(&self) -> Result<(), EngineError> {
        let mut watch = self.fence.state.lock().await;
        if !watch.armed {
            return Ok(());
        }
        if watch.last_read.is_none_or(|at| at.elapsed() >= INTERVAL) {
            watch.last_read = Some(Instant::now());
            self.store.check_fence(self.now()).await?;
            // What eager dispatch needs to know of other processes' pauses (`coordinator_store::connections`).
            self.store.refresh_connections(self.now()).await?;
        }
        match (self.store.fence_tripped(), &watch.placed_for) {
            (Some(evidence), placed) if placed.as_ref() != Some(&evidence) => {
                tracing::error!(
                    evidence = %evidence,
                    "the restore fence tripped: the restore hold is placed and nothing is dispatched until an \
                     operator reviews the runs and releases it"
                );
                self.store.place_fence_hold(self.now(), &evidence).await?;
                self.hold_unfinished_runs(None).await?;
                watch.placed_for = Some(evidence);
            }
            (None, Some(_)) => {
                watch.placed_for = None;
                tracing::info!("the restore fence is lifted: an operator released the restore hold");
            }
            _ => {}
        }
        Ok(())
    }

    /// A report of `item` lost its lease: when the database does not know
    /// the claim at all (lost commits), the fence trips.
    pub(crate) async fn judge_lost_lease(&self, item: &WorkItem) {
        match self.store.attempt_known(item).await {
            Ok(true) => {}
            Ok(false) => self.store.trip_fence(format!(
                "a report named attempt {} ({}) of step `{}` of run {}, which the database does not know: it lost \
                 the commit of the claim",
                item.attempt,
                item.kind.as_str(),
                item.step,
                item.run_id
            )),
            Err(e) => {
                tracing::warn!(error = %e, run_id = %item.run_id, "checking a lost lease against the database failed")
            }
        }
    }
}

/// Whether a report's error is a lost lease (the fence then asks the database about it).
pub(crate) fn lost_lease(result: &Result<(), EngineError>) -> bool {
    matches!(result, Err(EngineError::Store(StoreError::LeaseLost { .. })))
}
