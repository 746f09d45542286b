//! Whether Redis answers, as the announcer and each reader last found it, and
//! the counts the metrics show. Redis is *up* while every part reached it at
//! its last try; a change of a part is logged once (not per hint), and going
//! down wakes every waiter so it goes back to polling at the short interval.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::signal::Signal;

/// The parts that talk to Redis and how each last found it.
#[derive(Debug, Default)]
pub(crate) struct Health {
    parts: Mutex<BTreeMap<String, bool>>,
    up: AtomicBool,
    /// Woken when Redis is lost, so their waiters go back to the short interval.
    signals: Vec<Arc<Signal>>,
    /// Hints written (`XADD`s that succeeded).
    pub(crate) sent: AtomicU64,
    /// Hints dropped because the announcer's queue was full.
    pub(crate) dropped_full: AtomicU64,
    /// Hints dropped because Redis could not be reached.
    pub(crate) dropped_unavailable: AtomicU64,
    /// Wake-ups of this process's worker by another process's hints.
    pub(crate) woke_in_process: AtomicU64,
    /// Wake-ups of this process's polls by another process's hints.
    pub(crate) woke_remote: AtomicU64,
    /// Consumer groups found missing (`NOGROUP`) and created again.
    pub(crate) groups_recreated: AtomicU64,
}

/// What changed when a part reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing.
    Same,
    /// Every part reaches Redis now.
    Up,
    /// A part lost it (Redis was up, or had never been).
    Down,
}

impl Health {
    /// Registers the parts, all down until they reach Redis, and the
    /// signals to wake when Redis is lost.
    pub(crate) fn new<'a>(parts: impl IntoIterator<Item = &'a str>, signals: Vec<Arc<Signal>>) -> Health {
        let parts = parts.into_iter().map(|p| (p.to_owned(), false)).collect();
        Health { parts: Mutex::new(parts), signals, ..Health::default() }
    }

    /// Whether every part reached Redis at its last try.
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    /// `part` reached Redis (`ok`) or did not; logs the part's change once.
    pub(crate) fn report(&self, part: &str, ok: bool, why: Option<&str>) -> Change {
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        let before = parts.insert(part.to_owned(), ok);
        if before == Some(ok) {
            return Change::Same;
        }
        let was_up = self.up.load(Ordering::SeqCst);
        let up = parts.values().all(|ok| *ok);
        self.up.store(up, Ordering::SeqCst);
        drop(parts);
        if ok {
            tracing::info!(part, "Redis dispatch hints: reached Redis");
        } else {
            tracing::warn!(
                part,
                error = why.unwrap_or("unknown"),
                "Redis dispatch hints: Redis unreachable; polling the database at the short interval until it is back"
            );
        }
        match (was_up, up) {
            (false, true) => {
                tracing::info!(
                    "Redis dispatch hints: every part reaches Redis; the database is swept at the long interval"
                );
                Change::Up
            }
            (true, false) => {
                for signal in &self.signals {
                    signal.wake();
                }
                Change::Down
            }
            (false, false) if !ok => Change::Down,
            _ => Change::Same,
        }
    }
}

/// A Redis error in words for a log line: its category and code, never a
/// value (a URL's password is not in either).
pub(crate) fn describe(e: &redis::RedisError) -> String {
    if e.is_timeout() {
        return "timed out".to_owned();
    }
    match e.code() {
        Some(code) => format!("{} ({code})", e.category()),
        None => e.category().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_needs_every_part_and_each_change_is_told_once() {
        let signal = Arc::new(Signal::default());
        let mut hinted = signal.subscribe();
        let health = Health::new(["announcer", "reader"], vec![Arc::clone(&signal)]);
        assert!(!health.is_up());
        assert_eq!(health.report("announcer", true, None), Change::Same, "the reader has not reached it yet");
        assert_eq!(health.report("reader", true, None), Change::Up);
        assert!(health.is_up());
        assert_eq!(health.report("reader", true, None), Change::Same);
        assert_eq!(health.report("announcer", false, Some("refused")), Change::Down);
        let woken = hinted.0.as_mut().map(|r| r.has_changed().unwrap_or(false));
        assert_eq!(woken, Some(true), "losing Redis wakes the waiters");
        assert_eq!(health.report("announcer", false, Some("refused")), Change::Same, "told once");
        assert!(!health.is_up());
        assert_eq!(health.report("announcer", true, None), Change::Up);
    }
}
