//! The scenario runner behind `coordinatorctl test`
//! (docs/reference/scenarios.md): each case runs through the same state
//! machine, mappings and functions as the service, on a virtual clock, with
//! scripted product replies and operator actions. No credential, no request, no
//! real time.
//!
//! Rules: a call takes no virtual time; an operator action happens at the
//! instant the run entered attention; events due at the same instant apply in
//! the order run deadline, cancel, wait timeout, notification, then
//! observations, timers and dispatches. A case stops when the run is terminal,
//! or needs an operator and the case scripts no further action.
//!
//! Schedule cases ([`run_firings`]) follow a schedule's firings on the
//! virtual clock and the input each would admit.

mod compare;
mod firings;
mod script;

use serde::Serialize;
use serde_json::Value;

pub use self::compare::{Actual, Difference};
pub use self::firings::run_firings;
use self::script::Script;
use crate::machine::compiled::{Workflow, describe};
use crate::machine::event::{Event, Timer};
use crate::machine::run::{Attention, Pending, Run, StepRecord};
use crate::machine::time::Instant;
use crate::machine::{Settings, advance};
use crate::model::scenarios::{Case, OperatorAction};

/// Upper bound on events per case: a case that needs more is reported, never spun forever.
const MAX_EVENTS: usize = 100_000;

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseReport {
    /// The case id.
    pub id: String,
    /// Whether every expectation held and the script was used exactly.
    pub passed: bool,
    /// What went wrong, when it did not pass: the first difference, or a script problem.
    pub problem: Option<Problem>,
    /// What the run did.
    pub actual: Option<Actual>,
}

/// Why a case did not pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Problem {
    /// An expectation differs from what happened.
    Difference(Difference),
    /// A schedule case: the firings differ from the expected ones, or cannot be computed.
    Firings {
        /// What differs, or why the firings cannot be computed.
        message: String,
    },
    /// The case cannot run as scripted (a missing or unused reply, bad input).
    Script {
        /// The step concerned, if any.
        step: Option<String>,
        /// What is wrong.
        message: String,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Difference(d) => write!(f, "{d}"),
            Problem::Firings { message } => f.write_str(message),
            Problem::Script { step: Some(step), message } => write!(f, "at step `{step}`: {message}"),
            Problem::Script { step: None, message } => f.write_str(message),
        }
    }
}

fn script_problem(id: &str, step: Option<&str>, message: impl Into<String>) -> CaseReport {
    CaseReport {
        id: id.to_owned(),
        passed: false,
        problem: Some(Problem::Script { step: step.map(str::to_owned), message: message.into() }),
        actual: None,
    }
}

/// A next event and when it happens. Replies are looked up only once chosen, so a
/// reply the run never comes to need (the deadline fired first) is not demanded.
struct Next {
    at: Instant,
    precedence: u8,
    pick: Pick,
}

enum Pick {
    Event(Event),
    Answer { step: String, attempt: u32 },
    Receipt { step: String },
    Observation { step: String, seq: u32 },
}

/// Runs one case.
pub fn run_case(workflow: &Workflow, case: &Case, settings: &Settings) -> CaseReport {
    let Some(admitted_at) = Instant::parse_rfc3339(&case.admitted_at) else {
        return script_problem(&case.id, None, "admittedAt is not an RFC 3339 instant");
    };
    let violations = workflow.check_input(&case.input);
    if !violations.is_empty() {
        return script_problem(
            &case.id,
            None,
            format!("the input does not match the workflow's input schema: {}", describe(&violations)),
        );
    }
    let mut script = Script::new(case);
    if let Err((step, message)) = script.check_steps(workflow) {
        return script_problem(&case.id, Some(&step), message);
    }
    let mut run = Run::new(&format!("scenario-{}", case.id), &workflow.revision, admitted_at, case.input.clone());
    let mut now = admitted_at;
    let mut cancel_at = case.cancel_at_seconds.map(|s| admitted_at.plus_seconds(s));
    let mut notifications: Vec<(Instant, String)> =
        case.notifications.iter().map(|n| (admitted_at.plus_seconds(n.at_seconds), n.step.clone())).collect();
    notifications.sort();
    let mut attention_since: Option<Instant> = None;
    let mut next = Some(Next { at: now, precedence: 0, pick: Pick::Event(Event::Admitted) });
    let mut events = 0;
    while let Some(Next { at, pick, .. }) = next.take() {
        events += 1;
        if events > MAX_EVENTS {
            return script_problem(&case.id, None, format!("the run did not settle within {MAX_EVENTS} events"));
        }
        now = now.max(at);
        let event = match script.resolve(pick) {
            Ok(event) => event,
            Err((step, message)) => return script_problem(&case.id, Some(&step), message),
        };
        advance(workflow, &mut run, &event, now, settings);
        if run.state.is_terminal() {
            break;
        }
        if run.attention.is_some() {
            attention_since.get_or_insert(now);
        } else {
            attention_since = None;
        }
        next = upcoming(&run, &mut script, now, &mut cancel_at, &mut notifications);
    }
    let stopped_at = if run.state.is_terminal() { now } else { attention_since.unwrap_or(now) };
    if let Some((step, message)) = script.unused() {
        return CaseReport {
            id: case.id.clone(),
            passed: false,
            problem: Some(Problem::Script { step: Some(step), message }),
            actual: Some(Actual::of(workflow, &run, stopped_at)),
        };
    }
    let actual = Actual::of(workflow, &run, stopped_at);
    let difference = compare::first_difference(&case.expect, &actual);
    CaseReport {
        id: case.id.clone(),
        passed: difference.is_none(),
        problem: difference.map(Problem::Difference),
        actual: Some(actual),
    }
}

/// The next event: work due now (answers, operator actions) or the earliest future one.
fn upcoming(
    run: &Run,
    script: &mut Script,
    now: Instant,
    cancel_at: &mut Option<Instant>,
    notifications: &mut Vec<(Instant, String)>,
) -> Option<Next> {
    let mut candidates: Vec<Next> = Vec::new();
    if let Some(at) = *cancel_at {
        candidates.push(Next { at: at.max(now), precedence: 1, pick: Pick::Event(Event::CancelRequested) });
    }
    if let Some((at, step)) = notifications.first() {
        let event = Event::CompletionNotified { step: step.clone() };
        candidates.push(Next { at: (*at).max(now), precedence: 3, pick: Pick::Event(event) });
    }
    for (timer, at) in &run.timers {
        let event = Event::TimerDue { timer: timer.clone() };
        candidates.push(Next { at: (*at).max(now), precedence: timer_precedence(timer), pick: Pick::Event(event) });
    }
    if let Some(step) = run.current.clone() {
        match run.steps.get(&step) {
            Some(StepRecord::Call(call)) => match call.pending {
                Pending::Attempt { not_before } => {
                    let pick = Pick::Answer { step, attempt: call.attempt };
                    candidates.push(Next { at: not_before.max(now), precedence: 4, pick });
                }
                Pending::Receipt => candidates.push(Next { at: now, precedence: 4, pick: Pick::Receipt { step } }),
                Pending::Nothing => {}
            },
            Some(StepRecord::WaitFor(wait)) if wait.observing => {
                candidates.push(Next { at: now, precedence: 4, pick: Pick::Observation { step, seq: wait.seq } });
            }
            _ => {}
        }
    }
    let busy_now = candidates.iter().any(|c| c.at == now);
    if let Some(Attention::UnknownEffect { step }) = &run.attention
        && !busy_now
        && let Some(action) = script.operator(step)
    {
        let event = match action {
            OperatorAction::Reconcile => Event::ReconcileRequested { step: step.clone() },
            OperatorAction::RetrySame => Event::RetrySameRequested { step: step.clone() },
            OperatorAction::Cancel => Event::CancelRequested,
        };
        return Some(Next { at: now, precedence: 4, pick: Pick::Event(event) });
    }
    if run.attention.is_some() && !busy_now && cancel_at.is_none() {
        // Waiting for an operator the case does not script: the case stops here.
        // (A scripted cancel still comes at its time, and the run waits in attention until then.)
        return None;
    }
    let best = candidates.into_iter().min_by_key(|c| (c.at, c.precedence))?;
    match &best.pick {
        Pick::Event(Event::CancelRequested) => *cancel_at = None,
        Pick::Event(Event::CompletionNotified { .. }) => {
            notifications.remove(0);
        }
        _ => {}
    }
    Some(best)
}

fn timer_precedence(timer: &Timer) -> u8 {
    match timer {
        Timer::RunDeadline => 0,
        Timer::WaitTimeout { .. } => 2,
        Timer::Observation { .. } | Timer::WaitUntil { .. } => 4,
    }
}

/// Runs every case of a scenarios file.
pub fn run_all(workflow: &Workflow, cases: &[Case], settings: &Settings) -> Vec<CaseReport> {
    cases.iter().map(|case| run_case(workflow, case, settings)).collect()
}

/// A JSON summary of reports (for `--format json`).
pub fn summary(reports: &[CaseReport]) -> Value {
    let passed = reports.iter().filter(|r| r.passed).count();
    serde_json::json!({ "cases": reports, "passed": passed, "failed": reports.len() - passed })
}
