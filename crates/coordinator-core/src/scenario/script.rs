//! A case's script: the replies per step (consumed in order) and the operator
//! actions per step (each applied once, in order), with the bookkeeping that
//! reports a missing or an unused entry by step.

use std::collections::{BTreeMap, VecDeque};

use super::Pick;
use crate::machine::compiled::Workflow;
use crate::machine::event::{CallAnswer, Event, Observation, ReceiptAnswer};
use crate::model::scenarios::{Case, OperatorAction, ReceiptResult, Reply};
use crate::model::workflow::Step;

/// What is left of a case's script.
pub struct Script {
    replies: BTreeMap<String, VecDeque<Reply>>,
    operator: BTreeMap<String, VecDeque<OperatorAction>>,
}

type ScriptError = (String, String);

impl Script {
    /// The script of a case.
    pub fn new(case: &Case) -> Script {
        Script {
            replies: case
                .replies
                .iter()
                .map(|(k, v)| {
                    (k.clone(), v.iter().flat_map(|r| std::iter::repeat_n(r.clone(), r.times() as usize)).collect())
                })
                .collect(),
            operator: case.operator.iter().map(|(k, v)| (k.clone(), v.actions().into_iter().collect())).collect(),
        }
    }

    /// Every step the script names must exist and take that kind of script.
    pub fn check_steps(&self, workflow: &Workflow) -> Result<(), ScriptError> {
        for step in self.replies.keys() {
            match workflow.step(step) {
                Some(Step::Call(_) | Step::WaitFor(_)) => {}
                Some(other) => {
                    return Err((
                        step.clone(),
                        format!("replies are scripted for a {} step, which calls no product", other.type_name()),
                    ));
                }
                None => {
                    return Err((
                        step.clone(),
                        "replies are scripted for a step the workflow does not have".to_owned(),
                    ));
                }
            }
        }
        for step in self.operator.keys() {
            if !matches!(workflow.step(step), Some(Step::Call(_))) {
                return Err((step.clone(), "operator actions are scripted for a step that is not a call".to_owned()));
            }
        }
        Ok(())
    }

    fn take(&mut self, step: &str, needed: &str) -> Result<Reply, ScriptError> {
        self.replies.get_mut(step).and_then(VecDeque::pop_front).ok_or_else(|| {
            (step.to_owned(), format!("the run needs {needed}, but the case scripts no further reply for this step"))
        })
    }

    /// Turns a chosen pick into its event, consuming the reply it needs.
    pub(super) fn resolve(&mut self, pick: Pick) -> Result<Event, ScriptError> {
        match pick {
            Pick::Event(event) => Ok(event),
            Pick::Answer { step, attempt } => {
                let reply = self.take(&step, &format!("an answer to attempt {attempt}"))?;
                let answer = match reply {
                    Reply::Accepted { output, completions } => CallAnswer::Accepted { output, completions },
                    Reply::Refused { code } => CallAnswer::Refused { code },
                    Reply::Retryable { retry_after_seconds, .. } => CallAnswer::Retryable { retry_after_seconds },
                    Reply::Uncertain { .. } => CallAnswer::Uncertain,
                    other => {
                        return Err(mismatch(
                            &step,
                            &other,
                            "an answer to a call (accepted, refused, retryable, uncertain)",
                        ));
                    }
                };
                Ok(Event::CallAnswered { step, attempt, answer })
            }
            Pick::Receipt { step } => {
                let reply = self.take(&step, "a receipt (a reconcile looks one up)")?;
                let Reply::Receipt { result, output, completions } = reply else {
                    return Err(mismatch(&step, &reply, "a `receipt` reply (a reconcile looks one up)"));
                };
                let answer = match (result, output) {
                    (ReceiptResult::Found, Some(output)) => ReceiptAnswer::Found { output, completions },
                    (ReceiptResult::Found, None) => return Err((step, "a found receipt needs an `output`".to_owned())),
                    (ReceiptResult::NotFound, _) => ReceiptAnswer::NotFound,
                    (ReceiptResult::Expired, _) => ReceiptAnswer::Expired,
                    (ReceiptResult::Unavailable, _) => ReceiptAnswer::Unavailable,
                };
                Ok(Event::ReceiptAnswered { step, answer })
            }
            Pick::Observation { step, seq } => {
                let reply = self.take(&step, &format!("observation {seq}"))?;
                let answer = match reply {
                    Reply::Pending { .. } => Observation::Pending,
                    Reply::Complete { value } => Observation::Complete { value },
                    other => return Err(mismatch(&step, &other, "an observation (pending or complete)")),
                };
                Ok(Event::CompletionObserved { step, seq, answer })
            }
        }
    }

    /// The next operator action scripted for a step, consumed.
    pub fn operator(&mut self, step: &str) -> Option<OperatorAction> {
        self.operator.get_mut(step).and_then(VecDeque::pop_front)
    }

    /// The first step with script left over, and what is left.
    pub fn unused(&self) -> Option<ScriptError> {
        if let Some((step, left)) = self.replies.iter().find(|(_, left)| !left.is_empty()) {
            let kinds: Vec<&str> = left.iter().map(Reply::type_name).collect();
            return Some((
                step.clone(),
                format!("{} scripted repl(ies) were not used: {}", left.len(), kinds.join(", ")),
            ));
        }
        let (step, left) = self.operator.iter().find(|(_, left)| !left.is_empty())?;
        let kinds: Vec<&str> = left.iter().map(|a| a.as_str()).collect();
        Some((step.clone(), format!("{} scripted operator action(s) were not used: {}", left.len(), kinds.join(", "))))
    }
}

fn mismatch(step: &str, reply: &Reply, wanted: &str) -> ScriptError {
    (step.to_owned(), format!("the next scripted reply is `{}`, but the run needs {wanted}", reply.type_name()))
}
