//! Evaluating mappings: gathering each source's value and calling the function
//! through the sandbox. Failures name the step and function, never the values.

use serde_json::{Value, json};

use super::Machine;
use super::run::Failure;
use crate::model::workflow::{Mapping, Source};

impl Machine<'_> {
    /// The value of a mapping at `step`.
    pub(super) fn evaluate(&self, step: &str, mapping: &Mapping) -> Result<Value, Failure> {
        let mut args = Vec::with_capacity(mapping.arguments.len());
        for source in &mapping.arguments {
            args.push(match source {
                Source::Input => self.run.input.clone(),
                Source::Literal { value } => value.clone(),
                Source::Run => json!({
                    "runId": self.run.id,
                    "admittedAt": self.run.admitted_at.to_rfc3339(),
                    "revision": self.run.revision,
                }),
                Source::Step { step: read } => match self.run.output_of(read) {
                    Some(value) => value.clone(),
                    None => {
                        return Err(Failure {
                            code: "function.failed".to_owned(),
                            step: Some(step.to_owned()),
                            message: format!("`{step}` reads `{read}`, which has no saved output"),
                        });
                    }
                },
                // Only triggers read events; the checker refuses `{type: event}` in steps.
                Source::Event => Value::Null,
            });
        }
        self.wf.functions.call(&mapping.function, &args).map_err(|e| Failure {
            code: e.code().to_owned(),
            step: Some(step.to_owned()),
            message: format!("function `{}` of step `{step}`: {e}", mapping.function),
        })
    }
}
