//! The bound on the work a worker has in hand: claimed or leased rows not
//! yet reported, each a product request in flight or about to be. A place is
//! taken before a row is claimed or leased ([`worker`](crate::dispatch::worker)'s claim rounds, the
//! committer's eager leases) and held until its task ends or hands its report
//! to the committer, so however fast work is queued a worker never holds
//! more than its bound (and no more leases than it can act on before they run
//! out); what it cannot take stays queued for a claim — of this worker
//! later, or of another process.
//!
//! A report's place goes with it to the committer, which offers it first to
//! the work the report's decision queues at once ([`Places::join`]): a run's
//! next step takes the place of the step it follows. So when every place is
//! taken (more work queued than the worker can hold), runs already under way
//! go on without waiting for a claim round, and the claim rounds take only
//! the places that free up when runs end or wait.
//!
//! It must not decide what to claim: only how much room there is.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The work a worker holds at most by default.
pub(crate) const DEFAULT_BOUND: usize = 256;

/// The places of one worker (cheap to clone; every clone shares them).
#[derive(Debug, Clone)]
pub(crate) struct InHand(Arc<Semaphore>);

impl InHand {
    /// `bound` places (at least one: a worker with none would never work).
    pub(crate) fn new(bound: usize) -> InHand {
        InHand(Arc::new(Semaphore::new(bound.clamp(1, Semaphore::MAX_PERMITS))))
    }

    /// The places free now.
    pub(crate) fn room(&self) -> usize {
        self.0.available_permits()
    }

    /// Takes up to `most` of the places free now (none free: an empty [`Places`]).
    pub(crate) fn reserve(&self, most: usize) -> Places {
        let n = most.min(self.room());
        let taken =
            u32::try_from(n).ok().filter(|n| *n > 0).and_then(|n| Arc::clone(&self.0).try_acquire_many_owned(n).ok());
        Places(taken)
    }

    /// Returns once a place is free (at once if one is).
    pub(crate) async fn freed(&self) {
        // The semaphore is never closed; the permit goes back at once.
        drop(self.0.acquire().await);
    }
}

/// Places taken together, handed out one per row.
#[derive(Debug, Default)]
pub(crate) struct Places(Option<OwnedSemaphorePermit>);

impl Places {
    /// Adds `place` (a task's, handed on with its report) to these. A place
    /// of another worker's bound is not added: it goes back to its own.
    pub(crate) fn join(&mut self, place: Place) {
        self.add(place._held);
    }

    /// Adds `other`'s places to these (as [`Places::join`] does each).
    pub(crate) fn extend(&mut self, other: Places) {
        if let Some(held) = other.0 {
            self.add(held);
        }
    }

    fn add(&mut self, held: OwnedSemaphorePermit) {
        match &mut self.0 {
            None => self.0 = Some(held),
            Some(mine) if Arc::ptr_eq(mine.semaphore(), held.semaphore()) => mine.merge(held),
            Some(_) => drop(held),
        }
    }

    /// How many are left to hand out.
    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// One of them, for one row (none left: `None`); the others go back when dropped.
    pub(crate) fn take_one(&mut self) -> Option<Place> {
        let one = match self.0.as_mut()?.num_permits() {
            1 => self.0.take(),
            _ => self.0.as_mut()?.split(1),
        };
        one.map(|held| Place { _held: held })
    }
}

/// One row's place, held until its task ends or hands it on with its report.
#[derive(Debug)]
pub(crate) struct Place {
    _held: OwnedSemaphorePermit,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_handed_out_one_by_one_and_come_back_when_dropped() {
        let in_hand = InHand::new(3);
        let mut places = in_hand.reserve(5);
        assert_eq!((places.len(), in_hand.room()), (3, 0), "no more than the bound");
        assert_eq!(in_hand.reserve(1).len(), 0, "nothing free");
        let (first, second) = (places.take_one(), places.take_one());
        assert!(first.is_some() && second.is_some());
        assert_eq!(places.len(), 1);
        drop(places);
        assert_eq!(in_hand.room(), 1, "what was not handed out goes back");
        drop(first);
        assert_eq!(in_hand.room(), 2, "a place goes back when its task ends");
        let mut last = in_hand.reserve(1);
        assert!(last.take_one().is_some() && last.take_one().is_none() && last.len() == 0);
        assert_eq!(InHand::new(0).room(), 1, "a worker always has room for one row");
        drop(second);
    }

    #[test]
    fn a_place_handed_on_joins_others_and_goes_back_with_them() {
        let in_hand = InHand::new(4);
        let (mut a, mut b) = (in_hand.reserve(1), in_hand.reserve(1));
        let (first, second) = (a.take_one(), b.take_one());
        let mut joined = Places::default();
        for place in [first, second].into_iter().flatten() {
            joined.join(place);
        }
        joined.join(InHand::new(1).reserve(1).take_one().unwrap_or_else(|| panic!("a place")));
        assert_eq!((joined.len(), in_hand.room()), (2, 2), "another bound's place is not joined");
        let third = in_hand.reserve(1).take_one();
        assert_eq!(in_hand.room(), 1);
        let one = joined.take_one();
        drop(joined);
        assert_eq!(in_hand.room(), 2, "the places not handed out go back");
        drop((one, third));
        assert_eq!(in_hand.room(), 4);
    }
}
