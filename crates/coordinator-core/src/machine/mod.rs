//! The pure state machine: every run, in tests and in the service, is decided here.
//!
//! [`decide`] takes the compiled workflow, the locked run snapshot, one
//! [`Event`] and the current instant, and returns a [`Transition`]: the
//! [`Action`]s to persist, or why the event was ignored or refused. It does no
//! IO and reads no clock; [`Run::apply`] gives each action its meaning, so the
//! scenario runner and the service change runs the same way.
//!
//! Rules live one concept per module: [`flow`] (entering steps: call, choose,
//! wait-until, wait-for, finish), [`call`] (classified answers, retries,
//! uncertainty), [`wait`] (timers, observations, nudges, timeouts), [`operator`]
//! (cancel, retry-same, reconcile, restore hold), [`mapping`] (sources and
//! functions), [`trigger`] (what a product event admits: run input and key),
//! [`search_keys`] (the named values a run is found by),
//! [`schedule_input`] (a schedule's run input at an instant).

pub mod action;
mod call;
pub mod compiled;
pub mod event;
mod flow;
mod mapping;
mod operator;
pub mod run;
pub mod schedule_input;
pub mod search_keys;
pub mod time;
pub mod trigger;
mod wait;

use serde::{Deserialize, Serialize};

use self::action::{Action, AuditKind};
use self::compiled::Workflow;
use self::event::Event;
use self::run::{Failure, Run};
use self::time::Instant;
use crate::model::catalog::Effect;
use crate::model::run::{EffectState, RunState};
use crate::model::workflow::DEFAULT_OBSERVE_FLOOR_SECONDS;

/// Deployment settings the machine needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The minimum seconds between observations of a completion.
    pub observe_floor_seconds: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { observe_floor_seconds: DEFAULT_OBSERVE_FLOOR_SECONDS }
    }
}

/// What became of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Outcome {
    /// The actions are to be persisted.
    Applied,
    /// Nothing to do (a stale answer, a timer no longer wanted): acknowledge and move on.
    Ignored {
        /// Why.
        reason: String,
    },
    /// An operator's request that the rules do not allow; nothing changes.
    Refused {
        /// A stable code (`operation.never-repeat`, `operation.no-receipt`, …).
        code: String,
        /// Why.
        message: String,
    },
}

/// The machine's decision on one event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// What to persist, in order.
    pub actions: Vec<Action>,
    /// Applied, ignored or refused.
    pub outcome: Outcome,
}

/// Decides one event for one run. The snapshot is not changed: apply the
/// transition's actions to it ([`Run::apply`]) once they are persisted.
pub fn decide(workflow: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings) -> Transition {
    let mut copy = run.clone();
    advance(workflow, &mut copy, event, now, settings)
}

/// Decides one event and applies its actions to `run` in place: the same
/// decision as [`decide`], without copying the snapshot (for callers that keep
/// runs in memory, such as the scenario runner). An ignored or refused event
/// leaves `run` unchanged.
pub fn advance(workflow: &Workflow, run: &mut Run, event: &Event, now: Instant, settings: &Settings) -> Transition {
    let mut machine = Machine { wf: workflow, run, now, settings, actions: Vec::new() };
    let outcome = machine.handle(event);
    match outcome {
        Outcome::Applied => Transition { actions: machine.actions, outcome },
        Outcome::Ignored { .. } | Outcome::Refused { .. } => {
            assert!(
                machine.actions.is_empty(),
                "an event that is not applied must not have changed the run: {outcome:?}"
            );
            Transition { actions: Vec::new(), outcome }
        }
    }
}

/// One decision in progress over the run, which every emitted action is applied to.
struct Machine<'a> {
    wf: &'a Workflow,
    run: &'a mut Run,
    now: Instant,
    settings: &'a Settings,
    actions: Vec<Action>,
}

fn ignored(reason: impl Into<String>) -> Outcome {
    Outcome::Ignored { reason: reason.into() }
}

/// Every code the machine refuses an operator command with (stable: the API
/// answers them as `409` codes, and `coordinatorctl` explains each).
pub const REFUSAL_CODES: [&str; 9] = [
    "operation.never-repeat",
    "operation.no-receipt",
    "run.deadline-reached",
    "run.ended",
    "run.restore-hold",
    "step.effect-not-unknown",
    "step.not-a-call",
    "step.receipt-pending",
    "step.attempt-pending",
];

fn refused(code: &str, message: impl Into<String>) -> Outcome {
    debug_assert!(REFUSAL_CODES.contains(&code), "refusal code `{code}` is not in REFUSAL_CODES");
    Outcome::Refused { code: code.to_owned(), message: message.into() }
}

impl Machine<'_> {
    fn handle(&mut self, event: &Event) -> Outcome {
        match event {
            Event::Admitted => self.admitted(),
            Event::CallAnswered { step, attempt, answer } => self.call_answered(step, *attempt, answer),
            Event::ReceiptAnswered { step, answer } => self.receipt_answered(step, answer),
            Event::CompletionObserved { step, seq, answer } => self.completion_observed(step, *seq, answer),
            Event::TimerDue { timer } => self.timer_due(timer),
            Event::CompletionNotified { step } => self.completion_notified(step),
            Event::CancelRequested => self.cancel_requested(),
            Event::RetrySameRequested { step } => self.retry_same(step),
            Event::ReconcileRequested { step } => self.reconcile(step),
            Event::RestoreHoldPlaced => self.hold_placed(),
            Event::RestoreHoldReleased => self.hold_released(),
        }
    }

    fn emit(&mut self, action: Action) {
        self.run.apply(&action);
        self.actions.push(action);
    }

    fn audit(&mut self, kind: AuditKind, step: Option<&str>, detail: impl Into<String>) {
        self.emit(Action::Audit { kind, step: step.map(str::to_owned), detail: detail.into() });
    }

    fn admitted(&mut self) -> Outcome {
        if !self.run.path.is_empty() {
            return ignored("the run was already admitted");
        }
        let deadline = self.run.admitted_at.plus_seconds(self.wf.definition.deadline_seconds);
        self.emit(Action::ScheduleTimer { timer: event::Timer::RunDeadline, at: deadline });
        self.audit(AuditKind::Admission, None, format!("admitted on revision {}", self.wf.revision));
        let start = self.wf.definition.start.clone();
        self.enter(&start);
        Outcome::Applied
    }

    /// Ends the run with a failure.
    fn fail(&mut self, code: &str, step: Option<&str>, message: impl Into<String>) {
        let failure = Failure { code: code.to_owned(), step: step.map(str::to_owned), message: message.into() };
        self.audit(AuditKind::Decision, step, format!("run failed: {}", failure.code));
        self.emit(Action::EndRun { state: RunState::Failed, outcome: None, output: None, failure: Some(failure) });
    }

    fn fail_with(&mut self, failure: Failure) {
        let step = failure.step.clone();
        self.fail(&failure.code, step.as_deref(), failure.message);
    }

    /// Ends a cancelled run: `cancelled-after-effect` if any mutation's effect is accepted or unknown.
    fn end_cancelled(&mut self, outcome: Option<String>, output: Option<serde_json::Value>) {
        let state = self.cancelled_state();
        self.audit(AuditKind::Decision, None, format!("run {}", state.as_str()));
        self.emit(Action::EndRun { state, outcome, output, failure: None });
    }

    fn cancelled_state(&self) -> RunState {
        let after_effect = self.run.steps.keys().any(|step| {
            let mutation = self.wf.operation_of(step).is_some_and(|(_, op)| op.descriptor.effect == Effect::Mutation);
            let effect = self.run.call(step).map(|c| c.effect);
            mutation && matches!(effect, Some(EffectState::Accepted | EffectState::Unknown))
        });
        if after_effect { RunState::CancelledAfterEffect } else { RunState::Cancelled }
    }
}
