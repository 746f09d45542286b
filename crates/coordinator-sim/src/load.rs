//! How hard a simulated product is being pressed: the product requests it is
//! serving right now, the most it served at once, and when each arrived, as
//! `GET {base}/v1/load` shows them ([`LoadView`]). A request counts from the
//! moment its handler starts until its answer is ready (for a `timeout` fault,
//! until the delay is over), whatever the answer; the control API does not count.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// How many arrival instants a simulator keeps (the newest).
pub const ARRIVALS_KEPT: usize = 100_000;

/// The load of one simulated product.
#[derive(Debug, Default)]
pub(crate) struct Load {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    requests: AtomicU64,
    arrivals: Mutex<VecDeque<u64>>,
}

/// What `GET {base}/v1/load` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadView {
    /// Product requests being served at this moment.
    pub in_flight: usize,
    /// The most served at once since the simulator started or its load was reset.
    pub max_in_flight: usize,
    /// Product requests received since then.
    pub requests: u64,
    /// When each of the newest (up to [`ARRIVALS_KEPT`]) arrived, in ms since the Unix epoch, oldest first.
    pub arrivals: Vec<u64>,
}

/// One request being served; it stops counting when dropped (also when the
/// client goes away and the handler is dropped).
pub(crate) struct Serving<'a>(&'a Load);

impl Load {
    /// Counts a request that arrives now.
    pub(crate) fn enter(&self) -> Serving<'_> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        self.requests.fetch_add(1, Ordering::SeqCst);
        let at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0));
        let mut arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner);
        if arrivals.len() >= ARRIVALS_KEPT {
            arrivals.pop_front();
        }
        arrivals.push_back(at);
        Serving(self)
    }

    /// The load as it stands.
    pub(crate) fn view(&self) -> LoadView {
        let arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner).iter().copied().collect();
        LoadView {
            in_flight: self.in_flight.load(Ordering::SeqCst),
            max_in_flight: self.max_in_flight.load(Ordering::SeqCst),
            requests: self.requests.load(Ordering::SeqCst),
            arrivals,
        }
    }

    /// Starts counting afresh: the most at once becomes what is in flight now,
    /// and the requests and arrivals so far are forgotten.
    pub(crate) fn reset(&self) {
        let mut arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner);
        arrivals.clear();
        self.requests.store(0, Ordering::SeqCst);
        self.max_in_flight.store(self.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_count_while_served_and_the_most_at_once_is_kept() {
        let load = Load::default();
        let first = load.enter();
        let second = load.enter();
        drop(first);
        let third = load.enter();
        let view = load.view();
        assert_eq!((view.in_flight, view.max_in_flight, view.requests), (2, 2, 3));
        assert_eq!(view.arrivals.len(), 3);
        assert!(view.arrivals.windows(2).all(|w| w[0] <= w[1]), "oldest first");
        drop(second);
        load.reset();
        let view = load.view();
        assert_eq!((view.in_flight, view.max_in_flight, view.requests, view.arrivals.len()), (1, 1, 0, 0));
        drop(third);
        assert_eq!(load.view().in_flight, 0);
        assert_eq!(load.view().max_in_flight, 1, "the most at once since the reset");
    }
}
