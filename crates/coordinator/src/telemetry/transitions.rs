//! The log lines of a run's transitions, told only after the transaction that
//! wrote them committed (docs/internals/engine.md#one-event-one-transaction:
//! metrics, logs and spans after commit). A [`Transcript`] is gathered from the
//! decided actions inside the decide closure and told by the engine's
//! after-commit hook; a decision that rolled back is never told, so the log
//! never says what the database does not hold.
//!
//! Every line carries the run (`run_id`, `workflow`, `revision`), the event
//! (`event`: its kind, `outcome`: `applied`, `ignored` or `refused`) and,
//! where it concerns one, the `step` and the `attempt`. **Invariant:** the
//! fields are names, numbers, instants, states and codes from closed
//! vocabularies — never an input, a command, an output or a completion value.

use coordinator_core::machine::action::{Action, WaitResolution};
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::{Attention, CancelMode};
use coordinator_core::model::run::{EffectState, RunState};
use tracing::Level;

use crate::telemetry::metrics::{Decided, event_kind};

/// Which run a line is about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunContext<'a> {
    /// The run id.
    pub run_id: &'a str,
    /// Its workflow.
    pub workflow: &'a str,
    /// Its revision.
    pub revision: &'a str,
    /// Its trace id, when traces are exported (to find the run's trace from a line).
    pub trace_id: Option<&'a str>,
}

/// One line of a transcript: a message from a fixed vocabulary and its fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Line {
    level: Severity,
    message: &'static str,
    step: Option<String>,
    attempt: Option<u32>,
    effect: Option<&'static str>,
    refusal: Option<String>,
    reason: Option<&'static str>,
    state: Option<&'static str>,
    finish: Option<String>,
    failure: Option<String>,
    at: Option<String>,
    resolution: Option<&'static str>,
    result: Option<String>,
}

/// A line's level (a `tracing::Level` is not `Default`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Severity {
    Debug,
    #[default]
    Info,
    Warn,
}

/// What a committed transition says, in the order its actions came.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Transcript {
    event: &'static str,
    lines: Vec<Line>,
}

impl Transcript {
    /// The lines of `event`'s transition made of `actions`, decided at `now` (ms).
    pub(crate) fn of(event: &Event, actions: &[Action], now: i64) -> Transcript {
        let mut lines = Vec::new();
        if matches!(event, Event::Admitted) {
            lines.push(Line { message: "run admitted", ..Line::default() });
        }
        for action in actions {
            if let Some(line) = line_of(action, now) {
                lines.push(line);
            }
        }
        Transcript { event: event_kind(event), lines }
    }

    /// Writes the lines (after commit), with the classifier's `reason` on the
    /// line of an answered attempt when the worker gave one.
    pub(crate) fn tell(&self, run: RunContext<'_>, reason: Option<&str>) {
        for line in &self.lines {
            let reason = if line.effect.is_some() { reason } else { None };
            emit(run, self.event, "applied", line, reason);
        }
    }
}

/// The line of an event the machine did not apply (nothing was written):
/// `refused` at info (an operator's request the rules do not allow, with the
/// machine's code), `ignored` at debug (a stale report, a timer no longer wanted).
pub(crate) fn tell_unapplied(run: RunContext<'_>, event: &Event, decided: Decided, why: &str) {
    let kind = event_kind(event);
    match decided {
        Decided::Refused => tracing::info!(
            run_id = run.run_id,
            workflow = run.workflow,
            revision = run.revision,
            trace_id = run.trace_id,
            event = kind,
            outcome = decided.as_str(),
            code = why,
            "event refused"
        ),
        Decided::Ignored | Decided::Applied => tracing::debug!(
            run_id = run.run_id,
            workflow = run.workflow,
            revision = run.revision,
            trace_id = run.trace_id,
            event = kind,
            outcome = decided.as_str(),
            reason = why,
            "event ignored"
        ),
    }
}

fn line_of(action: &Action, now: i64) -> Option<Line> {
    let on = |step: &str| Some(step.to_owned());
    let line = match action {
        Action::EnterStep { step } => {
            Line { level: Severity::Debug, message: "step entered", step: on(step), ..Line::default() }
        }
        Action::Dispatch { step, attempt, not_before } => {
            let later = not_before.0 > now;
            Line {
                message: if later { "retry scheduled" } else { "attempt queued" },
                step: on(step),
                attempt: Some(*attempt),
                at: later.then(|| not_before.to_rfc3339()),
                ..Line::default()
            }
        }
        Action::RecordEffect { step, attempt, effect, refusal, .. } => Line {
            level: if *effect == EffectState::Unknown { Severity::Warn } else { Severity::Info },
            message: if *effect == EffectState::Unknown { "effect uncertain" } else { "attempt answered" },
            step: on(step),
            attempt: Some(*attempt),
            effect: Some(effect.as_str()),
            refusal: refusal.clone(),
            ..Line::default()
        },
        Action::RequestReceipt { step } => Line { message: "receipt lookup queued", step: on(step), ..Line::default() },
        Action::RecordReceipt { step, result } => {
            Line { message: "receipt answered", step: on(step), result: Some(result.clone()), ..Line::default() }
        }
        Action::StartWait { step, timeout_at, .. } => Line {
            message: "waiting for a completion",
            step: on(step),
            at: Some(timeout_at.to_rfc3339()),
            ..Line::default()
        },
        Action::StartTimer { step, until } => Line {
            message: "waiting until an instant",
            step: on(step),
            at: Some(until.to_rfc3339()),
            ..Line::default()
        },
        Action::ResolveWait { step, resolution, .. } => Line {
            message: "wait ended",
            step: on(step),
            resolution: Some(resolution_name(*resolution)),
            ..Line::default()
        },
        Action::EnterAttention { reason } => {
            let (reason, step) = match reason {
                Attention::UnknownEffect { step } => ("unknown-effect", on(step)),
                Attention::RestoreHold => ("restore-hold", None),
            };
            Line {
                level: Severity::Warn,
                message: "run needs attention",
                step,
                reason: Some(reason),
                ..Line::default()
            }
        }
        Action::LeaveAttention => Line { message: "attention settled", ..Line::default() },
        Action::RequestCancel { mode } => {
            Line { message: "cancel requested", reason: Some(cancel_mode(*mode)), ..Line::default() }
        }
        Action::EndRun { state, outcome, failure, .. } => Line {
            level: match state {
                RunState::Failed | RunState::Expired => Severity::Warn,
                _ => Severity::Info,
            },
            message: ended(*state),
            state: Some(state.as_str()),
            finish: outcome.clone(),
            failure: failure.as_ref().map(|f| f.code.clone()),
            step: failure.as_ref().and_then(|f| f.step.clone()),
            ..Line::default()
        },
        Action::PlaceHold => {
            Line { level: Severity::Warn, message: "restore hold placed on the run", ..Line::default() }
        }
        Action::ReleaseHold => Line { message: "restore hold released from the run", ..Line::default() },
        Action::PrepareCommand { step, .. } => {
            Line { level: Severity::Debug, message: "command prepared", step: on(step), ..Line::default() }
        }
        Action::Observe { step, seq, .. } => Line {
            level: Severity::Debug,
            message: "observation queued",
            step: on(step),
            attempt: Some(*seq),
            ..Line::default()
        },
        Action::RecordObservation { .. }
        | Action::ScheduleTimer { .. }
        | Action::CancelTimer { .. }
        | Action::Audit { .. } => return None,
    };
    Some(line)
}

fn ended(state: RunState) -> &'static str {
    match state {
        RunState::Finished => "run finished",
        RunState::Failed => "run failed",
        RunState::Cancelled | RunState::CancelledAfterEffect => "run cancelled",
        RunState::Expired => "run expired",
        RunState::Running | RunState::Attention | RunState::CancelRequested => "run ended",
    }
}

fn resolution_name(resolution: WaitResolution) -> &'static str {
    match resolution {
        WaitResolution::Completed => "completed",
        WaitResolution::TimedOut => "timed-out",
        WaitResolution::Cancelled => "cancelled",
    }
}

fn cancel_mode(mode: CancelMode) -> &'static str {
    match mode {
        CancelMode::Settling => "settling the call in flight first",
        CancelMode::Route => "following onCancel",
        CancelMode::Deferred => "deferred until the restore hold is released",
    }
}

/// One line at its level with every field it has (absent ones are not written).
fn emit(run: RunContext<'_>, event: &'static str, outcome: &'static str, line: &Line, reason: Option<&str>) {
    macro_rules! at {
        ($level:expr) => {
            tracing::event!(
                $level,
                run_id = run.run_id,
                workflow = run.workflow,
                revision = run.revision,
                trace_id = run.trace_id,
                event,
                outcome,
                step = line.step.as_deref(),
                attempt = line.attempt,
                effect = line.effect,
                refusal = line.refusal.as_deref(),
                reason = line.reason.or(reason),
                state = line.state,
                finish = line.finish.as_deref(),
                failure = line.failure.as_deref(),
                at = line.at.as_deref(),
                resolution = line.resolution,
                result = line.result.as_deref(),
                "{}",
                line.message
            )
        };
    }
    match line.level {
        Severity::Debug => at!(Level::DEBUG),
        Severity::Info => at!(Level::INFO),
        Severity::Warn => at!(Level::WARN),
    }
}

#[cfg(test)]
mod tests {
    use coordinator_core::machine::run::Failure;
    use coordinator_core::machine::time::Instant;

    use super::*;

    #[test]
    fn an_admission_that_dispatches_says_admitted_then_queued() {
        let actions = vec![
            Action::EnterStep { step: "read".into() },
            Action::Dispatch { step: "read".into(), attempt: 1, not_before: Instant(5) },
        ];
        let t = Transcript::of(&Event::Admitted, &actions, 5);
        let messages: Vec<_> = t.lines.iter().map(|l| l.message).collect();
        assert_eq!(messages, ["run admitted", "step entered", "attempt queued"]);
        assert_eq!(t.event, "admitted");
        assert_eq!(t.lines[2].attempt, Some(1));
        assert_eq!(t.lines[2].at, None);
    }

    #[test]
    fn a_later_dispatch_is_a_scheduled_retry_and_an_unknown_effect_a_warning() {
        let actions = vec![
            Action::RecordEffect {
                step: "send".into(),
                attempt: 2,
                effect: EffectState::Unknown,
                output: Some(serde_json::json!({"secret": "value"})),
                completions: Default::default(),
                refusal: None,
            },
            Action::Dispatch { step: "send".into(), attempt: 3, not_before: Instant(10_000) },
            Action::EnterAttention { reason: Attention::UnknownEffect { step: "send".into() } },
        ];
        let t = Transcript::of(
            &Event::TimerDue { timer: coordinator_core::machine::event::Timer::RunDeadline },
            &actions,
            1,
        );
        assert_eq!(t.lines[0].message, "effect uncertain");
        assert_eq!(t.lines[0].level, Severity::Warn);
        assert_eq!(t.lines[1].message, "retry scheduled");
        assert_eq!(t.lines[1].at.as_deref(), Some(Instant(10_000).to_rfc3339().as_str()));
        assert_eq!((t.lines[2].message, t.lines[2].reason), ("run needs attention", Some("unknown-effect")));
        assert!(!format!("{t:?}").contains("secret"), "no output value is kept: {t:?}");
    }

    #[test]
    fn a_failed_run_names_its_code_and_step() {
        let failure = Failure { code: "product.invalid-output".into(), step: Some("read".into()), message: "m".into() };
        let actions =
            vec![Action::EndRun { state: RunState::Failed, outcome: None, output: None, failure: Some(failure) }];
        let t = Transcript::of(&Event::CancelRequested, &actions, 0);
        let line = &t.lines[0];
        assert_eq!((line.message, line.state, line.level), ("run failed", Some("failed"), Severity::Warn));
        assert_eq!((line.failure.as_deref(), line.step.as_deref()), (Some("product.invalid-output"), Some("read")));
    }
}
