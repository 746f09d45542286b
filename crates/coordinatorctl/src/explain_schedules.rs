//! `coordinatorctl explain`'s schedules: for each, its calendar, input
//! function, overlap policy and catch-up window, and its next firings after
//! a given instant, on its own wall clock and in UTC.

use coordinator_core::model::workflow::{Overlap, Schedule};
use coordinator_core::schedule::{DEFAULT_ANCHOR, DEFAULT_CATCH_UP_SECONDS, DEFAULT_TIME_ZONE, upcoming_in_words};
use serde_json::{Value, json};

/// Firings shown for each schedule.
pub const NEXT: usize = 5;

fn overlap(schedule: &Schedule) -> &'static str {
    match schedule.overlap.unwrap_or_default() {
        Overlap::Skip => "skip",
        Overlap::Allow => "allow",
        Overlap::OnePending => "one-pending",
    }
}

/// The next firings after `now_ms`: (wall clock, UTC).
fn next(schedule: &Schedule, now_ms: i64) -> Vec<(String, String)> {
    upcoming_in_words(schedule, now_ms, NEXT)
}

fn when(schedule: &Schedule) -> String {
    match (&schedule.cron, schedule.interval_seconds) {
        (Some(cron), _) => {
            format!("cron `{cron}` in {}", schedule.time_zone.as_deref().unwrap_or(DEFAULT_TIME_ZONE))
        }
        (None, Some(seconds)) => {
            format!("every {seconds} s from {}", schedule.anchor.as_deref().unwrap_or(DEFAULT_ANCHOR))
        }
        (None, None) => String::new(),
    }
}

/// The schedules as JSON.
pub fn json(schedules: &[Schedule], now_ms: i64) -> Value {
    let items: Vec<Value> = schedules
        .iter()
        .map(|s| {
            let next: Vec<Value> =
                next(s, now_ms).into_iter().map(|(local, utc)| json!({"local": local, "utc": utc})).collect();
            json!({
                "id": s.id,
                "cron": s.cron,
                "timeZone": s.cron.as_ref().map(|_| s.time_zone.as_deref().unwrap_or(DEFAULT_TIME_ZONE)),
                "intervalSeconds": s.interval_seconds,
                "anchor": s.anchor,
                "input": s.input.function,
                "overlap": overlap(s),
                "catchUpSeconds": s.catch_up_seconds.unwrap_or(DEFAULT_CATCH_UP_SECONDS),
                "idempotencyKey": format!("schedule:{}:<nominal instant>", s.id),
                "next": next,
            })
        })
        .collect();
    Value::Array(items)
}

/// The schedules for people, one block each.
pub fn human(schedules: &[Schedule], now_ms: i64) -> String {
    let mut out = String::new();
    for s in schedules {
        out.push_str(&format!("\nschedule {}\n", s.id));
        let mut row = |name: &str, line: String| out.push_str(&format!("  {name:<16}{line}\n"));
        row("when", when(s));
        row("input", format!("{}(nominal instant, \"{}\")", s.input.function, s.id));
        row("overlap", overlap(s).to_owned());
        row(
            "catch up",
            format!(
                "instants missed up to {} s old, oldest first",
                s.catch_up_seconds.unwrap_or(DEFAULT_CATCH_UP_SECONDS)
            ),
        );
        row("idempotency key", format!("schedule:{}:<nominal instant, RFC 3339 UTC>", s.id));
        for (i, (local, utc)) in next(s, now_ms).into_iter().enumerate() {
            row(if i == 0 { "next firings" } else { "" }, format!("{local} = {utc}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_core::model::workflow::ScheduleInput;

    fn nightly() -> Schedule {
        Schedule {
            id: "nightly".into(),
            cron: Some("30 2 * * *".into()),
            time_zone: Some("Europe/Berlin".into()),
            interval_seconds: None,
            anchor: None,
            input: ScheduleInput { function: "nightly_input".into() },
            overlap: None,
            catch_up_seconds: None,
            description: None,
        }
    }

    #[test]
    fn the_next_five_firings_on_the_wall_clock_and_in_utc_across_a_change_of_time() {
        // 2026-03-27T12:00Z: the 29th's 02:30 does not exist in Berlin; it fires at 03:00 CEST.
        let now = 1_774_612_800_000;
        let text = human(&[nightly()], now);
        for expected in [
            "\nschedule nightly\n  when            cron `30 2 * * *` in Europe/Berlin\n",
            "  input           nightly_input(nominal instant, \"nightly\")\n",
            "  overlap         skip\n  catch up        instants missed up to 3600 s old, oldest first\n",
            "  next firings    2026-03-28 02:30:00 CET (+01:00) = 2026-03-28T01:30:00Z\n",
            "                  2026-03-29 03:00:00 CEST (+02:00) = 2026-03-29T01:00:00Z\n",
            "                  2026-03-30 02:30:00 CEST (+02:00) = 2026-03-30T00:30:00Z\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        let value = json(&[nightly()], now);
        assert_eq!(value[0]["next"].as_array().map(Vec::len), Some(NEXT));
        assert_eq!(value[0]["next"][1]["utc"], "2026-03-29T01:00:00Z");
        assert_eq!(value[0]["timeZone"], "Europe/Berlin");
    }
}
