//! What a case's run did ([`Actual`]) and the first way it differs from the
//! case's expectations ([`Difference`]). Fields left out of `expect` are not compared.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::machine::compiled::Workflow;
use crate::machine::run::Run;
use crate::machine::time::Instant;
use crate::model::run::{EffectState, RunState};
use crate::model::scenarios::Expect;
use crate::model::workflow::Step;

/// What the run did, in the terms of `expect`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Actual {
    /// Every step entered, in order.
    pub path: Vec<String>,
    /// The state where the case stopped.
    pub state: RunState,
    /// The outcome, when a finish was reached.
    pub outcome: Option<String>,
    /// The published output.
    pub output: Option<Value>,
    /// The failure code.
    pub failure: Option<String>,
    /// Virtual seconds from admission to where the run stopped.
    pub elapsed_seconds: u64,
    /// The effect of every call step of the workflow (`none` if never dispatched).
    pub effects: BTreeMap<String, EffectState>,
    /// Observations of every wait-for step of the workflow.
    pub observations: BTreeMap<String, u32>,
}

impl Actual {
    /// Reads the run as it stands at `stopped_at`.
    pub fn of(workflow: &Workflow, run: &Run, stopped_at: Instant) -> Actual {
        let mut effects = BTreeMap::new();
        let mut observations = BTreeMap::new();
        for (id, step) in &workflow.definition.steps {
            match step {
                Step::Call(_) => {
                    effects.insert(id.clone(), run.call(id).map_or(EffectState::None, |c| c.effect));
                }
                Step::WaitFor(_) => {
                    observations.insert(id.clone(), run.wait(id).map_or(0, |w| w.observations));
                }
                Step::Choose(_) | Step::WaitUntil(_) | Step::Finish(_) => {}
            }
        }
        Actual {
            path: run.path.clone(),
            state: run.state,
            outcome: run.outcome.clone(),
            output: run.output.clone(),
            failure: run.failure.as_ref().map(|f| f.code.clone()),
            elapsed_seconds: stopped_at.seconds_since(run.admitted_at),
            effects,
            observations,
        }
    }
}

/// The first expectation that does not hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// Which expectation (`state`, `effects.send-notice`, …).
    pub field: String,
    /// The step it concerns, for per-step expectations.
    pub step: Option<String>,
    /// What the case expects.
    pub expected: Value,
    /// What happened.
    pub actual: Value,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: expected {}, got {}", self.field, self.expected, self.actual)
    }
}

fn differ(field: &str, step: Option<&str>, expected: Value, actual: Value) -> Option<Difference> {
    (expected != actual).then(|| Difference {
        field: field.to_owned(),
        step: step.map(str::to_owned),
        expected,
        actual,
    })
}

fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Compares in a fixed order: path, state, outcome, output, failure, elapsed, effects, observations.
pub fn first_difference(expect: &Expect, actual: &Actual) -> Option<Difference> {
    let checks = [
        expect.path.as_ref().and_then(|p| differ("path", None, json(p), json(&actual.path))),
        expect.state.and_then(|s| differ("state", None, json(&s), json(&actual.state))),
        expect.outcome.as_ref().and_then(|o| differ("outcome", None, json(o), json(&actual.outcome))),
        expect
            .output
            .as_ref()
            .and_then(|o| differ("output", None, o.clone(), actual.output.clone().unwrap_or(Value::Null))),
        expect.failure.as_ref().and_then(|f| differ("failure", None, json(f), json(&actual.failure))),
        expect.elapsed_seconds.and_then(|e| differ("elapsedSeconds", None, json(&e), json(&actual.elapsed_seconds))),
    ];
    if let Some(found) = checks.into_iter().flatten().next() {
        return Some(found);
    }
    for (step, effect) in expect.effects.iter().flatten() {
        let got = actual.effects.get(step).copied();
        let field = format!("effects.{step}");
        let got = got.map_or(Value::String("no such call step".to_owned()), |g| json(&g));
        if let Some(d) = differ(&field, Some(step), json(effect), got) {
            return Some(d);
        }
    }
    for (step, count) in expect.observations.iter().flatten() {
        let got = actual.observations.get(step).map_or(Value::String("no such wait-for step".to_owned()), json);
        if let Some(d) = differ(&format!("observations.{step}"), Some(step), json(count), got) {
            return Some(d);
        }
    }
    None
}
