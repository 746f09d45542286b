//! Outcome proofs: every `finish` names a declared outcome, and has an `output`
//! mapping exactly when the outcome's schema is not `{type: "null"}`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::diagnostic::Code;
use crate::model::workflow::Step;
use crate::yaml::{Part, Path};

use super::context::{Ctx, step_path};

/// Whether an outcome schema says "no output".
pub fn is_null_schema(schema: &Value) -> bool {
    *schema == json!({"type": "null"})
}

/// Runs the outcome proofs.
pub fn check(cx: &mut Ctx<'_>) {
    let wf = cx.wf;
    let mut used = BTreeSet::new();
    for (id, step) in &wf.steps {
        let Step::Finish(finish) = step else { continue };
        let Some(schema) = wf.outcomes.get(&finish.outcome) else {
            let names: Vec<&str> = wf.outcomes.keys().map(String::as_str).collect();
            let near = crate::decode::closest(&finish.outcome, &names);
            // The outcome the typo meant is used, as far as the unused-outcome warning goes.
            used.extend(near);
            let help = match near {
                Some(near) => format!("did you mean `{near}`?"),
                None => "declare it under `outcomes` with the JSON Schema of its output".to_owned(),
            };
            cx.error(
                Code::OutcomeUnknown,
                &step_path(id).key("outcome"),
                Part::Value,
                format!("`{id}` finishes with `{}`, which `outcomes` does not declare", finish.outcome),
                help,
            );
            continue;
        };
        used.insert(finish.outcome.as_str());
        match (&finish.output, is_null_schema(schema)) {
            (None, false) => cx.error(
                Code::OutcomeOutputMissing,
                &step_path(id),
                Part::Key,
                format!(
                    "`{id}` finishes with `{}`, whose schema expects an output, but has no `output` mapping",
                    finish.outcome
                ),
                "add `output: {function: …, arguments: […]}`, or declare the outcome as `{type: \"null\"}`",
            ),
            (Some(_), true) => cx.error(
                Code::OutcomeOutputNotAllowed,
                &step_path(id).key("output"),
                Part::Key,
                format!("`{id}` finishes with `{}`, which publishes no output (`{{type: \"null\"}}`)", finish.outcome),
                "remove `output`, or give the outcome a schema for what it publishes",
            ),
            _ => {}
        }
    }
    for name in wf.outcomes.keys() {
        if !used.contains(name.as_str()) {
            cx.warning(
                Code::OutcomeUnused,
                &Path::root().key("outcomes").key(name),
                Part::Key,
                format!("no finish step ends with the outcome `{name}`"),
                "remove it, or add a finish step for it",
            );
        }
    }
}
