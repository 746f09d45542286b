//! A project from bytes (`workflow.yaml`, then `#%file PATH` sections:
//! `functions.rhai`, `catalog/*.yaml`), read from memory, decoded and
//! checked as `coordinatorctl check` does (`check::check_project`). Every
//! diagnostic points inside the file it names; the project is accepted
//! exactly when no diagnostic is an error; an accepted project's revision is
//! its definition's, and its package reads back with that revision.
#![no_main]

use coordinator_core::check::{self, ProjectSource};
use coordinator_core::{diagnostic::Diagnostic, package};
use coordinator_fuzz::{assert_spans_inside, split_project};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let project = split_project(text);
    let Ok(report) = check::check_project(&project) else { return };
    assert_spans_inside(&report.diagnostics, &|file| project.read(file).ok().flatten());
    assert_eq!(
        report.ok(),
        !report.diagnostics.iter().any(Diagnostic::is_error),
        "accepted with errors, or refused without"
    );
    if let Some(checked) = &report.checked {
        assert_eq!(checked.definition.revision().ok().as_deref(), Some(checked.revision.as_str()));
        let built =
            package::build(checked, "fuzz").unwrap_or_else(|e| panic!("an accepted project does not package: {e}"));
        let read = package::read(&built.bytes, Some(&built.digest))
            .unwrap_or_else(|e| panic!("its package does not read: {e}"));
        assert_eq!(read.manifest.revision, checked.revision);
    }
});
