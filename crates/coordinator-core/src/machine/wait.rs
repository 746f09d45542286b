//! Time: due timers (run deadline, wait-until, observations, wait timeouts),
//! observations of completions, and completion nudges
//! (docs/reference/runs.md#waits).

use super::action::{Action, AuditKind, WaitResolution};
use super::compiled::describe;
use super::event::{Observation, Timer};
use super::run::{Failure, Pending, StepRecord};
use super::{Machine, Outcome, ignored};
use crate::model::catalog::Effect;
use crate::model::run::{EffectState, RunState};
use crate::model::workflow::Step;

impl Machine<'_> {
    pub(super) fn timer_due(&mut self, timer: &Timer) -> Outcome {
        if self.run.state.is_terminal() {
            return ignored("the run has ended");
        }
        match self.run.timers.get(timer) {
            Some(at) if *at <= self.now => {}
            Some(_) => return ignored("the timer is not due yet"),
            None => return ignored("the timer is no longer set"),
        }
        self.emit(Action::CancelTimer { timer: timer.clone() });
        match timer {
            Timer::RunDeadline => self.expire(),
            Timer::WaitUntil { step } => {
                self.emit(Action::ResolveWait {
                    step: step.clone(),
                    resolution: WaitResolution::Completed,
                    value: None,
                });
                self.audit(AuditKind::Decision, Some(step), "the instant was reached");
                match self.wf.step(step) {
                    Some(Step::WaitUntil(w)) => {
                        let next = w.next.clone();
                        self.enter(&next);
                    }
                    _ => self.fail("definition.invalid-route", Some(step), "not a wait-until step"),
                }
            }
            Timer::Observation { step } => {
                let seq = self.run.wait(step).map_or(1, |w| w.seq + 1);
                self.emit(Action::Observe { step: step.clone(), seq, at: self.now });
                self.audit(AuditKind::Dispatch, Some(step), format!("observation {seq} queued"));
            }
            Timer::WaitTimeout { step } => {
                self.cancel_wait_timers(step);
                self.emit(Action::ResolveWait {
                    step: step.clone(),
                    resolution: WaitResolution::TimedOut,
                    value: None,
                });
                self.audit(AuditKind::Decision, Some(step), "the wait timed out");
                let route = match self.wf.step(step) {
                    Some(Step::WaitFor(w)) => w.on_timeout.clone(),
                    _ => None,
                };
                match route {
                    Some(target) => self.enter(&target),
                    None => self.fail(
                        "wait.timed-out",
                        Some(step),
                        format!("`{step}` timed out and has no onTimeout route"),
                    ),
                }
            }
        }
        Outcome::Applied
    }

    /// The run deadline: an unfinished run expires; nothing more is dispatched.
    fn expire(&mut self) {
        if let Some(step) = self.run.current.clone()
            && let Some(call) = self.run.call(&step)
            && let Pending::Attempt { not_before } = call.pending
            && not_before <= self.now
            && self.wf.operation_of(&step).is_some_and(|(_, op)| op.descriptor.effect != Effect::Read)
            && call.effect != EffectState::Accepted
        {
            // The attempt may have reached the product: its effect is unknown, and stays visible as such.
            let attempt = call.attempt;
            self.record(&step, attempt, EffectState::Unknown, None, Default::default(), None);
        }
        let failure = Failure {
            code: "run.deadline-reached".to_owned(),
            step: self.run.current.clone(),
            message: format!("the run deadline of {} s was reached", self.wf.definition.deadline_seconds),
        };
        self.audit(AuditKind::Decision, None, "run expired: run.deadline-reached");
        self.emit(Action::EndRun { state: RunState::Expired, outcome: None, output: None, failure: Some(failure) });
    }

    pub(super) fn completion_observed(&mut self, step: &str, seq: u32, answer: &Observation) -> Outcome {
        if self.run.state.is_terminal() {
            return ignored("the run has ended");
        }
        let Some(wait) = self.run.wait(step) else { return ignored(format!("`{step}` is not waiting")) };
        if wait.resolution.is_some() || !wait.observing || wait.seq != seq || self.run.held {
            return ignored(format!("stale observation {seq} of `{step}`"));
        }
        let interval = wait.interval_seconds;
        let observed_at = wait.last_observation_at.unwrap_or(self.now);
        match answer {
            Observation::Pending | Observation::Unavailable => {
                let counted = matches!(answer, Observation::Pending);
                self.emit(Action::RecordObservation { step: step.to_owned(), counted });
                let what = if counted { "pending" } else { "source unavailable" };
                self.audit(AuditKind::Classification, Some(step), format!("observation {seq}: {what}"));
                let next = observed_at.plus_seconds(interval).max(self.now);
                self.emit(Action::ScheduleTimer { timer: Timer::Observation { step: step.to_owned() }, at: next });
            }
            Observation::Complete { value } => {
                let (call, name) = match self.wf.step(step) {
                    Some(Step::WaitFor(w)) => (w.completion.step.clone(), w.completion.name.clone()),
                    _ => return ignored(format!("`{step}` is not a wait-for")),
                };
                self.emit(Action::RecordObservation { step: step.to_owned(), counted: true });
                let alias = self.wf.operation_of(&call).map(|(a, _)| a.to_owned()).unwrap_or_default();
                let violations = self.wf.check_completion(&alias, &name, value);
                if !violations.is_empty() {
                    let message =
                        format!("the completion `{name}` does not match its schema: {}", describe(&violations));
                    self.fail("product.invalid-completion", Some(step), message);
                    return Outcome::Applied;
                }
                self.cancel_wait_timers(step);
                self.emit(Action::ResolveWait {
                    step: step.to_owned(),
                    resolution: WaitResolution::Completed,
                    value: Some(value.clone()),
                });
                self.audit(AuditKind::Classification, Some(step), format!("observation {seq}: complete"));
                if let Some(Step::WaitFor(w)) = self.wf.step(step) {
                    let next = w.next.clone();
                    self.enter(&next);
                }
            }
        }
        Outcome::Applied
    }

    /// A nudge brings the next observation forward, never below the floor.
    pub(super) fn completion_notified(&mut self, step: &str) -> Outcome {
        if self.run.state.is_terminal() || self.run.held {
            return ignored("the run is not waiting");
        }
        let Some(wait) = self.run.wait(step) else { return ignored(format!("`{step}` is not waiting")) };
        if wait.resolution.is_some() || self.run.current.as_deref() != Some(step) {
            return ignored(format!("`{step}` is not waiting"));
        }
        if wait.observing {
            return ignored("an observation is already under way");
        }
        let timer = Timer::Observation { step: step.to_owned() };
        let Some(scheduled) = self.run.timers.get(&timer).copied() else {
            return ignored("no observation is scheduled");
        };
        let since = wait.last_observation_at.unwrap_or(wait.started_at);
        let earliest = since.plus_seconds(self.settings.observe_floor_seconds).max(self.now);
        if earliest >= scheduled {
            return ignored("the next observation is already as soon as the floor allows");
        }
        self.emit(Action::ScheduleTimer { timer, at: earliest });
        self.audit(AuditKind::Decision, Some(step), format!("nudged: next observation at {}", earliest.to_rfc3339()));
        Outcome::Applied
    }

    /// Whether the run's current step is a wait with an `onCancel` route; returns the route.
    pub(super) fn cancel_route(&self) -> Option<(String, String)> {
        let step = self.run.current.clone()?;
        let waiting = match self.run.steps.get(&step)? {
            StepRecord::WaitFor(w) => w.resolution.is_none(),
            StepRecord::WaitUntil { resolution, .. } => resolution.is_none(),
            _ => false,
        };
        if !waiting {
            return None;
        }
        let route = match self.wf.step(&step)? {
            Step::WaitFor(w) => w.on_cancel.clone(),
            Step::WaitUntil(w) => w.on_cancel.clone(),
            _ => None,
        }?;
        Some((step, route))
    }
}
