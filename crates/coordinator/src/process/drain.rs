//! Draining: the state a stopping service is in
//! (docs/reference/service.md#stopping: a routine stop never makes an effect
//! uncertain). Once [`Drain::begin`] is called the engine admits nothing (`503
//! service.draining`), `GET /readyz` answers 503, the worker claims nothing
//! more and each of its tasks either finishes the product request it already
//! sent (the answer is committed) or, when it has not sent one yet, gives its
//! claim back ([`Store::release`]) so another process takes the row at once
//! instead of after the lease.
//!
//! This module only keeps the flag and the count of product requests in flight;
//! [`Running::drain`] orders the stop (worker, HTTP server, audit chain task)
//! and bounds it by the grace period.
//!
//! [`Store::release`]: coordinator_store::Store::release
//! [`Running::drain`]: crate::process::tasks::Running::drain

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

/// Whether the service is draining, and how many product requests are in flight.
#[derive(Debug)]
pub struct Drain {
    draining: watch::Sender<bool>,
    in_flight: AtomicUsize,
}

impl Default for Drain {
    fn default() -> Self {
        Drain::new()
    }
}

impl Drain {
    /// A service that is not draining.
    pub fn new() -> Drain {
        Drain { draining: watch::Sender::new(false), in_flight: AtomicUsize::new(0) }
    }

    /// Whether draining has begun.
    pub fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }

    /// Begins draining; returns `false` when it had begun already.
    pub fn begin(&self) -> bool {
        self.draining.send_if_modified(|draining| !std::mem::replace(draining, true))
    }

    /// Resolves once draining has begun (at once when it has).
    pub async fn begun(&self) {
        let mut receiver = self.draining.subscribe();
        // The sender lives as long as `self`, so this only ends when draining begins.
        let _ = receiver.wait_for(|draining| *draining).await;
    }

    /// Counts a product request in flight until the guard is dropped.
    pub(crate) fn request(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(&self.in_flight)
    }

    /// Product requests in flight now (sent or about to be, not yet answered).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

/// One product request in flight (see [`Drain::request`]).
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draining_begins_once_and_counts_requests_in_flight() {
        let drain = Drain::new();
        assert!(!drain.is_draining());
        let first = drain.request();
        let second = drain.request();
        assert_eq!(drain.in_flight(), 2);
        drop(first);
        assert_eq!(drain.in_flight(), 1);
        assert!(drain.begin(), "the first call begins draining");
        assert!(!drain.begin(), "a second call changes nothing");
        assert!(drain.is_draining());
        drop(second);
        assert_eq!(drain.in_flight(), 0);
    }

    #[tokio::test]
    async fn begun_resolves_for_a_waiter_and_after_the_fact() {
        let drain = std::sync::Arc::new(Drain::new());
        let waiter = tokio::spawn({
            let drain = std::sync::Arc::clone(&drain);
            async move { drain.begun().await }
        });
        drain.begin();
        assert!(waiter.await.is_ok());
        drain.begun().await;
    }
}
