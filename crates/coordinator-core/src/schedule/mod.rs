//! Schedules: runs admitted on the calendar. [`calendar`] says when a
//! schedule fires; [`calendar_of`] builds it from a `workflow.yaml` schedule.

pub mod calendar;

pub use calendar::{Calendar, CalendarError, zone};

use crate::model::workflow::Schedule;

/// The time zone a cron schedule is read in when it names none.
pub const DEFAULT_TIME_ZONE: &str = "UTC";
/// The instant an interval counts from when it names none (the epoch).
pub const DEFAULT_ANCHOR: &str = "1970-01-01T00:00:00Z";
/// The catch-up window of a schedule that names none, in seconds.
pub const DEFAULT_CATCH_UP_SECONDS: u64 = 3600;

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
