//! Schedule proofs (docs/reference/project.md#schedules): ids unique; the
//! calendar parses — a cron expression that matches some time, in a time zone
//! of the bundled IANA database, or an interval — and fires no more often
//! than [`MIN_SPACING_SECONDS`]; the input function exists with two
//! parameters ([`functions`](super::functions) reports that) and, called at a
//! sample instant (the schedule's first firing after [`SAMPLE_AFTER`]), returns
//! an input the input schema accepts.

use coordinator_functions::Functions;
use serde_json::Value;

use crate::diagnostic::Code;
use crate::json_schema;
use crate::model::workflow::Schedule;
use crate::schedule::{Calendar, CalendarError, calendar_of, closest_spacing_ms};
pub use crate::schedule::{MIN_SPACING_SECONDS, SAMPLE_AFTER};
use crate::yaml::{Part, Path};

use super::context::Ctx;

/// Runs the schedule proofs with the compiled functions (none: the functions
/// file did not compile, and its own diagnostic says why).
pub fn check(cx: &mut Ctx<'_>, functions: Option<&Functions>) {
    let wf = cx.wf;
    // The input schema, compiled once (an invalid one has its own diagnostic).
    let validator = if wf.schedules.is_empty() { None } else { json_schema::compile(&wf.input).ok() };
    let mut seen: Vec<&str> = Vec::new();
    for (i, schedule) in wf.schedules.iter().enumerate() {
        let path = Path::root().key("schedules").index(i);
        if seen.contains(&schedule.id.as_str()) {
            cx.error(
                Code::ScheduleDuplicate,
                &path.key("id"),
                Part::Value,
                format!("two schedules have the id `{}`", schedule.id),
                "give each schedule its own id: it is part of each firing's idempotency key",
            );
        }
        seen.push(&schedule.id);
        let Some(calendar) = calendar(cx, &path, schedule) else { continue };
        spacing(cx, &path, schedule, &calendar);
        if let (Some(functions), Some(validator)) = (functions, &validator) {
            input(cx, &path, schedule, &calendar, functions, validator);
        }
    }
}

/// The schedule's calendar, or its diagnostic.
fn calendar(cx: &mut Ctx<'_>, path: &Path, schedule: &Schedule) -> Option<Calendar> {
    match calendar_of(schedule) {
        Ok(calendar) => Some(calendar),
        Err(CalendarError::Zone(zone)) => {
            cx.error(
                Code::ScheduleTimeZoneUnknown,
                &path.key("timeZone"),
                Part::Value,
                format!("`{zone}` is not a time zone of the IANA database"),
                "name a zone such as `Europe/Berlin`, `America/New_York` or `UTC` (case matters)",
            );
            None
        }
        Err(error @ (CalendarError::Cron(_) | CalendarError::Never)) => {
            cx.error(
                Code::ScheduleCronInvalid,
                &path.key("cron"),
                Part::Value,
                error.to_string(),
                "write five fields `minute hour day-of-month month day-of-week` (or six, seconds first), \
                 such as `0 8 * * MON-FRI`, or a nickname such as `@daily`",
            );
            None
        }
        Err(error @ (CalendarError::Interval | CalendarError::Anchor(_))) => {
            let field = if matches!(error, CalendarError::Anchor(_)) { "anchor" } else { "intervalSeconds" };
            cx.error(
                Code::SchemaInvalidValue,
                &path.key(field),
                Part::Value,
                error.to_string(),
                "an interval is a whole number of seconds from an RFC 3339 `anchor`",
            );
            None
        }
    }
}

/// No two of the sample firings closer than the floor.
fn spacing(cx: &mut Ctx<'_>, path: &Path, schedule: &Schedule, calendar: &Calendar) {
    let closest = closest_spacing_ms(calendar);
    if closest.is_some_and(|gap| gap < i64::try_from(MIN_SPACING_SECONDS * 1000).unwrap_or(i64::MAX)) {
        let field = if schedule.cron.is_some() { "cron" } else { "intervalSeconds" };
        cx.error(
            Code::ScheduleTooFrequent,
            &path.key(field),
            Part::Value,
            format!(
                "schedule `{}` fires {} ms apart; a schedule fires at most every {MIN_SPACING_SECONDS} seconds",
                schedule.id,
                closest.unwrap_or_default()
            ),
            format!("fire every {MIN_SPACING_SECONDS} seconds or less often"),
        );
    }
}

/// The input function's result at the first sample firing matches the input schema.
fn input(
    cx: &mut Ctx<'_>,
    path: &Path,
    schedule: &Schedule,
    calendar: &Calendar,
    functions: &Functions,
    validator: &jsonschema::Validator,
) {
    let function = &schedule.input.function;
    let takes_two = cx.functions.as_ref().and_then(|f| f.get(function)).is_some_and(|a| a.contains(&2));
    let Some(at) = calendar.next_after(SAMPLE_AFTER) else { return };
    if !takes_two {
        return;
    }
    let nominal = crate::machine::time::Instant(at).to_rfc3339();
    let help = "return an object the workflow's `input` schema accepts, computed from the instant and the id";
    let place = path.key("input").key("function");
    match functions.call(function, &[Value::String(nominal.clone()), Value::String(schedule.id.clone())]) {
        Err(e) => cx.error(
            Code::ScheduleInputInvalid,
            &place,
            Part::Value,
            format!("`{function}` fails at the sample instant {nominal}: {e}"),
            help,
        ),
        Ok(returned) => {
            let violations = json_schema::violations(validator, &returned);
            if let Some(first) = violations.first() {
                let at_pointer =
                    if first.pointer.is_empty() { "the input".to_owned() } else { format!("`{}`", first.pointer) };
                cx.error(
                    Code::ScheduleInputInvalid,
                    &place,
                    Part::Value,
                    format!(
                        "`{function}` returns an input the schema refuses at the sample instant {nominal}: {at_pointer} {}",
                        first.message
                    ),
                    help,
                );
            }
        }
    }
}
