//! Entering steps: what each of the five step types does when the run arrives.
//! Steps that decide at once (choose, a past wait-until) lead straight on, so
//! one event may carry a run through several steps.

use serde_json::Value;

use super::Machine;
use super::action::{Action, AuditKind, WaitResolution};
use super::compiled::describe;
use super::event::Timer;
use super::run::{CancelMode, Command};
use super::time::Instant;
use crate::model::workflow::{CallStep, ChooseStep, FinishStep, Step, WaitForStep, WaitUntilStep};

impl Machine<'_> {
    /// Enters `first` and every step that follows at once.
    pub(super) fn enter(&mut self, first: &str) {
        let mut next = Some(first.to_owned());
        // Each step can be entered once: the graph is acyclic.
        let mut budget = self.wf.definition.steps.len() + 1;
        while let Some(id) = next.take() {
            budget = budget.saturating_sub(1);
            let wf = self.wf;
            let Some(step) = wf.step(&id).filter(|_| budget > 0) else {
                self.fail("definition.invalid-route", Some(&id), format!("the route to `{id}` leads nowhere"));
                return;
            };
            self.emit(Action::EnterStep { step: id.clone() });
            self.audit(AuditKind::Decision, Some(&id), format!("entered {} step", step.type_name()));
            next = match step {
                Step::Call(call) => {
                    self.start_call(&id, call);
                    None
                }
                Step::Choose(choose) => self.choose(&id, choose),
                Step::WaitUntil(wait) => self.wait_until(&id, wait),
                Step::WaitFor(wait) => {
                    self.wait_for(&id, wait);
                    None
                }
                Step::Finish(finish) => {
                    self.finish(&id, finish);
                    None
                }
            };
        }
    }

    fn start_call(&mut self, id: &str, call: &CallStep) {
        let input = match self.evaluate(id, &call.input) {
            Ok(v) => v,
            Err(failure) => return self.fail_with(failure),
        };
        let violations = self.wf.check_command(&call.operation, &input);
        if !violations.is_empty() {
            let message =
                format!("the command of `{id}` does not match its operation's input: {}", describe(&violations));
            return self.fail("command.invalid", Some(id), message);
        }
        let command = Command { input, idempotency_key: format!("{}:{id}", self.run.id) };
        self.emit(Action::PrepareCommand { step: id.to_owned(), command });
        self.dispatch(id, 1, self.now);
    }

    /// Queues an attempt of a call.
    pub(super) fn dispatch(&mut self, id: &str, attempt: u32, not_before: Instant) {
        self.emit(Action::Dispatch { step: id.to_owned(), attempt, not_before });
        let when =
            if not_before > self.now { format!(" not before {}", not_before.to_rfc3339()) } else { String::new() };
        self.audit(AuditKind::Dispatch, Some(id), format!("attempt {attempt} queued{when}"));
    }

    fn choose(&mut self, id: &str, choose: &ChooseStep) -> Option<String> {
        let value = match self.evaluate(id, &choose.choose) {
            Ok(v) => v,
            Err(failure) => {
                self.fail_with(failure);
                return None;
            }
        };
        let target = value.as_str().and_then(|case| choose.cases.get(case));
        match target {
            Some(target) => Some(target.clone()),
            None => {
                let got = match &value {
                    Value::String(_) => "a value that is not one of its cases".to_owned(),
                    other => format!("{} instead of a string", kind(other)),
                };
                let cases: Vec<&str> = choose.cases.keys().map(String::as_str).collect();
                let message = format!("`{}` returned {got} (cases: {})", choose.choose.function, cases.join(", "));
                self.fail("function.unknown-case", Some(id), message);
                None
            }
        }
    }

    fn wait_until(&mut self, id: &str, wait: &WaitUntilStep) -> Option<String> {
        let value = match self.evaluate(id, &wait.until) {
            Ok(v) => v,
            Err(failure) => {
                self.fail_with(failure);
                return None;
            }
        };
        let Some(until) = value.as_str().and_then(Instant::parse_rfc3339) else {
            let message = format!("`{}` did not return an RFC 3339 instant ({})", wait.until.function, kind(&value));
            self.fail("function.invalid-instant", Some(id), message);
            return None;
        };
        self.emit(Action::StartTimer { step: id.to_owned(), until });
        if until <= self.now {
            self.emit(Action::ResolveWait { step: id.to_owned(), resolution: WaitResolution::Completed, value: None });
            return Some(wait.next.clone());
        }
        self.emit(Action::ScheduleTimer { timer: Timer::WaitUntil { step: id.to_owned() }, at: until });
        None
    }

    fn wait_for(&mut self, id: &str, wait: &WaitForStep) {
        let call = &wait.completion.step;
        let reference = self.run.call(call).and_then(|c| c.completions.get(&wait.completion.name)).cloned();
        let Some(reference) = reference else {
            let message = format!("`{call}` was accepted without exposing the completion `{}`", wait.completion.name);
            return self.fail("product.missing-completion", Some(id), message);
        };
        let own = self
            .wf
            .operation_of(call)
            .and_then(|(_, op)| op.descriptor.completions.get(&wait.completion.name))
            .map(|c| c.observe_every_seconds);
        let interval = wait
            .observe_every_seconds
            .or(own)
            .unwrap_or(self.settings.observe_floor_seconds)
            .max(self.settings.observe_floor_seconds);
        let timeout_at = self.now.plus_seconds(wait.timeout_seconds);
        self.emit(Action::StartWait {
            step: id.to_owned(),
            reference,
            started_at: self.now,
            interval_seconds: interval,
            timeout_at,
        });
        self.emit(Action::ScheduleTimer { timer: Timer::WaitTimeout { step: id.to_owned() }, at: timeout_at });
        self.emit(Action::ScheduleTimer {
            timer: Timer::Observation { step: id.to_owned() },
            at: self.now.plus_seconds(interval),
        });
    }

    fn finish(&mut self, id: &str, finish: &FinishStep) {
        let output = match &finish.output {
            None => None,
            Some(mapping) => match self.evaluate(id, mapping) {
                Ok(v) => Some(v),
                Err(failure) => return self.fail_with(failure),
            },
        };
        let violations = self.wf.check_outcome(&finish.outcome, output.as_ref().unwrap_or(&Value::Null));
        if !violations.is_empty() {
            let message =
                format!("the output of `{id}` does not match outcome `{}`: {}", finish.outcome, describe(&violations));
            return self.fail("outcome.invalid-output", Some(id), message);
        }
        if self.run.cancel.is_some() {
            return self.end_cancelled(Some(finish.outcome.clone()), output);
        }
        self.audit(AuditKind::Decision, Some(id), format!("finished with outcome {}", finish.outcome));
        self.emit(Action::EndRun {
            state: crate::model::run::RunState::Finished,
            outcome: Some(finish.outcome.clone()),
            output,
            failure: None,
        });
    }

    /// Follows a wait's cancel route.
    pub(super) fn follow_cancel_route(&mut self, id: &str, target: &str) {
        self.cancel_wait_timers(id);
        self.emit(Action::ResolveWait { step: id.to_owned(), resolution: WaitResolution::Cancelled, value: None });
        self.emit(Action::RequestCancel { mode: CancelMode::Route });
        self.audit(AuditKind::Decision, Some(id), format!("cancel: following onCancel to {target}"));
        self.enter(target);
    }

    /// Removes the timers of a wait step.
    pub(super) fn cancel_wait_timers(&mut self, id: &str) {
        for timer in [
            Timer::WaitUntil { step: id.to_owned() },
            Timer::Observation { step: id.to_owned() },
            Timer::WaitTimeout { step: id.to_owned() },
        ] {
            if self.run.timers.contains_key(&timer) {
                self.emit(Action::CancelTimer { timer });
            }
        }
    }
}

/// The JSON kind of a value, for messages that must not show the value.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
