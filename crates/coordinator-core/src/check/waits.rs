//! Wait proofs: a `wait-for` names a completion its call's operation exposes,
//! and its timeout is shorter than the run deadline.

use crate::diagnostic::Code;
use crate::model::workflow::Step;
use crate::yaml::Part;

use super::context::{Ctx, step_path};

/// Runs the wait proofs.
pub fn check(cx: &mut Ctx<'_>) {
    let wf = cx.wf;
    for (id, step) in &wf.steps {
        let Step::WaitFor(wait) = step else { continue };
        if wait.timeout_seconds >= wf.deadline_seconds {
            cx.error(
                Code::WaitTimeoutExceedsDeadline,
                &step_path(id).key("timeoutSeconds"),
                Part::Value,
                format!(
                    "`{id}` waits {} s, not less than the run deadline of {} s",
                    wait.timeout_seconds, wf.deadline_seconds
                ),
                "make timeoutSeconds shorter than deadlineSeconds, so the wait can time out and follow its route",
            );
        }
        let target = &wait.completion.step;
        let path = step_path(id).key("completion");
        match wf.steps.get(target) {
            None => {}
            Some(Step::Call(call)) => {
                let op = wf
                    .operations
                    .get(&call.operation)
                    .and_then(|b| cx.catalog.operations.get(&b.operation).map(|op| (b, op)));
                if let Some((binding, op)) = op
                    && !op.completions.contains_key(&wait.completion.name)
                {
                    let exposed: Vec<&str> = op.completions.keys().map(String::as_str).collect();
                    let help = if exposed.is_empty() {
                        format!("`{}` exposes no completions; wait for a call whose operation does", binding.operation)
                    } else {
                        format!("`{}` exposes: {}", binding.operation, exposed.join(", "))
                    };
                    cx.error(
                        Code::WaitUnknownCompletion,
                        &path.key("name"),
                        Part::Value,
                        format!(
                            "`{}` does not expose a completion named `{}`",
                            binding.operation, wait.completion.name
                        ),
                        help,
                    );
                }
            }
            Some(other) => {
                cx.error(
                    Code::WaitUnknownCompletion,
                    &path.key("step"),
                    Part::Value,
                    format!(
                        "`{id}` waits for a completion of `{target}`, a {} step; only calls expose completions",
                        other.type_name()
                    ),
                    "name the call step whose accepted answer exposes the completion",
                );
            }
        }
    }
}
