//! The fixture of `explain`'s tests: the small project coordinator-graph's
//! unit tests draw (its files, `coordinator-graph/src/fixture/`), checked in memory.

use coordinator_core::check::{Checked, MemoryProject, check_project};

/// The tiny-review project, checked; panics with the diagnostics if it is refused.
pub(crate) fn fixture() -> Checked {
    let files = MemoryProject::of([
        ("workflow.yaml", include_str!("../../coordinator-graph/src/fixture/workflow.yaml")),
        ("functions.rhai", include_str!("../../coordinator-graph/src/fixture/functions.rhai")),
    ]);
    let report = check_project(&files).expect("in-memory files are always readable");
    let diagnostics = format!("{:#?}", report.diagnostics);
    report.checked.unwrap_or_else(|| panic!("the fixture must check clean: {diagnostics}"))
}
