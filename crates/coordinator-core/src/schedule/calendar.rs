//! A schedule's calendar: when it fires, as instants (ms since the epoch).
//! Pure: nothing here reads a clock; the caller says "after when".
//!
//! - **Cron** (five fields, or six with seconds first; `@daily` and the
//!   other nicknames) in an IANA time zone from the bundled database
//!   (`chrono-tz`, so the host's zone files do not matter). The expression
//!   matches *local wall-clock* times (`croner` walks the civil calendar);
//!   each matching local time is one nominal instant:
//!   - a local time that exists once is that instant;
//!   - one that exists twice (the clock goes back) fires once, at the first;
//!   - one that does not exist (the clock jumps forward) fires at the first
//!     valid instant after it: the instant of the jump. Several local
//!     times inside one jump fire once, there.
//! - **Interval**: every `N` seconds from an anchor instant, in UTC (no
//!   time zone, no daylight saving).

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// The most local times one search steps over before it gives up (a
/// pattern that matches a local time only inside a jump, for years).
const MOST_STEPS: usize = 10_000;

/// Why a calendar cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// The cron expression does not parse (croner's words).
    #[error("the cron expression does not parse: {0}")]
    Cron(String),
    /// The cron expression parses but matches no time (`0 0 30 2 *`).
    #[error("the cron expression matches no time")]
    Never,
    /// The time zone is not an IANA name the bundled database knows.
    #[error("`{0}` is not a time zone of the IANA database (such as `Europe/Berlin` or `UTC`)")]
    Zone(String),
    /// An interval of no time.
    #[error("an interval is at least one second")]
    Interval,
    /// An interval's anchor is not an RFC 3339 instant.
    #[error("the anchor `{0}` is not an RFC 3339 instant (such as `2026-01-01T00:00:00Z`)")]
    Anchor(String),
}

/// When a schedule fires.
#[derive(Debug, Clone)]
pub struct Calendar {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Cron { cron: Box<Cron>, zone: Tz },
    Interval { every_ms: i64, anchor_ms: i64 },
}

/// The time zone named `name` in the bundled IANA database.
pub fn zone(name: &str) -> Option<Tz> {
    name.parse::<Tz>().ok()
}

impl Calendar {
    /// A cron calendar in time zone `zone_name`.
    ///
    /// # Errors
    /// [`CalendarError`] naming what does not parse.
    pub fn cron(expression: &str, zone_name: &str) -> Result<Calendar, CalendarError> {
        let zone = zone(zone_name).ok_or_else(|| CalendarError::Zone(zone_name.to_owned()))?;
        let parser = CronParser::builder().seconds(Seconds::Optional).build();
        let cron = parser.parse(expression.trim()).map_err(|e| CalendarError::Cron(e.to_string()))?;
        let calendar = Calendar { kind: Kind::Cron { cron: Box::new(cron), zone } };
        // A pattern that matches no date at all (the 30th of February) is refused here, not at run time.
        let start = NaiveDateTime::default();
        let probe = match &calendar.kind {
            Kind::Cron { cron, .. } => cron.find_next_occurrence(&start, false),
            Kind::Interval { .. } => return Ok(calendar),
        };
        match probe {
            Ok(_) => Ok(calendar),
            Err(_) => Err(CalendarError::Never),
        }
    }

    /// Every `every_seconds` seconds from `anchor_ms`.
    ///
    /// # Errors
    /// [`CalendarError::Interval`] for zero seconds.
    pub fn interval(every_seconds: u64, anchor_ms: i64) -> Result<Calendar, CalendarError> {
        let every_ms = i64::try_from(every_seconds).ok().and_then(|s| s.checked_mul(1000)).filter(|ms| *ms > 0);
        let every_ms = every_ms.ok_or(CalendarError::Interval)?;
        Ok(Calendar { kind: Kind::Interval { every_ms, anchor_ms } })
    }

    /// The time zone of a cron calendar (`None` for an interval, which is UTC).
    pub fn time_zone(&self) -> Option<Tz> {
        match &self.kind {
            Kind::Cron { zone, .. } => Some(*zone),
            Kind::Interval { .. } => None,
        }
    }

    /// Instant `ms` as the calendar's wall clock shows it: `2026-12-08 02:30:00
    /// CET (+01:00)` in a cron calendar's zone, UTC for an interval.
    pub fn wall_clock(&self, ms: i64) -> String {
        let Some(utc) = DateTime::<Utc>::from_timestamp_millis(ms) else { return String::new() };
        match self.time_zone() {
            Some(zone) => utc.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z (%:z)").to_string(),
            None => utc.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        }
    }

    /// The first nominal instant strictly after `after_ms`, if the calendar has one.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match &self.kind {
            Kind::Interval { every_ms, anchor_ms } => {
                let since = after_ms.checked_sub(*anchor_ms)?;
                let steps = if since < 0 { 0 } else { since / every_ms + 1 };
                anchor_ms.checked_add(steps.checked_mul(*every_ms)?)
            }
            Kind::Cron { cron, zone } => next_cron(cron, *zone, after_ms),
        }
    }

    /// The next `count` nominal instants after `after_ms`.
    pub fn upcoming(&self, after_ms: i64, count: usize) -> Vec<i64> {
        let mut out = Vec::with_capacity(count);
        let mut at = after_ms;
        while out.len() < count {
            match self.next_after(at) {
                Some(next) => {
                    out.push(next);
                    at = next;
                }
                None => break,
            }
        }
        out
    }
}

/// The local wall-clock time of `ms` in `zone`.
fn local(zone: Tz, ms: i64) -> Option<NaiveDateTime> {
    Some(DateTime::<Utc>::from_timestamp_millis(ms)?.with_timezone(&zone).naive_local())
}

fn next_cron(cron: &Cron, zone: Tz, after_ms: i64) -> Option<i64> {
    // Walk the local times the pattern matches from the local time of
    // `after_ms` (inclusive: a repeated hour's second half maps back to
    // instants before `after_ms`, and is stepped over below).
    let mut cursor = local(zone, after_ms)?;
    let mut inclusive = true;
    for _ in 0..MOST_STEPS {
        let matched = cron.find_next_occurrence(&cursor, inclusive).ok()?;
        if let Some(at) = resolve(zone, matched)
            && at > after_ms
        {
            return Some(at);
        }
        cursor = matched;
        inclusive = false;
    }
    None
}

/// The instant a local time fires at (see the module doc).
fn resolve(zone: Tz, civil: NaiveDateTime) -> Option<i64> {
    match zone.from_local_datetime(&civil) {
        LocalResult::Single(at) => Some(at.timestamp_millis()),
        LocalResult::Ambiguous(first, _) => Some(first.timestamp_millis()),
        LocalResult::None => jump_after(zone, civil),
    }
}

/// The instant the clock jumped over `civil` (which does not exist in
/// `zone`): the first instant whose local time is past it.
fn jump_after(zone: Tz, civil: NaiveDateTime) -> Option<i64> {
    // Before the jump the local time is at most `civil`; read as UTC, minus a
    // day, it is an instant before the jump in any zone (offsets are within ±26 h
    // of UTC, and jumps last at most a day and a half).
    let naive_ms = civil.and_utc().timestamp_millis();
    let mut before = naive_ms.checked_sub(2 * 86_400_000)?;
    let mut after = naive_ms.checked_add(2 * 86_400_000)?;
    // `after` is the first instant whose local time is past `civil`: search
    // for it by halves (local time only grows across a forward jump).
    let past = |ms: i64| local(zone, ms).is_some_and(|l| l > civil);
    if !past(after) || past(before) {
        return None;
    }
    while after - before > 1 {
        let mid = before + (after - before) / 2;
        if past(mid) {
            after = mid;
        } else {
            before = mid;
        }
    }
    // The jump's first instant.
    Some(after)
}

#[cfg(test)]
#[path = "calendar_tests.rs"]
mod tests;
