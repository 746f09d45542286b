//! Between a stream's reader and what it wakes (the worker, or the polls
//! waiting for a lane): the reader [`Signal::wake`]s them, they say when a
//! claim round (or an offer) began and ended, and the reader acknowledges the
//! entries once a round that began after the wake-up has ended
//! ([`Signal::round_after`]). For a lane, the reader only reads while some
//! poll waits for it ([`Signal::waiting`]): a process none of whose workers
//! waits must not take the lane's hints from the one whose workers do.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// One stream's wake-ups and rounds.
#[derive(Debug)]
pub(crate) struct Signal {
    /// Moves on every wake-up (a hint, or Redis lost: look again).
    hinted: watch::Sender<u64>,
    /// The number of the last round begun.
    begun: AtomicU64,
    /// The highest number of a round ended.
    done: watch::Sender<u64>,
    /// Polls waiting now (lanes only).
    waiting: AtomicUsize,
    /// Told when a poll starts waiting.
    interest: Notify,
    /// Whether what it wakes stopped for good (the worker drained).
    closed: AtomicBool,
}

impl Default for Signal {
    fn default() -> Self {
        Signal {
            hinted: watch::Sender::new(0),
            begun: AtomicU64::new(0),
            done: watch::Sender::new(0),
            waiting: AtomicUsize::new(0),
            interest: Notify::new(),
            closed: AtomicBool::new(false),
        }
    }
}

impl Signal {
    /// Wakes whatever waits on this stream; returns the last round begun before it.
    pub(crate) fn wake(&self) -> u64 {
        let begun = self.begun.load(Ordering::SeqCst);
        self.hinted.send_modify(|n| *n = n.wrapping_add(1));
        begun
    }

    /// A receiver of the wake-ups from now on.
    pub(crate) fn subscribe(&self) -> Hinted {
        Hinted(Some(self.hinted.subscribe()))
    }

    /// A round (a claim round, an offer) begins; give its number to [`Signal::ended`].
    pub(crate) fn begin(&self) -> u64 {
        self.begun.fetch_add(1, Ordering::SeqCst).wrapping_add(1)
    }

    /// The round `round` ended.
    pub(crate) fn ended(&self, round: u64) {
        self.done.send_if_modified(|done| {
            let moved = round > *done;
            *done = (*done).max(round);
            moved
        });
    }

    /// Waits until a round after `begun` has ended, at most `limit`; whether one did.
    pub(crate) async fn round_after(&self, begun: u64, limit: Duration) -> bool {
        let mut done = self.done.subscribe();
        tokio::time::timeout(limit, done.wait_for(|done| *done > begun)).await.is_ok_and(|r| r.is_ok())
    }

    /// What it wakes stopped for good: its stream is read no more.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether [`Signal::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Counts a poll waiting until the guard is dropped.
    pub(crate) fn waiting(&self) -> Waiting<'_> {
        if self.waiting.fetch_add(1, Ordering::SeqCst) == 0 {
            self.interest.notify_waiters();
        }
        Waiting(self)
    }

    /// Whether some poll waits.
    pub(crate) fn is_wanted(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Resolves when a poll starts waiting (at once if one waits), or after `limit`.
    pub(crate) async fn wanted(&self, limit: Duration) {
        let notified = self.interest.notified();
        if self.is_wanted() {
            return;
        }
        let _ = tokio::time::timeout(limit, notified).await;
    }
}

/// A poll waiting for a lane (see [`Signal::waiting`]).
#[derive(Debug)]
pub(crate) struct Waiting<'a>(&'a Signal);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Wake-ups of one stream as a waiter sees them; never resolves when hints are off.
#[derive(Debug)]
pub(crate) struct Hinted(pub(super) Option<watch::Receiver<u64>>);

impl Hinted {
    /// Resolves at the next wake-up after the last one this returned for (at
    /// once if one came meanwhile). Cancel-safe: use it in `select!`.
    pub(crate) async fn next(&mut self) {
        match &mut self.0 {
            Some(receiver) => {
                if receiver.changed().await.is_err() {
                    // The hints are gone (the engine stopped): nothing will come.
                    self.0 = None;
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_are_acknowledged_after_a_round_that_began_after_the_wake_up() {
        let signal = Signal::default();
        let mut hinted = signal.subscribe();
        let before = signal.begin();
        let begun = signal.wake();
        assert_eq!(begun, before);
        tokio::time::timeout(Duration::from_secs(1), hinted.next()).await.unwrap_or_else(|_| panic!("not woken"));
        // The round in progress when the hint came does not count.
        signal.ended(before);
        assert!(!signal.round_after(begun, Duration::from_millis(20)).await);
        let next = signal.begin();
        signal.ended(next);
        assert!(signal.round_after(begun, Duration::from_millis(20)).await);
    }

    #[tokio::test]
    async fn a_lane_is_wanted_while_a_poll_waits() {
        let signal = Signal::default();
        assert!(!signal.is_wanted());
        {
            let _waiting = signal.waiting();
            assert!(signal.is_wanted());
            tokio::time::timeout(Duration::from_millis(50), signal.wanted(Duration::from_secs(5)))
                .await
                .unwrap_or_else(|_| panic!("a waiting poll is interest"));
        }
        assert!(!signal.is_wanted());
    }

    #[tokio::test]
    async fn without_hints_nothing_wakes() {
        let mut off = Hinted(None);
        assert!(tokio::time::timeout(Duration::from_millis(20), off.next()).await.is_err());
    }
}
