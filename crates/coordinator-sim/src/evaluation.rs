//! The simulated decision evaluator: `evaluate/v1` runs no real model. Its result
//! is the `expectedResult` fact when the facts carry one as a string of 1 to 128
//! characters (so tests and dev runs choose the result), else `eligible`. Each
//! evaluation counts as an effect, so tests can prove one was never repeated.

use std::time::SystemTime;

use axum::Router;
use serde_json::{Value, json};

use crate::engine::{self, Accepted, Completion, Product, Sim};
use crate::error::Refusal;

/// The evaluator's state: how many evaluations it performed.
#[derive(Debug, Default)]
pub struct Evaluation {
    evaluations: u64,
}

impl Product for Evaluation {
    const NAME: &'static str = "evaluation";
    const OPERATIONS: &'static [&'static str] = &["evaluate/v1"];

    fn perform(&mut self, operation: &str, command: &Value, _now: SystemTime) -> Result<Accepted, Refusal> {
        match operation {
            "evaluate/v1" => {
                let model = command.get("model").and_then(Value::as_str).ok_or_else(Refusal::invalid_command)?;
                let facts = command.get("facts").and_then(Value::as_object).ok_or_else(Refusal::invalid_command)?;
                let result = facts
                    .get("expectedResult")
                    .and_then(Value::as_str)
                    .filter(|r| (1..=128).contains(&r.chars().count()))
                    .unwrap_or("eligible");
                self.evaluations += 1;
                let explanation = format!(
                    "Simulated evaluation {} of model {model} over {} facts: {result}.",
                    self.evaluations,
                    facts.len()
                );
                Ok(Accepted::output(json!({"result": result, "explanation": explanation})))
            }
            _ => Err(Refusal::not_found("unknown-operation")),
        }
    }

    fn completion(&self, _name: &str, _reference: &str) -> Option<Completion> {
        None
    }
}

impl Sim<Evaluation> {
    /// How many evaluations were performed (replays not counted).
    pub fn evaluations(&self) -> u64 {
        self.with_product(|e| e.evaluations)
    }
}

/// The evaluator routes (protocol and control API), to be served at `/sim/evaluation`.
pub fn router(sim: Sim<Evaluation>) -> Router {
    engine::routes().with_state(sim)
}
