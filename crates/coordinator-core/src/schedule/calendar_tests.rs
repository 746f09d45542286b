//! Calendars across daylight saving in two zones on each side of the
//! Atlantic, intervals, and what does not parse.

use super::*;

fn at(text: &str) -> i64 {
    DateTime::parse_from_rfc3339(text).map(|t| t.timestamp_millis()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn firings(calendar: &Calendar, after: &str, count: usize) -> Vec<String> {
    calendar
        .upcoming(at(after), count)
        .into_iter()
        .map(|ms| DateTime::<Utc>::from_timestamp_millis(ms).map(|t| t.to_rfc3339()).unwrap_or_default())
        .collect()
}

fn cron(expression: &str, zone: &str) -> Calendar {
    Calendar::cron(expression, zone).unwrap_or_else(|e| panic!("{expression} in {zone}: {e}"))
}

#[test]
fn a_local_time_the_clock_jumps_over_fires_at_the_jump_new_york() {
    // 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC).
    let daily = cron("30 2 * * *", "America/New_York");
    assert_eq!(
        firings(&daily, "2026-03-07T00:00:00Z", 3),
        ["2026-03-07T07:30:00+00:00", "2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00"]
    );
    // Every quarter hour: the four local times inside the jump fire once, at it.
    let quarter = cron("*/15 * * * *", "America/New_York");
    assert_eq!(
        firings(&quarter, "2026-03-08T06:40:00Z", 3),
        ["2026-03-08T06:45:00+00:00", "2026-03-08T07:00:00+00:00", "2026-03-08T07:15:00+00:00"]
    );
}

#[test]
fn a_local_time_that_happens_twice_fires_once_at_the_first_new_york() {
    // 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:30 happens at 05:30 and 06:30 UTC.
    let daily = cron("30 1 * * *", "America/New_York");
    assert_eq!(firings(&daily, "2026-10-31T12:00:00Z", 2), ["2026-11-01T05:30:00+00:00", "2026-11-02T06:30:00+00:00"]);
    // Starting inside the repeated hour's second half, its local times are not fired again.
    let half_hourly = cron("*/30 * * * *", "America/New_York");
    assert_eq!(
        firings(&half_hourly, "2026-11-01T05:00:00Z", 3),
        ["2026-11-01T05:30:00+00:00", "2026-11-01T07:00:00+00:00", "2026-11-01T07:30:00+00:00"]
    );
    assert_eq!(firings(&half_hourly, "2026-11-01T06:10:00Z", 1), ["2026-11-01T07:00:00+00:00"]);
}

#[test]
fn both_transitions_in_berlin() {
    // 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
    let daily = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(daily.wall_clock(at("2026-03-29T01:00:00Z")), "2026-03-29 03:00:00 CEST (+02:00)");
    assert_eq!(daily.wall_clock(at("2026-03-28T01:30:00Z")), "2026-03-28 02:30:00 CET (+01:00)");
    assert_eq!(
        firings(&daily, "2026-03-28T00:00:00Z", 3),
        ["2026-03-28T01:30:00+00:00", "2026-03-29T01:00:00+00:00", "2026-03-30T00:30:00+00:00"]
    );
    // 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens at 00:30 and 01:30 UTC.
    assert_eq!(firings(&daily, "2026-10-24T12:00:00Z", 2), ["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]);
}

#[test]
fn weekdays_at_eight_in_the_office_zone_and_seconds_when_given() {
    let weekdays = cron("0 8 * * MON-FRI", "Europe/Berlin");
    // 2026-12-04 is a Friday: the next is Monday the 7th, 08:00 CET.
    assert_eq!(
        firings(&weekdays, "2026-12-04T08:00:00Z", 2),
        ["2026-12-07T07:00:00+00:00", "2026-12-08T07:00:00+00:00"]
    );
    let every_half_minute = cron("*/30 * * * * *", "UTC");
    assert_eq!(
        firings(&every_half_minute, "2026-12-07T10:00:10Z", 2),
        ["2026-12-07T10:00:30+00:00", "2026-12-07T10:01:00+00:00"]
    );
    assert_eq!(firings(&cron("@daily", "UTC"), "2026-12-07T10:00:00Z", 1), ["2026-12-08T00:00:00+00:00"]);
    for (nickname, next) in [
        ("@hourly", "2026-12-07T11:00:00+00:00"),
        ("@weekly", "2026-12-13T00:00:00+00:00"),
        ("@monthly", "2027-01-01T00:00:00+00:00"),
        ("@yearly", "2027-01-01T00:00:00+00:00"),
    ] {
        assert_eq!(firings(&cron(nickname, "UTC"), "2026-12-07T10:00:00Z", 1), [next], "{nickname}");
    }
    // A day of the month and a day of the week both given: either matches (Friday the 11th comes first).
    assert_eq!(
        firings(&cron("0 0 13 * FRI", "UTC"), "2026-12-07T10:00:00Z", 2),
        ["2026-12-11T00:00:00+00:00", "2026-12-13T00:00:00+00:00"]
    );
}

#[test]
fn an_interval_counts_from_its_anchor() {
    let every = Calendar::interval(30, at("2026-12-07T10:00:05Z")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(firings(&every, "2026-12-07T10:00:05Z", 2), ["2026-12-07T10:00:35+00:00", "2026-12-07T10:01:05+00:00"]);
    assert_eq!(firings(&every, "2026-12-07T09:00:00Z", 1), ["2026-12-07T10:00:05+00:00"], "the anchor itself first");
    assert!(every.time_zone().is_none());
    assert_eq!(Calendar::interval(0, 0).err(), Some(CalendarError::Interval));
}

#[test]
fn what_does_not_parse_is_named() {
    assert!(matches!(Calendar::cron("61 * * * *", "UTC"), Err(CalendarError::Cron(_))));
    assert!(matches!(Calendar::cron("every day", "UTC"), Err(CalendarError::Cron(_))));
    assert_eq!(
        Calendar::cron("0 8 * * *", "Europe/Atlantis").err(),
        Some(CalendarError::Zone("Europe/Atlantis".into()))
    );
    assert_eq!(Calendar::cron("0 0 30 2 *", "UTC").err(), Some(CalendarError::Never));
    assert!(zone("Asia/Tokyo").is_some() && zone("asia/tokyo").is_none());
}
