//! Operator commands: cancel, retry-same, reconcile (and its receipt), and the
//! restore hold. Requests the rules do not allow are refused with a stable code
//! and change nothing.

use super::action::{Action, AuditKind};
use super::compiled::describe;
use super::event::{ReceiptAnswer, Timer};
use super::run::{Attention, CancelMode, Pending, StepRecord};
use super::{Machine, Outcome, ignored, refused};
use crate::model::catalog::{Effect, Recovery};
use crate::model::run::{EffectState, RunState};

impl Machine<'_> {
    pub(super) fn cancel_requested(&mut self) -> Outcome {
        if self.run.state.is_terminal() {
            return ignored("the run has ended");
        }
        if matches!(self.run.attention, Some(Attention::UnknownEffect { .. })) && !self.run.held {
            // Cancel is one way to settle an unknown effect, on a cancel route too.
            self.audit(AuditKind::Operator, self.run.current.clone().as_deref(), "cancel requested");
            if self.run.cancel.is_none() {
                self.emit(Action::RequestCancel { mode: CancelMode::Settling });
            }
            self.end_cancelled(None, None);
            return Outcome::Applied;
        }
        if self.run.cancel.is_some() {
            return ignored("cancellation was already requested");
        }
        self.audit(AuditKind::Operator, self.run.current.clone().as_deref(), "cancel requested");
        if let Some((step, route)) = self.cancel_route() {
            if self.run.held {
                // The route may dispatch commands: it is followed when the hold is released.
                self.emit(Action::RequestCancel { mode: CancelMode::Deferred });
            } else {
                self.follow_cancel_route(&step, &route);
            }
            return Outcome::Applied;
        }
        let in_flight = self.run.current.clone().and_then(|step| {
            let call = self.run.call(&step)?;
            match call.pending {
                Pending::Attempt { not_before } if not_before <= self.now && !self.run.held => Some(step),
                _ => None,
            }
        });
        match in_flight {
            // A call already in flight is settled first.
            Some(_) => self.emit(Action::RequestCancel { mode: CancelMode::Settling }),
            None => {
                if let Some(step) = self.run.current.clone() {
                    self.cancel_wait_timers(&step);
                }
                self.emit(Action::RequestCancel { mode: CancelMode::Settling });
                self.end_cancelled(None, None);
            }
        }
        Outcome::Applied
    }

    /// The call step an operator action names, if its effect is unknown.
    fn unknown_effect(&self, step: &str) -> Result<(), Outcome> {
        match self.run.call(step) {
            None => Err(refused("step.not-a-call", format!("`{step}` is not a call this run has made"))),
            Some(call) if call.effect != EffectState::Unknown => Err(refused(
                "step.effect-not-unknown",
                format!("the effect of `{step}` is {}, not unknown: there is nothing to settle", call.effect.as_str()),
            )),
            Some(_) => Ok(()),
        }
    }

    pub(super) fn retry_same(&mut self, step: &str) -> Outcome {
        if self.run.state == RunState::Expired {
            return refused("run.deadline-reached", "the run has expired: nothing more is dispatched");
        }
        if self.run.state.is_terminal() {
            return refused("run.ended", format!("the run has ended ({})", self.run.state.as_str()));
        }
        if let Err(outcome) = self.unknown_effect(step) {
            return outcome;
        }
        let recovery = self.wf.operation_of(step).and_then(|(_, op)| op.descriptor.recovery);
        let effect = self.wf.operation_of(step).map(|(_, op)| op.descriptor.effect);
        if recovery == Some(Recovery::NeverRepeat) || effect == Some(Effect::Evaluation) {
            return refused("operation.never-repeat", format!("the operation of `{step}` is never repeated"));
        }
        if self.run.held {
            return refused("run.restore-hold", "a restore hold is placed: release it before resending commands");
        }
        if matches!(self.run.call(step).map(|c| c.pending), Some(Pending::Receipt)) {
            return refused("step.receipt-pending", "a receipt lookup is under way: wait for its answer");
        }
        let attempt = self.run.call(step).map_or(1, |c| c.attempt + 1);
        self.audit(AuditKind::Operator, Some(step), "retry-same: resending the saved command with its original key");
        self.emit(Action::LeaveAttention);
        self.dispatch(step, attempt, self.now);
        Outcome::Applied
    }

    pub(super) fn reconcile(&mut self, step: &str) -> Outcome {
        if let Err(outcome) = self.unknown_effect(step) {
            return outcome;
        }
        let receipt = self.wf.operation_of(step).is_some_and(|(_, op)| op.descriptor.receipt);
        if !receipt {
            return refused(
                "operation.no-receipt",
                format!("the operation of `{step}` has no receipt to reconcile from"),
            );
        }
        match self.run.call(step).map(|c| c.pending) {
            Some(Pending::Receipt) => return ignored("a receipt lookup is already under way"),
            Some(Pending::Attempt { .. }) => {
                return refused(
                    "step.attempt-pending",
                    format!("an attempt of `{step}`'s saved command is under way: its answer settles the effect"),
                );
            }
            Some(Pending::Nothing) | None => {}
        }
        self.audit(AuditKind::Operator, Some(step), "reconcile: looking up the original key's receipt");
        self.emit(Action::RequestReceipt { step: step.to_owned() });
        Outcome::Applied
    }

    pub(super) fn receipt_answered(&mut self, step: &str, answer: &ReceiptAnswer) -> Outcome {
        let Some(call) = self.run.call(step) else { return ignored(format!("`{step}` has no call")) };
        if call.pending != Pending::Receipt {
            return ignored(format!("no receipt lookup is under way for `{step}`"));
        }
        let attempt = call.attempt;
        let ReceiptAnswer::Found { output, completions } = answer else {
            // not-found, expired and unavailable never prove that nothing happened.
            self.emit(Action::RecordReceipt { step: step.to_owned(), result: answer.as_str().to_owned() });
            self.audit(
                AuditKind::Classification,
                Some(step),
                format!("receipt {}: the effect stays unknown", answer.as_str()),
            );
            return Outcome::Applied;
        };
        let alias = self.wf.operation_of(step).map(|(a, _)| a.to_owned()).unwrap_or_default();
        let violations = self.wf.check_output(&alias, output);
        if !violations.is_empty() {
            self.emit(Action::RecordReceipt { step: step.to_owned(), result: "invalid".to_owned() });
            let detail = format!(
                "receipt found, but its output does not match: {}; the effect stays unknown",
                describe(&violations)
            );
            self.audit(AuditKind::Classification, Some(step), detail);
            return Outcome::Applied;
        }
        self.record(step, attempt, EffectState::Accepted, Some(output.clone()), completions.clone(), None);
        self.audit(AuditKind::Classification, Some(step), "receipt found: the effect is accepted");
        if self.run.state.is_terminal() || self.run.held {
            return Outcome::Applied;
        }
        self.emit(Action::LeaveAttention);
        self.after_settled(step, |machine| machine.next_of(step))
    }

    pub(super) fn hold_placed(&mut self) -> Outcome {
        if self.run.state.is_terminal() {
            return ignored("the run has ended");
        }
        if self.run.held {
            return ignored("a restore hold is already placed");
        }
        if let Some(step) = self.run.current.clone()
            && let Some(call) = self.run.call(&step)
            && matches!(call.pending, Pending::Attempt { .. })
        {
            let attempt = call.attempt;
            let read = self.wf.operation_of(&step).is_some_and(|(_, op)| op.descriptor.effect == Effect::Read);
            if read {
                // Read again after release.
                self.record(&step, attempt, EffectState::None, None, Default::default(), None);
            } else {
                // The attempt may have reached the product before (or after) the backup.
                self.record(&step, attempt, EffectState::Unknown, None, Default::default(), None);
                self.audit(AuditKind::Hold, Some(&step), "in flight when the hold was placed: the effect is unknown");
            }
        }
        let timers: Vec<Timer> = self.run.timers.keys().filter(|t| **t != Timer::RunDeadline).cloned().collect();
        for timer in timers {
            self.emit(Action::CancelTimer { timer });
        }
        self.emit(Action::PlaceHold);
        self.audit(AuditKind::Hold, None, "restore hold placed");
        Outcome::Applied
    }

    pub(super) fn hold_released(&mut self) -> Outcome {
        if !self.run.held {
            return ignored("no restore hold is placed");
        }
        self.emit(Action::ReleaseHold);
        self.audit(AuditKind::Hold, None, "restore hold released");
        if self.run.state.is_terminal() {
            return Outcome::Applied;
        }
        let Some(step) = self.run.current.clone() else { return Outcome::Applied };
        if self.run.cancel == Some(CancelMode::Deferred)
            && let Some((_, route)) = self.cancel_route()
        {
            self.follow_cancel_route(&step, &route);
            return Outcome::Applied;
        }
        match self.run.steps.get(&step).cloned() {
            Some(StepRecord::Call(call)) => match call.effect {
                EffectState::Unknown => {
                    self.emit(Action::EnterAttention { reason: Attention::UnknownEffect { step: step.clone() } });
                }
                EffectState::Accepted => {
                    let _ = self.after_settled(&step, |machine| machine.next_of(&step));
                }
                EffectState::None | EffectState::Refused => {
                    if call.pending == Pending::Nothing {
                        self.dispatch(&step, call.attempt + 1, self.now);
                    }
                }
            },
            Some(StepRecord::WaitFor(wait)) if wait.resolution.is_none() => {
                // The world may have moved on while the run was held (a completion
                // notified to a backup's timeline is lost): observe as soon as the floor allows.
                let since = wait.last_observation_at.unwrap_or(wait.started_at);
                let next = since.plus_seconds(self.settings.observe_floor_seconds).max(self.now);
                self.emit(Action::ScheduleTimer {
                    timer: Timer::WaitTimeout { step: step.clone() },
                    at: wait.timeout_at,
                });
                self.emit(Action::ScheduleTimer { timer: Timer::Observation { step: step.clone() }, at: next });
            }
            Some(StepRecord::WaitUntil { until, resolution: None }) => {
                self.emit(Action::ScheduleTimer { timer: Timer::WaitUntil { step: step.clone() }, at: until });
            }
            _ => {}
        }
        Outcome::Applied
    }
}
