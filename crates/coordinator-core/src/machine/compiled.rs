//! A definition made ready to decide runs: functions compiled, schemas compiled.
//! Built once per revision and shared (the service caches it; it is immutable).

use std::collections::BTreeMap;

use coordinator_functions::{CompileError, Functions, Limits};
use jsonschema::Validator;
use serde_json::Value;

use crate::definition::{Definition, PinnedOperation};
use crate::json_schema::{self, SchemaError, Violation};
use crate::model::workflow::Step;

/// Why a definition cannot be made ready (a package that was not checked, or a
/// deployment whose function limits are lower than the project needs).
#[derive(Debug, thiserror::Error)]
pub enum CompileFailure {
    /// `functions.rhai` does not compile under the limits.
    #[error("the functions do not compile: {0}")]
    Functions(#[from] CompileError),
    /// A schema does not compile.
    #[error("the schema at {what} does not compile: {error}")]
    Schema {
        /// Which schema.
        what: String,
        /// Why.
        error: SchemaError,
    },
}

/// A definition with everything compiled.
pub struct Workflow {
    /// The definition.
    pub definition: Definition,
    /// The revision.
    pub revision: String,
    /// The compiled functions.
    pub functions: Functions,
    input: Validator,
    commands: BTreeMap<String, Validator>,
    outputs: BTreeMap<String, Validator>,
    completions: BTreeMap<(String, String), Validator>,
    outcomes: BTreeMap<String, Validator>,
    /// Event name -> the compiled schema of the event, for the trigger events
    /// whose schema the caller supplied ([`Workflow::with_event_schemas`]).
    events: BTreeMap<String, Validator>,
}

impl std::fmt::Debug for Workflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflow")
            .field("workflow", &self.definition.workflow)
            .field("revision", &self.revision)
            .finish()
    }
}

fn schema(what: impl Into<String>, value: &Value) -> Result<Validator, CompileFailure> {
    json_schema::compile(value).map_err(|error| CompileFailure::Schema { what: what.into(), error })
}

impl Workflow {
    /// Compiles a definition under the given function limits.
    ///
    /// # Errors
    /// [`CompileFailure`] when functions or schemas do not compile.
    pub fn compile(definition: Definition, limits: Limits) -> Result<Workflow, CompileFailure> {
        let functions = Functions::compile(&definition.functions, limits)?;
        let input = schema("input", &definition.input)?;
        let mut commands = BTreeMap::new();
        let mut outputs = BTreeMap::new();
        let mut completions = BTreeMap::new();
        for (alias, op) in &definition.operations {
            commands.insert(alias.clone(), schema(format!("operation {alias} input"), &op.descriptor.input)?);
            outputs.insert(alias.clone(), schema(format!("operation {alias} output"), &op.descriptor.output)?);
            for (name, c) in &op.descriptor.completions {
                completions
                    .insert((alias.clone(), name.clone()), schema(format!("completion {alias}.{name}"), &c.schema)?);
            }
        }
        let mut outcomes = BTreeMap::new();
        for (name, value) in &definition.outcomes {
            outcomes.insert(name.clone(), schema(format!("outcome {name}"), value)?);
        }
        let revision = definition.revision().unwrap_or_default();
        let events = BTreeMap::new();
        Ok(Workflow { definition, revision, functions, input, commands, outputs, completions, outcomes, events })
    }

    /// Adds the schemas of the events the workflow's triggers admit from, taken
    /// from `schemas` (event name -> JSON Schema). The definition does not pin
    /// event schemas, so the caller says which ones it trusts (the service
    /// passes the built-in catalog's:
    /// [`Catalog::builtin_event_schemas`]);
    /// a trigger event without a schema here is not validated.
    ///
    /// # Errors
    /// [`CompileFailure::Schema`] when a supplied schema does not compile.
    ///
    /// [`Catalog::builtin_event_schemas`]: crate::check::catalog::Catalog::builtin_event_schemas
    pub fn with_event_schemas(mut self, schemas: &BTreeMap<String, Value>) -> Result<Workflow, CompileFailure> {
        for trigger in self.definition.triggers.values() {
            if let Some(value) = schemas.get(&trigger.event)
                && !self.events.contains_key(&trigger.event)
            {
                self.events.insert(trigger.event.clone(), schema(format!("event {}", trigger.event), value)?);
            }
        }
        Ok(self)
    }

    /// A step by id.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.definition.steps.get(id)
    }

    /// The pinned operation a call step uses.
    pub fn operation_of(&self, step: &str) -> Option<(&str, &PinnedOperation)> {
        match self.step(step)? {
            Step::Call(call) => {
                self.definition.operations.get_key_value(&call.operation).map(|(a, op)| (a.as_str(), op))
            }
            _ => None,
        }
    }

    /// Violations of the run input schema (pointers only, never values).
    pub fn check_input(&self, input: &Value) -> Vec<Violation> {
        json_schema::violations(&self.input, input)
    }

    /// Violations of an operation's command schema.
    pub fn check_command(&self, alias: &str, command: &Value) -> Vec<Violation> {
        self.commands.get(alias).map(|v| json_schema::violations(v, command)).unwrap_or_default()
    }

    /// Violations of an operation's output schema.
    pub fn check_output(&self, alias: &str, output: &Value) -> Vec<Violation> {
        self.outputs.get(alias).map(|v| json_schema::violations(v, output)).unwrap_or_default()
    }

    /// Violations of a completion's value schema.
    pub fn check_completion(&self, alias: &str, name: &str, value: &Value) -> Vec<Violation> {
        self.completions
            .get(&(alias.to_owned(), name.to_owned()))
            .map(|v| json_schema::violations(v, value))
            .unwrap_or_default()
    }

    /// Violations of an event's schema (pointers only); `None` when the schema
    /// of that event is not known to this compiled workflow.
    pub fn check_event(&self, event: &str, value: &Value) -> Option<Vec<Violation>> {
        self.events.get(event).map(|v| json_schema::violations(v, value))
    }

    /// Violations of an outcome's output schema.
    pub fn check_outcome(&self, outcome: &str, output: &Value) -> Vec<Violation> {
        self.outcomes.get(outcome).map(|v| json_schema::violations(v, output)).unwrap_or_default()
    }
}

/// A short description of schema violations for failure messages (pointers, no values).
pub fn describe(violations: &[Violation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .take(3)
        .map(|v| if v.pointer.is_empty() { v.message.clone() } else { format!("{}: {}", v.pointer, v.message) })
        .collect();
    let more = violations.len().saturating_sub(3);
    if more > 0 { format!("{} (and {more} more)", parts.join("; ")) } else { parts.join("; ") }
}
