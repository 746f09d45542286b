//! Eager dispatch's hand-over: where a commit that leased work to this
//! process's worker (a batch of reports, [`committer`](crate::dispatch::committer); an admission,
//! [`Engine::admit`]) hands it, each row with its place in hand.
//!
//! The worker registers its [`Handoff`] with the engine while it runs. An
//! [`Offer`] is made only on a store that leases eagerly
//! ([`Store::eager_dispatch`]), while the engine neither drains nor is fenced,
//! and with places free in the worker's hands; after the commit each leased
//! row takes one of the offer's places (those unused go back) and goes to the
//! worker's queue. What the worker can no longer take is given back
//! ([`Store::release`]).
//!
//! It must not decide anything: what is leased is the store's rule (`commit_leases`).
//!
//! [`Store::eager_dispatch`]: coordinator_store::Store::eager_dispatch
//! [`Store::release`]: coordinator_store::Store::release

use coordinator_store::{Claim, ClaimedRun, EagerLease, WorkItem, WorkScope};
use tokio::sync::mpsc;

use crate::dispatch::capacity::{InHand, Place, Places};
use crate::engine::Engine;

/// Work leased to the worker by a commit (or claimed by it), with its run as
/// committed and its place in hand.
pub(crate) type Leased = (WorkItem, ClaimedRun, Place);

/// Where commits hand the work they lease to the worker: the worker's lease
/// and scope, its room, and its queue.
#[derive(Debug, Clone)]
pub(crate) struct Handoff {
    /// How long the lease lasts, in ms (the worker's claims').
    pub(crate) lease_ms: i64,
    /// Which work the worker takes.
    pub(crate) scope: WorkScope,
    /// The worker's room for work: nothing is leased without a place.
    pub(crate) in_hand: InHand,
    /// The worker's queue of leased work.
    pub(crate) to: mpsc::UnboundedSender<Leased>,
}

/// A lease offered to one commit, with the places it may fill.
#[derive(Debug)]
pub(crate) struct Offer {
    handoff: Handoff,
    places: Places,
    lease: EagerLease,
}

impl Offer {
    /// An offer of up to `rows` places of `handoff` for a commit at `now`:
    /// the places `carried` (reports' places handed on, [`capacity`](crate::dispatch::capacity)) first, then
    /// free ones; `None` when nothing may be leased now (see the module doc),
    /// and the carried places go back.
    pub(crate) fn new(
        engine: &Engine,
        handoff: Option<&Handoff>,
        rows: usize,
        now: i64,
        carried: Places,
    ) -> Option<Offer> {
        let handoff =
            handoff.filter(|_| engine.store.eager_dispatch() && !engine.is_draining() && !engine.is_fenced())?;
        let mut places = carried;
        while places.len() > rows {
            drop(places.take_one());
        }
        places.extend(handoff.in_hand.reserve(rows - places.len()));
        let lease =
            EagerLease { scope: handoff.scope, until: now.saturating_add(handoff.lease_ms), rows: places.len() };
        (lease.rows > 0).then(|| Offer { handoff: handoff.clone(), places, lease })
    }

    /// The lease for the store.
    pub(crate) fn lease(&self) -> EagerLease {
        self.lease
    }

    /// Hands `leased` to the worker, each with one of the places; what it can
    /// no longer take (it stopped) is given back, and the unused places go back.
    pub(crate) async fn hand_over(mut self, engine: &Engine, leased: Vec<(WorkItem, ClaimedRun)>) {
        for (item, run) in leased {
            // The store leased no more rows than the offer had places for.
            let Some(place) = self.places.take_one() else {
                release(engine, item).await;
                continue;
            };
            if let Err(mpsc::error::SendError((item, _, _))) = self.handoff.to.send((item, run, place)) {
                release(engine, item).await;
            }
        }
    }
}

/// Gives back a lease of work that will not be done here (the row is due again at once).
pub(crate) async fn release(engine: &Engine, item: WorkItem) {
    if let Err(e) = engine.store.release(&Claim::Work(item), &engine.owner).await {
        tracing::warn!(error = %e, "giving back leased work failed; its lease runs out instead");
    }
}

#[cfg(test)]
#[path = "handoff_tests.rs"]
mod tests;
