//! Triggers (docs/reference/project.md#triggers,
//! docs/reference/runs.md#admission): from a product event, whose signature the
//! service has verified, to what an admission needs — the run input (the
//! trigger's `input` mapping) and the idempotency key (its `idempotencyKey`
//! mapping). Pure: no clock, no IO; the functions run in the same bounded
//! sandbox, with the same sources, as every mapping of the machine.
//!
//! What is checked, in order: the event is a JSON object whose `eventId` is a
//! non-empty string of at most [`MAX_EVENT_ID_CHARS`] characters ([`event_id`];
//! every catalogued event carries one); the event matches its catalog schema
//! when the compiled workflow knows it ([`Workflow::with_event_schemas`]: the
//! package does not pin event schemas); each mapping's function succeeds; the
//! key is a non-empty string of at most [`MAX_KEY_CHARS`] characters; the input
//! matches the workflow's input schema. Errors carry pointers and names, never
//! values.

use serde_json::Value;

use super::compiled::Workflow;
use crate::json_schema::Violation;
use crate::model::workflow::{Mapping, Source, Trigger};

/// The longest event id accepted (characters).
pub const MAX_EVENT_ID_CHARS: usize = 200;

/// The longest idempotency key a trigger may compute (characters).
pub const MAX_KEY_CHARS: usize = 500;

/// What a trigger computes from an event.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerAdmission {
    /// The run input, valid against the workflow's input schema.
    pub input: Value,
    /// The admission idempotency key.
    pub idempotency_key: String,
}

/// Why an event does not admit a run. No variant carries a value of the event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TriggerError {
    /// The workflow has no trigger of this name (`trigger.unknown`).
    #[error("the workflow has no trigger `{0}`")]
    Unknown(String),
    /// The event carries no usable `eventId` (`request.invalid`).
    #[error("{0}")]
    EventId(EventIdProblem),
    /// The event does not match its catalog schema (`event.invalid`).
    #[error("the event does not match the schema of `{event}`")]
    EventInvalid {
        /// The event name.
        event: String,
        /// Where (JSON pointers and messages, no values).
        violations: Vec<Violation>,
    },
    /// A mapping's function failed, or the key is not a usable string (`event.mapping-failed`).
    #[error("the `{mapping}` mapping of trigger `{trigger}` (function `{function}`) failed: {message}")]
    MappingFailed {
        /// The trigger.
        trigger: String,
        /// `input` or `idempotencyKey`.
        mapping: &'static str,
        /// The function.
        function: String,
        /// What went wrong (names and bounds, never values).
        message: String,
    },
    /// The computed input does not match the workflow's input schema (`input.invalid`).
    #[error("the input computed by trigger `{trigger}` does not match the workflow's input schema")]
    InputInvalid {
        /// The trigger.
        trigger: String,
        /// JSON pointers of the offending places (never the values).
        pointers: Vec<String>,
    },
}

/// Why an event has no usable id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EventIdProblem {
    /// The body is JSON, but not an object.
    #[error("the event must be a JSON object")]
    NotAnObject,
    /// No `eventId` field.
    #[error("the event has no `eventId`")]
    Missing,
    /// `eventId` is not a string, is empty or too long.
    #[error("the event's `eventId` must be a non-empty string of at most {MAX_EVENT_ID_CHARS} characters")]
    Invalid,
}

/// The event's id: its `eventId` field, a non-empty string of at most
/// [`MAX_EVENT_ID_CHARS`] characters. It is what deduplicates deliveries.
///
/// # Errors
/// [`EventIdProblem`] saying what is missing or wrong (never the value).
pub fn event_id(event: &Value) -> Result<&str, EventIdProblem> {
    let object = event.as_object().ok_or(EventIdProblem::NotAnObject)?;
    match object.get("eventId") {
        None => Err(EventIdProblem::Missing),
        Some(Value::String(id)) if !id.is_empty() && id.chars().count() <= MAX_EVENT_ID_CHARS => Ok(id),
        Some(_) => Err(EventIdProblem::Invalid),
    }
}

impl Workflow {
    /// A trigger by name.
    pub fn trigger(&self, name: &str) -> Option<&Trigger> {
        self.definition.triggers.get(name)
    }

    /// What trigger `name` admits from `event`
    /// (docs/reference/runs.md#admission): its run input and idempotency key,
    /// after every check of the module doc.
    ///
    /// # Errors
    /// [`TriggerError`], each variant with its stable code.
    pub fn trigger_admission(&self, name: &str, event: &Value) -> Result<TriggerAdmission, TriggerError> {
        let trigger = self.trigger(name).ok_or_else(|| TriggerError::Unknown(name.to_owned()))?;
        event_id(event).map_err(TriggerError::EventId)?;
        if let Some(violations) = self.check_event(&trigger.event, event)
            && !violations.is_empty()
        {
            return Err(TriggerError::EventInvalid { event: trigger.event.clone(), violations });
        }
        let input = self.trigger_mapping(name, "input", &trigger.input, event)?;
        let key = self.trigger_mapping(name, "idempotencyKey", &trigger.idempotency_key, event)?;
        let idempotency_key = match key {
            Value::String(key) if !key.is_empty() && key.chars().count() <= MAX_KEY_CHARS => key,
            other => {
                return Err(TriggerError::MappingFailed {
                    trigger: name.to_owned(),
                    mapping: "idempotencyKey",
                    function: trigger.idempotency_key.function.clone(),
                    message: format!(
                        "it returned {}, not a non-empty string of at most {MAX_KEY_CHARS} characters",
                        kind(&other)
                    ),
                });
            }
        };
        let violations = self.check_input(&input);
        if !violations.is_empty() {
            return Err(TriggerError::InputInvalid {
                trigger: name.to_owned(),
                pointers: violations.into_iter().map(|v| v.pointer).collect(),
            });
        }
        Ok(TriggerAdmission { input, idempotency_key })
    }

    /// One mapping of a trigger. Its sources are the event and literals: the
    /// run, its input and step outputs do not exist yet (the checker refuses
    /// them in triggers; a package that has one fails here).
    fn trigger_mapping(
        &self,
        trigger: &str,
        which: &'static str,
        mapping: &Mapping,
        event: &Value,
    ) -> Result<Value, TriggerError> {
        let failed = |message: String| TriggerError::MappingFailed {
            trigger: trigger.to_owned(),
            mapping: which,
            function: mapping.function.clone(),
            message,
        };
        let mut args = Vec::with_capacity(mapping.arguments.len());
        for source in &mapping.arguments {
            args.push(match source {
                Source::Event => event.clone(),
                Source::Literal { value } => value.clone(),
                Source::Input => return Err(failed("`{type: input}` has no value before the run exists".to_owned())),
                Source::Run => return Err(failed("`{type: run}` has no value before the run exists".to_owned())),
                Source::Step { step } => {
                    return Err(failed(format!("`{{type: step, step: {step}}}` has no value before the run exists")));
                }
            });
        }
        self.functions.call(&mapping.function, &args).map_err(|e| failed(e.to_string()))
    }
}

/// The JSON type of a value, for messages that must not show it.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(s) if s.is_empty() => "an empty string",
        Value::String(_) => "a string that is too long",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[path = "trigger_tests.rs"]
mod tests;
