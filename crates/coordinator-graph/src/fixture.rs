//! The unit tests' fixture: a small project checked in memory. Its files
//! (`fixture/workflow.yaml`, `fixture/functions.rhai`) are also the fixture
//! of `coordinatorctl explain`'s tests.
//!
//! Every route kind: a read, a mutation with one of its two declared
//! refusals routed, a wait-for with timeout and cancel routes, a choose (one
//! case needing escapes), a mutation with a receipt and a retry policy.

use coordinator_core::check::{MemoryProject, check_project};
use coordinator_core::definition::Definition;

/// Checks an in-memory project; panics with the diagnostics if it is refused.
pub(crate) fn checked(workflow: &'static str, functions: &'static str) -> Definition {
    let files = MemoryProject::of([("workflow.yaml", workflow), ("functions.rhai", functions)]);
    let report = check_project(&files).expect("in-memory files are always readable");
    let diagnostics = format!("{:#?}", report.diagnostics);
    report.checked.unwrap_or_else(|| panic!("the fixture must check clean: {diagnostics}")).definition
}

/// The tiny-review project's definition.
pub(crate) fn fixture() -> Definition {
    checked(include_str!("fixture/workflow.yaml"), include_str!("fixture/functions.rhai"))
}
