//! The run snapshot the machine decides on, and [`Run::apply`]: the meaning of
//! every action as a change to the snapshot. The service persists the same
//! changes as rows; the scenario runner keeps the snapshot in memory.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::action::{Action, WaitResolution};
use super::event::Timer;
use super::time::Instant;
use crate::model::run::{EffectState, RunState};

/// A prepared command: what every attempt of a call sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    /// The mapped input (sealed at rest).
    pub input: Value,
    /// The idempotency key every attempt carries.
    pub idempotency_key: String,
}

/// Why a run failed or expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// A stable code: `product-refused`, `function.failed`, `function.unknown-case`,
    /// `wait.timed-out`, `retry.exhausted`, `run.deadline-reached`, …
    pub code: String,
    /// The step where it happened.
    pub step: Option<String>,
    /// What happened, without protected values.
    pub message: String,
}

/// Why a run needs an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Attention {
    /// A call's effect is unknown.
    UnknownEffect {
        /// The call step.
        step: String,
    },
    /// A restore hold is placed.
    RestoreHold,
}

/// How a cancelled run proceeds to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CancelMode {
    /// A call is in flight: settle it, then end.
    Settling,
    /// Following the wait's `onCancel` route.
    Route,
    /// Requested under a restore hold during a wait with `onCancel`: the route is
    /// followed when the hold is released.
    Deferred,
}

/// What a call is waiting for from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Pending {
    /// Nothing.
    Nothing,
    /// An attempt is queued or in flight.
    Attempt {
        /// Not sent before this instant.
        not_before: Instant,
    },
    /// A receipt lookup is queued or in flight.
    Receipt,
}

/// A call step's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The saved command.
    pub command: Command,
    /// The latest attempt number (0 before the first dispatch).
    pub attempt: u32,
    /// What is known about the effect.
    pub effect: EffectState,
    /// What the call waits for.
    pub pending: Pending,
    /// The accepted output.
    pub output: Option<Value>,
    /// Completion references of the accepted answer.
    pub completions: BTreeMap<String, String>,
    /// The refusal code, if refused.
    pub refusal: Option<String>,
    /// The last receipt result that settled nothing.
    pub receipt: Option<String>,
}

/// A wait-for step's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitRecord {
    /// The completion reference.
    pub reference: String,
    /// When the wait started.
    pub started_at: Instant,
    /// The effective observation interval.
    pub interval_seconds: u64,
    /// When it times out.
    pub timeout_at: Instant,
    /// Sequence number of the latest observation queued (0: none yet).
    pub seq: u32,
    /// Whether an observation is queued or in flight.
    pub observing: bool,
    /// Observations answered (pending or complete).
    pub observations: u32,
    /// When the latest observation was queued.
    pub last_observation_at: Option<Instant>,
    /// How the wait ended.
    pub resolution: Option<WaitResolution>,
    /// The completion value.
    pub value: Option<Value>,
}

/// The state of one entered step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StepRecord {
    /// A step that decides at once (choose, finish) or has not started its work.
    Entered,
    /// A call.
    Call(CallRecord),
    /// A wait-for.
    WaitFor(WaitRecord),
    /// A wait-until.
    WaitUntil {
        /// The instant waited for.
        until: Instant,
        /// How the wait ended.
        resolution: Option<WaitResolution>,
    },
}

/// The snapshot of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The run id.
    pub id: String,
    /// The revision it is pinned to.
    pub revision: String,
    /// When it was admitted.
    pub admitted_at: Instant,
    /// The validated input (sealed at rest).
    pub input: Value,
    /// Its state.
    pub state: RunState,
    /// The step it is in.
    pub current: Option<String>,
    /// Every step entered, in order.
    pub path: Vec<String>,
    /// The state of each entered step.
    pub steps: BTreeMap<String, StepRecord>,
    /// Timers set, with when they are due (written as a list of pairs: JSON keys are strings).
    #[serde(with = "timer_list")]
    pub timers: BTreeMap<Timer, Instant>,
    /// Whether cancellation was requested, and how the run proceeds.
    pub cancel: Option<CancelMode>,
    /// Whether a restore hold is placed.
    pub held: bool,
    /// Why it needs an operator.
    pub attention: Option<Attention>,
    /// The outcome of the finish reached.
    pub outcome: Option<String>,
    /// The published output.
    pub output: Option<Value>,
    /// Why it failed or expired.
    pub failure: Option<Failure>,
}

impl Run {
    /// A run about to be admitted (its `Admitted` event is applied next).
    pub fn new(id: &str, revision: &str, admitted_at: Instant, input: Value) -> Run {
        Run {
            id: id.to_owned(),
            revision: revision.to_owned(),
            admitted_at,
            input,
            state: RunState::Running,
            current: None,
            path: Vec::new(),
            steps: BTreeMap::new(),
            timers: BTreeMap::new(),
            cancel: None,
            held: false,
            attention: None,
            outcome: None,
            output: None,
            failure: None,
        }
    }

    /// A call step's record.
    pub fn call(&self, step: &str) -> Option<&CallRecord> {
        match self.steps.get(step) {
            Some(StepRecord::Call(c)) => Some(c),
            _ => None,
        }
    }

    /// A wait-for step's record.
    pub fn wait(&self, step: &str) -> Option<&WaitRecord> {
        match self.steps.get(step) {
            Some(StepRecord::WaitFor(w)) => Some(w),
            _ => None,
        }
    }

    /// The saved output a `{type: step}` source reads.
    pub fn output_of(&self, step: &str) -> Option<&Value> {
        match self.steps.get(step)? {
            StepRecord::Call(c) if c.effect == EffectState::Accepted => c.output.as_ref(),
            StepRecord::WaitFor(w) if w.resolution == Some(WaitResolution::Completed) => w.value.as_ref(),
            _ => None,
        }
    }

    /// The state of a run that is neither ended nor waiting for an operator.
    fn working_state(&self) -> RunState {
        if self.cancel.is_some() { RunState::CancelRequested } else { RunState::Running }
    }

    /// Applies one action to the snapshot.
    pub fn apply(&mut self, action: &Action) {
        match action {
            Action::EnterStep { step } => {
                self.current = Some(step.clone());
                self.path.push(step.clone());
                self.steps.insert(step.clone(), StepRecord::Entered);
            }
            Action::PrepareCommand { step, command } => {
                self.steps.insert(
                    step.clone(),
                    StepRecord::Call(CallRecord {
                        command: command.clone(),
                        attempt: 0,
                        effect: EffectState::None,
                        pending: Pending::Nothing,
                        output: None,
                        completions: BTreeMap::new(),
                        refusal: None,
                        receipt: None,
                    }),
                );
            }
            Action::Dispatch { step, attempt, not_before } => {
                if let Some(StepRecord::Call(c)) = self.steps.get_mut(step) {
                    c.attempt = *attempt;
                    c.pending = Pending::Attempt { not_before: *not_before };
                }
            }
            Action::RecordEffect { step, effect, output, completions, refusal, .. } => {
                if let Some(StepRecord::Call(c)) = self.steps.get_mut(step) {
                    c.effect = *effect;
                    c.pending = Pending::Nothing;
                    if output.is_some() {
                        c.output.clone_from(output);
                        c.completions.clone_from(completions);
                    }
                    if refusal.is_some() {
                        c.refusal.clone_from(refusal);
                    }
                }
            }
            Action::RequestReceipt { step } => {
                if let Some(StepRecord::Call(c)) = self.steps.get_mut(step) {
                    c.pending = Pending::Receipt;
                }
            }
            Action::RecordReceipt { step, result } => {
                if let Some(StepRecord::Call(c)) = self.steps.get_mut(step) {
                    c.pending = Pending::Nothing;
                    c.receipt = Some(result.clone());
                }
            }
            Action::StartWait { step, reference, started_at, interval_seconds, timeout_at } => {
                self.steps.insert(
                    step.clone(),
                    StepRecord::WaitFor(WaitRecord {
                        reference: reference.clone(),
                        started_at: *started_at,
                        interval_seconds: *interval_seconds,
                        timeout_at: *timeout_at,
                        seq: 0,
                        observing: false,
                        observations: 0,
                        last_observation_at: None,
                        resolution: None,
                        value: None,
                    }),
                );
            }
            Action::StartTimer { step, until } => {
                self.steps.insert(step.clone(), StepRecord::WaitUntil { until: *until, resolution: None });
            }
            Action::ScheduleTimer { timer, at } => {
                self.timers.insert(timer.clone(), *at);
            }
            Action::CancelTimer { timer } => {
                self.timers.remove(timer);
            }
            Action::Observe { step, seq, at } => {
                if let Some(StepRecord::WaitFor(w)) = self.steps.get_mut(step) {
                    w.seq = *seq;
                    w.observing = true;
                    w.last_observation_at = Some(*at);
                }
            }
            Action::RecordObservation { step, counted } => {
                if let Some(StepRecord::WaitFor(w)) = self.steps.get_mut(step) {
                    w.observing = false;
                    if *counted {
                        w.observations += 1;
                    }
                }
            }
            Action::ResolveWait { step, resolution, value } => match self.steps.get_mut(step) {
                Some(StepRecord::WaitFor(w)) => {
                    w.resolution = Some(*resolution);
                    w.observing = false;
                    w.value.clone_from(value);
                }
                Some(StepRecord::WaitUntil { resolution: r, .. }) => *r = Some(*resolution),
                _ => {}
            },
            Action::EnterAttention { reason } => {
                self.attention = Some(reason.clone());
                self.state = RunState::Attention;
            }
            Action::LeaveAttention => {
                self.attention = None;
                self.state = self.working_state();
            }
            Action::RequestCancel { mode } => {
                self.cancel = Some(*mode);
                if self.state == RunState::Running {
                    self.state = RunState::CancelRequested;
                }
            }
            Action::EndRun { state, outcome, output, failure } => {
                self.state = *state;
                self.outcome.clone_from(outcome);
                self.output.clone_from(output);
                self.failure.clone_from(failure);
                self.attention = None;
                self.timers.clear();
                // An ended run is under nobody's review: a hold no longer concerns it.
                self.held = false;
            }
            Action::PlaceHold => {
                self.held = true;
                self.attention = Some(Attention::RestoreHold);
                self.state = RunState::Attention;
            }
            Action::ReleaseHold => {
                self.held = false;
                // A run that ended under the hold stays ended.
                if !self.state.is_terminal() {
                    self.attention = None;
                    self.state = self.working_state();
                }
            }
            Action::Audit { .. } => {}
        }
    }
}

/// Serialises the timer map as `[{timer, at}]`, since a JSON object's keys must be strings.
mod timer_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Instant, Timer};

    #[derive(Serialize, Deserialize)]
    struct Entry {
        timer: Timer,
        at: Instant,
    }

    pub fn serialize<S: Serializer>(timers: &BTreeMap<Timer, Instant>, s: S) -> Result<S::Ok, S::Error> {
        let entries: Vec<Entry> = timers.iter().map(|(timer, at)| Entry { timer: timer.clone(), at: *at }).collect();
        entries.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<Timer, Instant>, D::Error> {
        let entries = Vec::<Entry>::deserialize(d)?;
        Ok(entries.into_iter().map(|e| (e.timer, e.at)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_round_trips_through_json() {
        let mut run = Run::new("run-1", "sha256:0", Instant(1_000), serde_json::json!({"a": 1}));
        run.apply(&Action::ScheduleTimer { timer: Timer::RunDeadline, at: Instant(5_000) });
        run.apply(&Action::ScheduleTimer { timer: Timer::Observation { step: "wait".into() }, at: Instant(2_000) });
        let text = serde_json::to_string(&run);
        let back: Option<Run> = text.ok().and_then(|t| serde_json::from_str(&t).ok());
        assert_eq!(back, Some(run));
    }
}
