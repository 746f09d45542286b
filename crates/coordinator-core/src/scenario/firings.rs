//! Schedule cases of `coordinatorctl test` (docs/reference/scenarios.md#firings):
//! the virtual clock runs from `from` to `until`, the schedule fires at each
//! nominal instant in between as the service would (the calendar's own rules,
//! daylight saving included), and each firing's input is computed by the
//! schedule's input function and validated against the input schema.

use serde_json::Value;

use super::{CaseReport, Problem};
use crate::machine::compiled::Workflow;
use crate::machine::time::Instant;
use crate::model::scenarios::FiringsCase;
use crate::schedule::calendar_of;

/// The most firings one case follows.
const MOST_FIRINGS: usize = 10_000;

fn failed(case: &FiringsCase, message: impl Into<String>) -> CaseReport {
    CaseReport {
        id: case.id.clone(),
        passed: false,
        problem: Some(Problem::Firings { message: message.into() }),
        actual: None,
    }
}

/// Runs one schedule case.
pub fn run_firings(workflow: &Workflow, case: &FiringsCase) -> CaseReport {
    let Some(schedule) = workflow.definition.schedules.iter().find(|s| s.id == case.schedule) else {
        let ids: Vec<&str> = workflow.definition.schedules.iter().map(|s| s.id.as_str()).collect();
        return failed(case, format!("the workflow has no schedule `{}` (it has: {})", case.schedule, ids.join(", ")));
    };
    let (Some(from), Some(until)) = (Instant::parse_rfc3339(&case.from), Instant::parse_rfc3339(&case.until)) else {
        return failed(case, "`from` and `until` are RFC 3339 instants");
    };
    if until.0 <= from.0 {
        return failed(case, "`until` is not after `from`: the clock does not move");
    }
    let calendar = match calendar_of(schedule) {
        Ok(calendar) => calendar,
        Err(e) => return failed(case, format!("schedule `{}`: {e}", schedule.id)),
    };
    let mut fired: Vec<(i64, Value)> = Vec::new();
    let mut at = from.0;
    while let Some(next) = calendar.next_after(at).filter(|next| *next <= until.0) {
        if fired.len() == MOST_FIRINGS {
            return failed(
                case,
                format!("more than {MOST_FIRINGS} firings between `from` and `until`: shorten the case"),
            );
        }
        let nominal = Instant(next).to_rfc3339();
        let input = match workflow.schedule_input(schedule, next) {
            Ok(input) => input,
            Err(e) => return failed(case, format!("the firing at {nominal}: {e}")),
        };
        fired.push((next, input));
        at = next;
    }
    let shown = |ms: i64| format!("{} ({})", Instant(ms).to_rfc3339(), calendar.wall_clock(ms));
    for (i, expected) in case.expect.iter().enumerate() {
        let Some(want) = Instant::parse_rfc3339(&expected.at) else {
            return failed(case, format!("expected firing {} is not an RFC 3339 instant", i + 1));
        };
        match fired.get(i) {
            None => {
                let count = fired.len();
                return failed(
                    case,
                    format!("expected a firing at {}, but the schedule fires {count} time(s) only", shown(want.0)),
                );
            }
            Some((got, _)) if *got != want.0 => {
                return failed(
                    case,
                    format!("firing {}: expected at {}, fires at {}", i + 1, shown(want.0), shown(*got)),
                );
            }
            Some((_, input)) => {
                if let Some(wanted) = &expected.input
                    && wanted != input
                {
                    return failed(
                        case,
                        format!("firing {} at {}: the input differs from the expected one", i + 1, shown(want.0)),
                    );
                }
            }
        }
    }
    if let Some((extra, _)) = fired.get(case.expect.len()) {
        return failed(
            case,
            format!(
                "{} firing(s) expected, but the schedule fires {}; the next is at {}",
                case.expect.len(),
                fired.len(),
                shown(*extra)
            ),
        );
    }
    CaseReport { id: case.id.clone(), passed: true, problem: None, actual: None }
}
