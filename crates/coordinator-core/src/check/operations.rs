//! Operation proofs: every alias names a catalogued host operation (never a
//! proposal action), every step names a declared alias, and every
//! `onDeclaredRefusal` code is declared by the operation's owner.

use std::collections::BTreeSet;

use crate::diagnostic::Code;
use crate::model::catalog::Effect;
use crate::model::workflow::Step;
use crate::yaml::{Part, Path};

use super::context::{Ctx, step_path};

/// Runs the operation proofs.
pub fn check(cx: &mut Ctx<'_>) {
    let wf = cx.wf;
    for (alias, binding) in &wf.operations {
        let path = Path::root().key("operations").key(alias).key("operation");
        match cx.catalog.operations.get(&binding.operation) {
            None if cx.catalog.may_be_broken(&binding.operation) => {}
            None => {
                let names: Vec<&str> = cx.catalog.operations.keys().map(String::as_str).collect();
                let help = match crate::decode::closest(&binding.operation, &names) {
                    Some(near) => format!(
                        "did you mean `{near}`? `coordinatorctl explain` and docs/catalog.md list the catalogued operations"
                    ),
                    None => "name a built-in operation (docs/catalog.md) or describe it in `catalog/<product>.yaml`"
                        .to_owned(),
                };
                cx.error(
                    Code::OperationUnknown,
                    &path,
                    Part::Value,
                    format!("no catalog describes the operation `{}`", binding.operation),
                    help,
                );
            }
            Some(op) if op.effect == Effect::ProposalAction => {
                cx.error(
                    Code::OperationProposalAction,
                    &path,
                    Part::Value,
                    format!("`{}` is a proposal action; the coordinator does not apply proposals", binding.operation),
                    "the applicant drives the proposal in its product; follow it with a product event trigger or a later read",
                );
            }
            Some(_) => {}
        }
    }
    let mut used = BTreeSet::new();
    for (id, step) in &wf.steps {
        let Step::Call(call) = step else { continue };
        let Some(binding) = wf.operations.get(&call.operation) else {
            let aliases: Vec<&str> = wf.operations.keys().map(String::as_str).collect();
            let near = crate::decode::closest(&call.operation, &aliases);
            // The alias the typo meant is used, as far as the unused-alias warning goes.
            used.extend(near);
            let help = match near {
                Some(near) => format!("did you mean `{near}`?"),
                None => {
                    "declare the alias under `operations` (alias: {operation: <product>.<name>/v<N>, connection: …})"
                        .to_owned()
                }
            };
            cx.error(
                Code::OperationUnknownAlias,
                &step_path(id).key("operation"),
                Part::Value,
                format!("`{id}` uses the operation alias `{}`, which `operations` does not declare", call.operation),
                help,
            );
            continue;
        };
        used.insert(call.operation.as_str());
        let Some(op) = cx.catalog.operations.get(&binding.operation) else { continue };
        for code in call.on_declared_refusal.keys() {
            if !op.declared_refusals.contains(code) {
                let declared =
                    if op.declared_refusals.is_empty() { "none".to_owned() } else { op.declared_refusals.join(", ") };
                cx.error(
                    Code::OperationUndeclaredRefusal,
                    &step_path(id).key("onDeclaredRefusal").key(code),
                    Part::Key,
                    format!("`{}` does not declare the no-effect refusal `{code}`", binding.operation),
                    format!("only codes the owner declares may be routed (declared: {declared}); any other refusal fails the run with product-refused"),
                );
            }
        }
    }
    for alias in wf.operations.keys() {
        if !used.contains(alias.as_str()) {
            cx.warning(
                Code::OperationUnusedAlias,
                &Path::root().key("operations").key(alias),
                Part::Key,
                format!("the operation alias `{alias}` is not used by any step"),
                "remove it, or call it from a step",
            );
        }
    }
}
