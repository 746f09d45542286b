//! Schedules: runs admitted on the calendar. [`calendar`] says when a
//! schedule fires; [`calendar_of`] builds it from a `workflow.yaml` schedule;
//! [`round`] says what a schedule does next (fire, hold, skip) at a time.

pub mod calendar;
pub mod round;

pub use calendar::{Calendar, CalendarError, zone};

use crate::model::workflow::Schedule;

/// The time zone a cron schedule is read in when it names none.
pub const DEFAULT_TIME_ZONE: &str = "UTC";
/// The instant an interval counts from when it names none (the epoch).
pub const DEFAULT_ANCHOR: &str = "1970-01-01T00:00:00Z";
/// The shortest time between two firings of a schedule, in seconds, unless a
/// deployment raises it (runtime.yaml `scheduleFloorSeconds`).
pub const MIN_SPACING_SECONDS: u64 = 10;
/// The instant sample firings are counted from: 2026-01-01T00:00:00Z.
pub const SAMPLE_AFTER: i64 = 1_767_225_600_000;
/// Firings looked at for the spacing.
const SPACING_FIRINGS: usize = 20;

/// The catch-up window of a schedule that names none, in seconds.
pub const DEFAULT_CATCH_UP_SECONDS: u64 = 3600;

/// What identifies a schedule's calendar: equal texts fire at the same
/// instants, so a new revision with the same text keeps the stored next instant.
#[must_use]
pub fn calendar_text(schedule: &Schedule) -> String {
    let zone = schedule.cron.as_ref().map(|_| schedule.time_zone.as_deref().unwrap_or(DEFAULT_TIME_ZONE));
    let anchor = schedule.interval_seconds.map(|_| schedule.anchor.as_deref().unwrap_or(DEFAULT_ANCHOR));
    serde_json::json!({
        "cron": schedule.cron,
        "timeZone": zone,
        "intervalSeconds": schedule.interval_seconds,
        "anchor": anchor,
    })
    .to_string()
}

/// When a schedule fires, in words: `cron "30 7 * * MON-FRI" in Europe/Berlin`,
/// `every 3600 s from 2026-01-01T00:15:00Z`.
#[must_use]
pub fn describe(schedule: &Schedule) -> String {
    match (&schedule.cron, schedule.interval_seconds) {
        (Some(cron), _) => format!("cron \"{cron}\" in {}", schedule.time_zone.as_deref().unwrap_or(DEFAULT_TIME_ZONE)),
        (None, Some(seconds)) => {
            format!("every {seconds} s from {}", schedule.anchor.as_deref().unwrap_or(DEFAULT_ANCHOR))
        }
        (None, None) => "no calendar".to_owned(),
    }
}

/// The closest two of a calendar's first firings after [`SAMPLE_AFTER`] come
/// together, in ms (`None` with fewer than two).
#[must_use]
pub fn closest_spacing_ms(calendar: &Calendar) -> Option<i64> {
    calendar.upcoming(SAMPLE_AFTER, SPACING_FIRINGS).windows(2).map(|w| w[1] - w[0]).min()
}

/// How close (ms) `schedule` fires when closer than `floor_seconds`; `None`
/// when it keeps the floor (or its calendar does not parse: the checker's concern).
#[must_use]
pub fn under_floor(schedule: &Schedule, floor_seconds: u64) -> Option<i64> {
    let floor_ms = i64::try_from(floor_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    calendar_of(schedule).ok().as_ref().and_then(closest_spacing_ms).filter(|gap| *gap < floor_ms)
}

/// The next `count` firings of `schedule` after `after_ms`, each on its wall
/// clock and in RFC 3339 UTC (none when its calendar does not parse).
#[must_use]
pub fn upcoming_in_words(schedule: &Schedule, after_ms: i64, count: usize) -> Vec<(String, String)> {
    let Ok(calendar) = calendar_of(schedule) else { return Vec::new() };
    calendar
        .upcoming(after_ms, count)
        .into_iter()
        .map(|at| (calendar.wall_clock(at), crate::machine::time::Instant(at).to_rfc3339()))
        .collect()
}

/// The catch-up window of a schedule, in ms.
#[must_use]
pub fn catch_up_ms(schedule: &Schedule) -> i64 {
    let seconds = schedule.catch_up_seconds.unwrap_or(DEFAULT_CATCH_UP_SECONDS);
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// The calendar of a schedule as written.
///
/// # Errors
/// [`CalendarError`] naming what does not parse.
pub fn calendar_of(schedule: &Schedule) -> Result<Calendar, CalendarError> {
    match (&schedule.cron, schedule.interval_seconds) {
        (Some(cron), _) => Calendar::cron(cron, schedule.time_zone.as_deref().unwrap_or(DEFAULT_TIME_ZONE)),
        (None, Some(seconds)) => {
            let text = schedule.anchor.as_deref().unwrap_or(DEFAULT_ANCHOR);
            let anchor = chrono::DateTime::parse_from_rfc3339(text)
                .map(|t| t.timestamp_millis())
                .map_err(|_| CalendarError::Anchor(text.to_owned()))?;
            Calendar::interval(seconds, anchor)
        }
        (None, None) => Err(CalendarError::Interval),
    }
}
