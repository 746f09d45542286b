//! Classified answers to call attempts
//! (docs/reference/runs.md#calls-and-prepared-commands): accepted, refused
//! (declared or not), retryable (resent with backoff within the deadline),
//! uncertain (reads again, mutations and evaluations to an operator), and late
//! answers.

use std::collections::BTreeMap;

use super::action::{Action, AuditKind};
use super::compiled::describe;
use super::event::CallAnswer;
use super::run::{Attention, CancelMode, Pending};
use super::{Machine, Outcome, ignored};
use crate::model::catalog::Effect;
use crate::model::run::EffectState;
use crate::model::workflow::{EffectiveRetry, Step};

impl Machine<'_> {
    pub(super) fn call_answered(&mut self, step: &str, attempt: u32, answer: &CallAnswer) -> Outcome {
        let Some(record) = self.run.call(step) else { return ignored(format!("`{step}` has no call")) };
        if record.attempt != attempt || !matches!(record.pending, Pending::Attempt { .. }) {
            return ignored(format!("stale answer for attempt {attempt} of `{step}`"));
        }
        let prior = record.effect;
        let Some((alias, op)) = self.wf.operation_of(step) else { return ignored(format!("`{step}` is not a call")) };
        let alias = alias.to_owned();
        let effect_kind = op.descriptor.effect;
        if self.run.state.is_terminal() {
            // A late answer after the run ended: an accepted effect is recorded so it stays visible.
            let CallAnswer::Accepted { output, completions } = answer else {
                return ignored("the run has ended");
            };
            self.record(step, attempt, EffectState::Accepted, Some(output.clone()), completions.clone(), None);
            self.audit(
                AuditKind::Classification,
                Some(step),
                format!("attempt {attempt}: accepted after the run ended"),
            );
            return Outcome::Applied;
        }
        if self.run.held {
            return ignored("a restore hold is placed: answers to attempts from before the hold are not applied");
        }
        match answer {
            CallAnswer::Accepted { output, completions } => {
                let violations = self.wf.check_output(&alias, output);
                if !violations.is_empty() {
                    self.record(step, attempt, EffectState::Accepted, None, BTreeMap::new(), None);
                    let message = format!(
                        "the output of `{step}` does not match its operation's output: {}",
                        describe(&violations)
                    );
                    self.fail("product.invalid-output", Some(step), message);
                    return Outcome::Applied;
                }
                self.record(step, attempt, EffectState::Accepted, Some(output.clone()), completions.clone(), None);
                self.audit(AuditKind::Classification, Some(step), format!("attempt {attempt}: accepted"));
                self.after_settled(step, |machine| machine.next_of(step))
            }
            CallAnswer::Refused { code } => self.refused(step, attempt, prior, code),
            CallAnswer::Retryable { retry_after_seconds } => {
                self.audit(AuditKind::Classification, Some(step), format!("attempt {attempt}: retryable"));
                if self.run.cancel == Some(CancelMode::Settling) {
                    self.end_cancelled(None, None);
                    return Outcome::Applied;
                }
                self.retry(step, attempt, *retry_after_seconds);
                Outcome::Applied
            }
            CallAnswer::Uncertain => {
                if effect_kind == Effect::Read {
                    self.audit(
                        AuditKind::Classification,
                        Some(step),
                        format!("attempt {attempt}: no answer; reading again"),
                    );
                    if self.run.cancel == Some(CancelMode::Settling) {
                        self.end_cancelled(None, None);
                        return Outcome::Applied;
                    }
                    self.retry(step, attempt, None);
                    return Outcome::Applied;
                }
                self.record(step, attempt, EffectState::Unknown, None, BTreeMap::new(), None);
                self.audit(AuditKind::Classification, Some(step), format!("attempt {attempt}: effect unknown"));
                // A cancel that waited for this call ends the run; on a cancel route the
                // unknown effect needs an operator like anywhere else.
                if self.run.cancel == Some(CancelMode::Settling) {
                    self.end_cancelled(None, None);
                } else {
                    self.emit(Action::EnterAttention { reason: Attention::UnknownEffect { step: step.to_owned() } });
                }
                Outcome::Applied
            }
        }
    }

    fn refused(&mut self, step: &str, attempt: u32, prior: EffectState, code: &str) -> Outcome {
        if prior == EffectState::Unknown {
            // A later refusal never clears an earlier unknown effect.
            self.record(step, attempt, EffectState::Unknown, None, BTreeMap::new(), Some(code.to_owned()));
            self.audit(
                AuditKind::Classification,
                Some(step),
                format!("attempt {attempt}: refused ({code}); the earlier effect stays unknown"),
            );
            if self.run.cancel == Some(CancelMode::Settling) {
                self.end_cancelled(None, None);
            } else {
                self.emit(Action::EnterAttention { reason: Attention::UnknownEffect { step: step.to_owned() } });
            }
            return Outcome::Applied;
        }
        self.record(step, attempt, EffectState::Refused, None, BTreeMap::new(), Some(code.to_owned()));
        self.audit(AuditKind::Classification, Some(step), format!("attempt {attempt}: refused ({code})"));
        let declared =
            self.wf.operation_of(step).is_some_and(|(_, op)| op.descriptor.declared_refusals.iter().any(|c| c == code));
        let route = match self.wf.step(step) {
            Some(Step::Call(call)) if declared => call.on_declared_refusal.get(code).cloned(),
            _ => None,
        };
        match route {
            Some(target) => self.after_settled(step, move |_| Some(target)),
            None => {
                let operation = self.wf.operation_of(step).map(|(_, op)| op.operation.clone()).unwrap_or_default();
                self.fail("product-refused", Some(step), format!("`{operation}` refused with `{code}`"));
                Outcome::Applied
            }
        }
    }

    /// Continues after a call settled: ends a run whose cancel waited for it, or follows `route`.
    pub(super) fn after_settled(&mut self, step: &str, route: impl FnOnce(&Self) -> Option<String>) -> Outcome {
        if self.run.cancel == Some(CancelMode::Settling) {
            self.end_cancelled(None, None);
            return Outcome::Applied;
        }
        match route(self) {
            Some(target) => self.enter(&target),
            None => self.fail("definition.invalid-route", Some(step), format!("`{step}` has no route to follow")),
        }
        Outcome::Applied
    }

    pub(super) fn next_of(&self, step: &str) -> Option<String> {
        match self.wf.step(step)? {
            Step::Call(call) => Some(call.next.clone()),
            _ => None,
        }
    }

    pub(super) fn record(
        &mut self,
        step: &str,
        attempt: u32,
        effect: EffectState,
        output: Option<serde_json::Value>,
        completions: BTreeMap<String, String>,
        refusal: Option<String>,
    ) {
        self.emit(Action::RecordEffect { step: step.to_owned(), attempt, effect, output, completions, refusal });
    }

    /// Queues the next attempt after a definite "not done", or fails with `retry.exhausted`.
    fn retry(&mut self, step: &str, attempt: u32, retry_after_seconds: Option<u64>) {
        let policy = match self.wf.step(step) {
            Some(Step::Call(call)) => EffectiveRetry::of(call.retry.as_ref()),
            _ => EffectiveRetry::of(None),
        };
        if policy.max_attempts.is_some_and(|max| attempt >= max) {
            let message = format!("`{step}` was not done after {attempt} attempt(s)");
            self.fail("retry.exhausted", Some(step), message);
            return;
        }
        let delay_ms = backoff_millis(&policy, attempt).max(retry_after_seconds.unwrap_or(0).saturating_mul(1000));
        let not_before = self.now.plus_millis(delay_ms);
        self.dispatch(step, attempt + 1, not_before);
    }
}

/// The delay before attempt `attempt + 1`: `initial × coefficient^(attempt − 1)`, at most the maximum.
pub fn backoff_millis(policy: &EffectiveRetry, attempt: u32) -> u64 {
    let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
    let seconds = policy.initial_interval_seconds as f64 * policy.backoff_coefficient.powi(exponent);
    let capped = seconds.min(policy.max_interval_seconds as f64).max(0.0);
    (capped * 1000.0).round() as u64
}
