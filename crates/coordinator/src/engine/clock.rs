//! The engine's clock: the system clock plus an offset only tests move
//! ([`Engine::advance_clock`], [`Engine::set_clock_offset`]). Every decision
//! and claim reads [`Engine::now`]; nothing else of the engine reads the time.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Engine;

/// Milliseconds since the Unix epoch, from the system clock (where no engine
/// exists yet, and for checks against another party's clock); an engine's
/// decisions read [`Engine::now`].
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Engine {
    /// The clock every decision and claim of this engine reads
    /// (docs/internals/engine.md#one-event-one-transaction: the clock is
    /// injected), in ms since the Unix epoch: the system clock plus whatever
    /// [`Engine::advance_clock`] added (nothing in a deployment).
    pub fn now(&self) -> i64 {
        now_ms().saturating_add(self.clock_offset_ms.load(Ordering::SeqCst))
    }

    /// Moves this engine's clock ([`Engine::now`]) forward by `by`, for tests
    /// that travel in time, and wakes the worker so what became due is claimed.
    pub fn advance_clock(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.clock_offset_ms.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(o.saturating_add(by))).ok();
        self.wake.notify_one();
    }

    /// Sets how far this engine's clock is ahead of the system's (ms), for
    /// tests whose processes travel in time together
    /// ([`crate::process::test_clock`]); wakes the worker when it moved.
    pub fn set_clock_offset(&self, offset_ms: i64) {
        if self.clock_offset_ms.swap(offset_ms, Ordering::SeqCst) != offset_ms {
            self.wake.notify_one();
        }
    }
}
