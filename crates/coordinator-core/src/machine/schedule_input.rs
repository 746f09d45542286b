//! A schedule's run input (docs/reference/project.md#schedules): the
//! schedule's function of the nominal instant and the schedule id, checked
//! against the workflow's input schema. One rule for the scenario runner's
//! firings and the service's.

use serde_json::Value;

use super::compiled::{Workflow, describe};
use super::time::Instant;
use crate::model::workflow::Schedule;

/// Why a firing has no usable input. Never carries the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleInputError {
    /// The function failed (its description names no value).
    #[error("`{function}` fails: {message}")]
    Failed {
        /// The schedule's input function.
        function: String,
        /// What went wrong, without values.
        message: String,
    },
    /// The input does not match the workflow's input schema.
    #[error("the input does not match the input schema: {0}")]
    Invalid(String),
}

impl Workflow {
    /// The input of `schedule`'s run for nominal instant `at` (ms).
    ///
    /// # Errors
    /// [`ScheduleInputError`].
    pub fn schedule_input(&self, schedule: &Schedule, at: i64) -> Result<Value, ScheduleInputError> {
        let args = [Value::String(Instant(at).to_rfc3339()), Value::String(schedule.id.clone())];
        let input = self.functions.call(&schedule.input.function, &args).map_err(|e| ScheduleInputError::Failed {
            function: schedule.input.function.clone(),
            message: e.to_string(),
        })?;
        let violations = self.check_input(&input);
        if violations.is_empty() { Ok(input) } else { Err(ScheduleInputError::Invalid(describe(&violations))) }
    }

    /// The schedule `id` of this workflow.
    pub fn schedule(&self, id: &str) -> Option<&Schedule> {
        self.definition.schedules.iter().find(|s| s.id == id)
    }
}
