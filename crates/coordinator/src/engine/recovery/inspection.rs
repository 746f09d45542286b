//! The operator's view of one run (docs/reference/recovery.md#inspection): each
//! step entered, every call's effect, each wait's timing and observation count,
//! and the recovery actions available now. It never shows the input, prepared
//! commands, product outputs, completion references or values, or the published
//! output.
//!
//! Which recovery actions are available is not decided here: each candidate
//! command is put to the state machine ([`machine::decide`], pure) on the run
//! as it stands now, and listed only when the machine would apply it. A run
//! deadline that is already due is applied first, as the worker would before
//! any operator command at the same instant.
//!
//! [`machine::decide`]: coordinator_core::machine::decide

use coordinator_core::machine::action::WaitResolution;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{Event, Timer};
use coordinator_core::machine::run::{Attention, Failure, Pending, Run, StepRecord};
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, advance, decide};
use coordinator_core::model::run::{EffectState, RunState};
use serde::Serialize;

/// An operator command that settles or stops a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryAction {
    /// Look up the original key's receipt (`POST …/steps/{step}/reconcile`).
    Reconcile,
    /// Resend the saved command with its original key (`POST …/steps/{step}/retry-same`).
    RetrySame,
    /// Cancel the run (`POST /v1/runs/{id}/cancel`).
    Cancel,
}

/// The inspection of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// The run id.
    pub run_id: String,
    /// The workflow.
    pub workflow: String,
    /// The revision the run is pinned to.
    pub revision: String,
    /// The run's state.
    pub state: RunState,
    /// When it was admitted (RFC 3339).
    pub admitted_at: String,
    /// When its deadline is (RFC 3339).
    pub deadline_at: String,
    /// The step it is in.
    pub current_step: Option<String>,
    /// Why it needs an operator, if it does.
    pub attention: Option<AttentionView>,
    /// Whether a restore hold is placed.
    pub hold: bool,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
    /// The outcome of the finish reached (the published output is not shown here).
    pub outcome: Option<String>,
    /// Why it failed or expired.
    pub failure: Option<Failure>,
    /// Commands on the whole run the rules accept now (`cancel`).
    pub available_actions: Vec<RecoveryAction>,
    /// Every step entered, in order.
    pub steps: Vec<StepView>,
    /// What the run waits on that no rule of its own will end: a connection
    /// an operator paused ([`with_pauses`]).
    pub waiting: Option<WaitingView>,
    /// The idempotency key it was admitted with (the caller's identifier).
    pub idempotency_key: Option<String>,
    /// Its search keys, name to value (the workflow declares them not secret).
    pub search_keys: std::collections::BTreeMap<String, String>,
}

/// A run waiting on a paused connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingView {
    /// The paused connection.
    pub connection: String,
    /// The step whose request waits.
    pub step: String,
    /// Who paused it.
    pub paused_by: String,
    /// When (RFC 3339).
    pub paused_at: String,
    /// The operator's reason.
    pub reason: String,
    /// All of it in one sentence, as the console shows it.
    pub message: String,
}

/// Why a run needs an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttentionView {
    /// `unknown-effect` or `restore-hold`.
    pub reason: &'static str,
    /// The call whose effect is unknown.
    pub step: Option<String>,
}

/// One entered step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    /// The step id.
    pub step: String,
    /// `call`, `choose`, `wait-until`, `wait-for` or `finish`.
    #[serde(rename = "type")]
    pub step_type: &'static str,
    /// Its place on the run's path (1 = the first step entered).
    pub position: usize,
    /// Whether the run is in this step now.
    pub current: bool,
    /// A call's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<CallView>,
    /// A wait's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitView>,
    /// The recovery actions the rules accept for this step now (only a call
    /// whose effect is unknown has any), in the order reconcile, retry-same, cancel.
    pub recovery_actions: Vec<RecoveryAction>,
}

/// A call's state, without its command or output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallView {
    /// `<product>.<name>/v<N>`.
    pub operation: String,
    /// The logical connection.
    pub connection: String,
    /// The operation's class: `read`, `mutation` or `evaluation`.
    pub operation_effect: &'static str,
    /// What is known about the effect: `accepted`, `unknown`, `refused` or `none`.
    pub effect: EffectState,
    /// Attempts dispatched so far.
    pub attempts: u32,
    /// What the call waits for: `attempt` (queued or in flight), `receipt`, or nothing.
    pub pending: Option<&'static str>,
    /// When a queued attempt is sent at the earliest (a retry's backoff).
    pub next_attempt_at: Option<String>,
    /// The refusal code of a refusal.
    pub refusal: Option<String>,
    /// Whether the operation has a receipt (whether `reconcile` can ever apply).
    pub receipt: bool,
    /// The result of the last receipt lookup that settled nothing (`not-found`, `expired`, …).
    pub last_receipt: Option<String>,
}

/// A wait's timing, without its completion reference or value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitView {
    /// `wait-for` or `wait-until`.
    pub kind: &'static str,
    /// When a wait-for started.
    pub started_at: Option<String>,
    /// The instant a wait-until waits for.
    pub until: Option<String>,
    /// When a wait-for times out.
    pub timeout_at: Option<String>,
    /// A wait-for's effective observation interval.
    pub interval_seconds: Option<u64>,
    /// When the next observation is due (none while one is under way or after the wait ended).
    pub next_observation_at: Option<String>,
    /// When the latest observation was started.
    pub last_observation_at: Option<String>,
    /// Whether an observation is under way.
    pub observing: bool,
    /// Observations answered (pending or complete).
    pub observations: u32,
    /// How the wait ended: `completed`, `timed-out`, `cancelled`, or not yet.
    pub resolution: Option<WaitResolution>,
    /// The connection a wait-for observes through (its call's).
    pub connection: Option<String>,
}

/// Builds the inspection of `run` (pinned to `wf`) at `now`.
pub fn inspect(wf: &Workflow, run: &Run, now: Instant, settings: &Settings) -> Inspection {
    let rules = Rules::at(wf, run, now, settings);
    let steps = run.path.iter().enumerate().map(|(i, step)| step_view(wf, run, &rules, step, i + 1)).collect();
    let available_actions =
        if rules.accepts(&Event::CancelRequested) { vec![RecoveryAction::Cancel] } else { Vec::new() };
    Inspection {
        run_id: run.id.clone(),
        workflow: wf.definition.workflow.clone(),
        revision: run.revision.clone(),
        state: run.state,
        admitted_at: run.admitted_at.to_rfc3339(),
        deadline_at: run.admitted_at.plus_seconds(wf.definition.deadline_seconds).to_rfc3339(),
        current_step: run.current.clone(),
        attention: run.attention.as_ref().map(|a| match a {
            Attention::UnknownEffect { step } => AttentionView { reason: "unknown-effect", step: Some(step.clone()) },
            Attention::RestoreHold => AttentionView { reason: "restore-hold", step: None },
        }),
        hold: run.held,
        cancel_requested: run.cancel.is_some(),
        outcome: run.outcome.clone(),
        failure: run.failure.clone(),
        available_actions,
        steps,
        waiting: None,
        idempotency_key: None,
        search_keys: std::collections::BTreeMap::new(),
    }
}

/// `inspection` with [`Inspection::waiting`] set when a request of the run
/// not ended (an attempt, a receipt lookup, or an open wait's observation)
/// goes to a connection `paused` lists (name → pause).
pub fn with_pauses(
    mut inspection: Inspection,
    paused: &std::collections::BTreeMap<String, coordinator_store::Pause>,
) -> Inspection {
    if paused.is_empty() || inspection.state.is_terminal() {
        return inspection;
    }
    let held = inspection.steps.iter().find_map(|s| {
        let connection = match (&s.call, &s.wait) {
            (Some(call), _) if call.pending.is_some() => call.connection.as_str(),
            (_, Some(wait)) if wait.kind == "wait-for" && wait.resolution.is_none() => wait.connection.as_deref()?,
            _ => return None,
        };
        paused.get(connection).map(|pause| (s.step.clone(), connection.to_owned(), pause))
    });
    if let Some((step, connection, pause)) = held {
        let paused_at = Instant(pause.at).to_rfc3339();
        inspection.waiting = Some(WaitingView {
            message: format!(
                "waiting: connection {connection} paused by {} at {paused_at}: {}",
                pause.by, pause.reason
            ),
            connection,
            step,
            paused_by: pause.by.clone(),
            paused_at,
            reason: pause.reason.clone(),
        });
    }
    inspection
}

/// The state machine, asked whether it would apply an operator's command now.
pub(crate) struct Rules<'a> {
    wf: &'a Workflow,
    run: Run,
    now: Instant,
    settings: &'a Settings,
}

impl<'a> Rules<'a> {
    /// The run as the machine would see it now: a due run deadline goes first.
    pub(crate) fn at(wf: &'a Workflow, run: &Run, now: Instant, settings: &'a Settings) -> Rules<'a> {
        let mut run = run.clone();
        if run.timers.get(&Timer::RunDeadline).is_some_and(|at| *at <= now) {
            let _ = advance(wf, &mut run, &Event::TimerDue { timer: Timer::RunDeadline }, now, settings);
        }
        Rules { wf, run, now, settings }
    }

    fn accepts(&self, event: &Event) -> bool {
        self.transition(event).outcome == Outcome::Applied
    }

    /// What the machine would decide for `event` now (nothing is applied).
    pub(crate) fn transition(&self, event: &Event) -> coordinator_core::machine::Transition {
        decide(self.wf, &self.run, event, self.now, self.settings)
    }

    /// The commands that would settle a call's unknown effect now.
    fn recovery_of(&self, step: &str) -> Vec<RecoveryAction> {
        if self.run.call(step).map(|c| c.effect) != Some(EffectState::Unknown) {
            return Vec::new();
        }
        let candidates = [
            (RecoveryAction::Reconcile, Event::ReconcileRequested { step: step.to_owned() }),
            (RecoveryAction::RetrySame, Event::RetrySameRequested { step: step.to_owned() }),
            (RecoveryAction::Cancel, Event::CancelRequested),
        ];
        candidates.into_iter().filter(|(_, event)| self.accepts(event)).map(|(action, _)| action).collect()
    }
}

fn step_view(wf: &Workflow, run: &Run, rules: &Rules<'_>, step: &str, position: usize) -> StepView {
    let record = run.steps.get(step);
    let step_type = match (wf.step(step), record) {
        (Some(s), _) => s.type_name(),
        (None, Some(StepRecord::Call(_))) => "call",
        (None, Some(StepRecord::WaitFor(_))) => "wait-for",
        (None, Some(StepRecord::WaitUntil { .. })) => "wait-until",
        (None, Some(StepRecord::Entered) | None) => "unknown",
    };
    let (call, wait) = match record {
        Some(StepRecord::Call(c)) => {
            let (operation, connection, operation_effect, receipt) = match wf.operation_of(step) {
                Some((_, op)) => {
                    (op.operation.clone(), op.connection.clone(), op.descriptor.effect.as_str(), op.descriptor.receipt)
                }
                None => (String::new(), String::new(), "unknown", false),
            };
            let (pending, next_attempt_at) = match c.pending {
                Pending::Nothing => (None, None),
                Pending::Attempt { not_before } => (Some("attempt"), Some(not_before.to_rfc3339())),
                Pending::Receipt => (Some("receipt"), None),
            };
            let view = CallView {
                operation,
                connection,
                operation_effect,
                effect: c.effect,
                attempts: c.attempt,
                pending,
                next_attempt_at,
                refusal: c.refusal.clone(),
                receipt,
                last_receipt: c.receipt.clone(),
            };
            (Some(view), None)
        }
        Some(StepRecord::WaitFor(w)) => {
            let next = run.timers.get(&Timer::Observation { step: step.to_owned() });
            let view = WaitView {
                kind: "wait-for",
                started_at: Some(w.started_at.to_rfc3339()),
                until: None,
                timeout_at: Some(w.timeout_at.to_rfc3339()),
                interval_seconds: Some(w.interval_seconds),
                next_observation_at: if w.resolution.is_none() { next.map(|at| at.to_rfc3339()) } else { None },
                last_observation_at: w.last_observation_at.map(Instant::to_rfc3339),
                observing: w.observing,
                observations: w.observations,
                resolution: w.resolution,
                connection: crate::dispatch::remote::connection_of(wf, step).map(str::to_owned),
            };
            (None, Some(view))
        }
        Some(StepRecord::WaitUntil { until, resolution }) => {
            let view = WaitView {
                kind: "wait-until",
                started_at: None,
                until: Some(until.to_rfc3339()),
                timeout_at: None,
                interval_seconds: None,
                next_observation_at: None,
                last_observation_at: None,
                observing: false,
                observations: 0,
                resolution: *resolution,
                connection: None,
            };
            (None, Some(view))
        }
        Some(StepRecord::Entered) | None => (None, None),
    };
    StepView {
        step: step.to_owned(),
        step_type,
        position,
        current: run.current.as_deref() == Some(step),
        call,
        wait,
        recovery_actions: rules.recovery_of(step),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use coordinator_core::check::{ProjectSource, SourceError, check_project};
    use coordinator_core::machine::event::{CallAnswer, Observation};
    use coordinator_functions::Limits;
    use serde_json::{Value, json};

    use super::*;

    const APPLICATION: &str = "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10";

    struct Example;

    impl ProjectSource for Example {
        fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
            let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/reviewed-notice").join(path);
            Ok(std::fs::read_to_string(file).ok())
        }

        fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
            Ok(Vec::new())
        }
    }

    /// The flagship example, checked and compiled (for other modules' tests too).
    pub(crate) fn reviewed_notice() -> Workflow {
        let report = check_project(&Example).unwrap_or_else(|e| panic!("{e}"));
        let Some(checked) = report.checked else { panic!("refused: {:?}", report.diagnostics) };
        Workflow::compile(checked.definition, Limits::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn step(wf: &Workflow, run: &mut Run, event: Event, at: i64) {
        let t = advance(wf, run, &event, Instant(at), &Settings::default());
        assert_eq!(t.outcome, Outcome::Applied, "{event:?}");
    }

    fn accepted(output: Value, completions: &[(&str, &str)]) -> CallAnswer {
        let completions: BTreeMap<String, String> =
            completions.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        CallAnswer::Accepted { output, completions }
    }

    /// A run of reviewed-notice whose notice was sent and whose answer was lost.
    fn notice_unknown(wf: &Workflow) -> Run {
        let input = json!({"applicationId": APPLICATION, "recipient": {"kind": "person", "id": "person-4711"}});
        let mut run = Run::new("run-1", &wf.revision, Instant(0), input);
        step(wf, &mut run, Event::Admitted, 0);
        let record = json!({"recordId": APPLICATION, "recordType": "application", "revision": 1, "data": {}});
        let read = accepted(record, &[]);
        step(wf, &mut run, Event::CallAnswered { step: "read-application".into(), attempt: 1, answer: read }, 10);
        let review = accepted(json!({"reviewRequestId": "review-1"}), &[("result", "review-1")]);
        step(wf, &mut run, Event::CallAnswered { step: "request-review".into(), attempt: 1, answer: review }, 20);
        let observation = Timer::Observation { step: "await-review".into() };
        let Some(due) = run.timers.get(&observation).copied() else { panic!("no observation timer: {run:?}") };
        step(wf, &mut run, Event::TimerDue { timer: observation }, due.0);
        let decision = Observation::Complete { value: json!({"decision": "approved"}) };
        step(wf, &mut run, Event::CompletionObserved { step: "await-review".into(), seq: 1, answer: decision }, due.0);
        let lost = Event::CallAnswered { step: "send-notice".into(), attempt: 1, answer: CallAnswer::Uncertain };
        step(wf, &mut run, lost, due.0 + 10);
        run
    }

    fn view<'a>(inspection: &'a Inspection, step: &str) -> &'a StepView {
        let found = inspection.steps.iter().find(|s| s.step == step);
        found.unwrap_or_else(|| panic!("no step {step}: {inspection:?}"))
    }

    #[test]
    fn an_unknown_notice_can_be_reconciled_retried_or_cancelled() {
        let wf = reviewed_notice();
        let run = notice_unknown(&wf);
        assert_eq!(run.state, RunState::Attention);
        let inspection = inspect(&wf, &run, Instant(60_000), &Settings::default());
        let notice = view(&inspection, "send-notice");
        assert_eq!(notice.call.as_ref().map(|c| c.effect), Some(EffectState::Unknown));
        use RecoveryAction::{Cancel, Reconcile, RetrySame};
        assert_eq!(notice.recovery_actions, [Reconcile, RetrySame, Cancel]);
        assert_eq!(view(&inspection, "request-review").recovery_actions, []);
        assert_eq!(inspection.available_actions, [Cancel]);
        let wait = view(&inspection, "await-review").wait.clone();
        assert_eq!(wait.map(|w| (w.observations, w.resolution)), Some((1, Some(WaitResolution::Completed))));
        assert_eq!(inspection.attention.as_ref().and_then(|a| a.step.as_deref()), Some("send-notice"));
        let text = serde_json::to_string(&view(&inspection, "send-notice")).unwrap_or_default();
        assert!(!text.contains("person-4711") && !text.contains("review-1"), "{text}");
    }

    #[test]
    fn after_the_deadline_only_reconcile_is_left() {
        let wf = reviewed_notice();
        let run = notice_unknown(&wf);
        let deadline = run.admitted_at.plus_seconds(wf.definition.deadline_seconds);
        // The deadline is due but not yet applied: the rules are asked as after it.
        let due = inspect(&wf, &run, deadline, &Settings::default());
        assert_eq!(view(&due, "send-notice").recovery_actions, [RecoveryAction::Reconcile]);
        assert_eq!(due.available_actions, []);
        let mut expired = run;
        step(&wf, &mut expired, Event::TimerDue { timer: Timer::RunDeadline }, deadline.0);
        assert_eq!(expired.state, RunState::Expired);
        let after = inspect(&wf, &expired, deadline.plus_seconds(1), &Settings::default());
        assert_eq!(view(&after, "send-notice").recovery_actions, [RecoveryAction::Reconcile]);
        assert_eq!(after.failure.map(|f| f.code).as_deref(), Some("run.deadline-reached"));
    }

    #[test]
    fn a_pending_receipt_leaves_only_cancel() {
        let wf = reviewed_notice();
        let mut run = notice_unknown(&wf);
        step(&wf, &mut run, Event::ReconcileRequested { step: "send-notice".into() }, 70_000);
        let inspection = inspect(&wf, &run, Instant(71_000), &Settings::default());
        let notice = view(&inspection, "send-notice");
        assert_eq!(notice.recovery_actions, [RecoveryAction::Cancel]);
        assert_eq!(notice.call.as_ref().and_then(|c| c.pending), Some("receipt"));
    }
}
