//! Function proofs: every mapping names a function of `functions.rhai` with as
//! many parameters as it passes arguments (a search key's function, one: the input; a schedule's input
//! function, two: the nominal instant and the schedule id). Skipped when the file did not
//! compile (its own `function.compile` diagnostic says why; no cascade).

use crate::diagnostic::Code;
use crate::model::workflow::{Mapping, Source};
use crate::yaml::{Part, Path};

use super::context::{Ctx, step_path};

/// Runs the function proofs.
pub fn check(cx: &mut Ctx<'_>) {
    if cx.functions.is_none() {
        return;
    }
    let wf = cx.wf;
    for (id, step) in &wf.steps {
        for (field, mapping) in step.mappings() {
            one(cx, &step_path(id).key(field), mapping);
        }
    }
    for (name, trigger) in &wf.triggers {
        let base = Path::root().key("triggers").key(name);
        one(cx, &base.key("input"), &trigger.input);
        one(cx, &base.key("idempotencyKey"), &trigger.idempotency_key);
    }
    for (name, key) in &wf.search_keys {
        // A search key's function is called with one argument: the run input.
        let mapping = Mapping { function: key.function.clone(), arguments: vec![Source::Input] };
        one(cx, &Path::root().key("searchKeys").key(name), &mapping);
    }
    for (i, schedule) in wf.schedules.iter().enumerate() {
        // A schedule's input function is called with two: the nominal instant and the schedule id.
        let mapping = Mapping {
            function: schedule.input.function.clone(),
            arguments: vec![
                Source::Literal { value: serde_json::Value::Null },
                Source::Literal { value: serde_json::Value::Null },
            ],
        };
        one(cx, &Path::root().key("schedules").index(i).key("input"), &mapping);
    }
}

fn one(cx: &mut Ctx<'_>, path: &Path, mapping: &Mapping) {
    let Some(functions) = &cx.functions else { return };
    let given = mapping.arguments.len();
    match functions.get(&mapping.function) {
        None => {
            let names: Vec<&str> = functions.keys().map(String::as_str).collect();
            let help = match crate::decode::closest(&mapping.function, &names) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("define `fn {}(…)` in the functions file", mapping.function),
            };
            cx.error(
                Code::FunctionUnknown,
                &path.key("function"),
                Part::Value,
                format!("the functions file defines no function `{}`", mapping.function),
                help,
            );
        }
        Some(arities) if !arities.contains(&given) => {
            let takes: Vec<String> = arities.iter().map(ToString::to_string).collect();
            cx.error(
                Code::FunctionArity,
                path,
                Part::Key,
                format!(
                    "`{}` takes {} parameter(s), but this mapping passes {given} argument(s)",
                    mapping.function,
                    takes.join(" or ")
                ),
                "pass one argument per parameter, in order",
            );
        }
        Some(_) => {}
    }
}
