//! Instants as the machine sees them: milliseconds since the Unix epoch, handed
//! in by the caller (the service's clock or the scenario runner's virtual one).
//! The machine never reads a clock.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Instant(pub i64);

impl Instant {
    /// Parses an RFC 3339 instant (`2026-10-09T09:00:00Z`, offsets allowed).
    pub fn parse_rfc3339(text: &str) -> Option<Instant> {
        DateTime::parse_from_rfc3339(text).ok().map(|t| Instant(t.timestamp_millis()))
    }

    /// The instant in RFC 3339, UTC, with milliseconds only when needed.
    pub fn to_rfc3339(self) -> String {
        match DateTime::<Utc>::from_timestamp_millis(self.0) {
            Some(t) => t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
            None => self.0.to_string(),
        }
    }

    /// This instant plus whole seconds (saturating).
    pub fn plus_seconds(self, seconds: u64) -> Instant {
        let ms = i64::try_from(seconds).unwrap_or(i64::MAX / 1000).saturating_mul(1000);
        Instant(self.0.saturating_add(ms))
    }

    /// This instant plus milliseconds (saturating).
    pub fn plus_millis(self, millis: u64) -> Instant {
        Instant(self.0.saturating_add(i64::try_from(millis).unwrap_or(i64::MAX)))
    }

    /// Whole seconds from `earlier` to this instant (0 if earlier is later).
    pub fn seconds_since(self, earlier: Instant) -> u64 {
        u64::try_from((self.0 - earlier.0).max(0) / 1000).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        let t = Instant::parse_rfc3339("2026-10-09T09:00:00Z");
        assert_eq!(t.map(Instant::to_rfc3339).as_deref(), Some("2026-10-09T09:00:00Z"));
        let offset = Instant::parse_rfc3339("2026-10-09T11:00:00+02:00");
        assert_eq!(offset, t);
        assert_eq!(Instant::parse_rfc3339("2026-10-09 09:00"), None);
        assert_eq!(t.map(|t| t.plus_seconds(90).seconds_since(t)), Some(90));
    }
}
