//! What a PostgreSQL pool remembers of the server hanging up (a restart, a
//! terminated backend, a failover), so that a connection the server dropped
//! while it sat in the pool is replaced instead of failing a caller.
//!
//! A pooled connection is pinged before it is handed out only after it sat
//! idle for over a second ([`pool`](crate::db::pool)`::PG_PING_IF_IDLE`: a ping per transaction was
//! a round trip per transaction). One used a moment ago can still be dead
//! when the server went away in that moment. Two rules close that gap:
//! - a transaction whose `BEGIN` fails on a lost connection is begun again
//!   (`BEGIN` changed nothing), on another connection: the failed one is
//!   closed when the pool takes it back;
//! - once any handle has seen the server hang up — a `BEGIN`, a statement, a
//!   commit, or the listening connection of `notify` — every connection put
//!   back in the pool before that moment is pinged before its next use
//!   ([`Hangups::predates`]), and replaced when the ping fails.
//!
//! A statement that fails on a lost connection still fails: whether it ran
//! is not known, so it is never sent again here; the caller's own rules for
//! a database error apply.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The last moment a handle of one pool saw the server hang up.
#[derive(Debug)]
pub(crate) struct Hangups {
    /// What the moments are counted from.
    origin: Instant,
    /// Microseconds from `origin` to the last hang-up seen, plus one; 0 when none was.
    last: AtomicU64,
}

impl Default for Hangups {
    fn default() -> Hangups {
        Hangups { origin: Instant::now(), last: AtomicU64::new(0) }
    }
}

impl Hangups {
    /// Records that a handle saw the server hang up, now.
    pub(crate) fn seen(&self) {
        self.last.fetch_max(self.micros_now().saturating_add(1), Ordering::Relaxed);
    }

    /// A number that changes each time a hang-up is seen (0: none yet).
    pub(crate) fn last_seen(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }

    /// Records `error` when it shows the connection lost; passes it on.
    pub(crate) fn note(&self, error: sqlx::Error) -> sqlx::Error {
        if is_lost(&error) {
            self.seen();
        }
        error
    }

    /// Whether a connection idle for `idle_for` was put back in the pool no
    /// later than the last hang-up seen, so may have been dropped unnoticed.
    pub(crate) fn predates(&self, idle_for: Duration) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        let idle = u64::try_from(idle_for.as_micros()).unwrap_or(u64::MAX);
        last != 0 && self.micros_now().saturating_sub(idle) < last
    }

    fn micros_now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// Whether `error` shows the connection gone: a broken socket, or the
/// server saying it is shutting down or the connection failed (SQLSTATE
/// classes 57P0x and 08).
pub(crate) fn is_lost(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(d) => d.code().is_some_and(|code| code.starts_with("57P0") || code.starts_with("08")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_predates_a_hangup_never_seen() {
        let hangups = Hangups::default();
        assert!(!hangups.predates(Duration::from_secs(3600)));
        assert!(!hangups.predates(Duration::ZERO));
    }

    #[test]
    fn a_connection_put_back_before_the_hangup_predates_it_and_one_after_does_not() {
        let hangups = Hangups::default();
        std::thread::sleep(Duration::from_millis(5));
        hangups.seen();
        // Idle since well before the hang-up: put back before it.
        assert!(hangups.predates(Duration::from_secs(1)));
        std::thread::sleep(Duration::from_millis(5));
        // Put back just now, after the hang-up was seen.
        assert!(!hangups.predates(Duration::ZERO));
    }

    #[test]
    fn io_errors_and_shutdown_codes_are_lost_connections_and_others_are_not() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert!(is_lost(&io));
        assert!(!is_lost(&sqlx::Error::RowNotFound));
        assert!(!is_lost(&sqlx::Error::PoolTimedOut));
    }
}
