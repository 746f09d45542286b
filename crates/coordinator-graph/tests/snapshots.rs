//! The SVG of each shipped example, unmarked and with a run on it, pinned
//! byte for byte (`tests/snapshots/`). A change to the drawing shows here
//! as a diff to review; accept it with `cargo insta review` (or
//! `INSTA_UPDATE=always`) and commit the new `.snap` files.

use std::path::PathBuf;

use coordinator_core::check::{ProjectSource, SourceError, check_project};
use coordinator_core::definition::Definition;
use coordinator_graph::{Marks, StepMark, svg, svg_marked};

/// An example project read from `examples/<name>/`.
struct Example(PathBuf);

impl ProjectSource for Example {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        match std::fs::read_to_string(self.0.join(path)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SourceError::Unreadable { path: path.to_owned(), reason: e.to_string() }),
        }
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        let Ok(entries) = std::fs::read_dir(self.0.join("catalog")) else { return Ok(Vec::new()) };
        let mut files: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| format!("catalog/{}", e.file_name().to_string_lossy()))
            .filter(|name| name.ends_with(".yaml"))
            .collect();
        files.sort();
        Ok(files)
    }
}

/// The checked definition of an example; panics with the diagnostics if it is refused.
fn example(name: &str) -> Definition {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    let report = match check_project(&Example(dir)) {
        Ok(report) => report,
        Err(e) => panic!("{name}: {e}"),
    };
    let diagnostics = format!("{:#?}", report.diagnostics);
    match report.checked {
        Some(checked) => checked.definition,
        None => panic!("{name} must check clean: {diagnostics}"),
    }
}

/// Asserts that every step of `marks` is a step of the definition and every
/// route one of its routes, so a renamed step cannot leave a snapshot that
/// quietly marks nothing.
fn assert_marks_fit(definition: &Definition, marks: &Marks) {
    for id in marks.steps.keys() {
        assert!(definition.steps.contains_key(id), "no step {id}");
    }
    for (from, to) in &marks.routes {
        let routed = definition.steps.get(from).is_some_and(|s| s.routes().iter().any(|r| r.target == to));
        assert!(routed, "no route {from} -> {to}");
    }
}

fn assert_marked_snapshot(name: &str, marks: &Marks) {
    let definition = example(name);
    assert_marks_fit(&definition, marks);
    let drawn = svg_marked(&definition, marks);
    assert_eq!(drawn, svg_marked(&definition, marks), "the same marks draw the same bytes");
    insta::assert_snapshot!(format!("{name}-marked"), drawn);
}

#[test]
fn reviewed_notice_svg() {
    insta::assert_snapshot!("reviewed-notice", svg(&example("reviewed-notice")));
}

#[test]
fn appointment_reminder_svg() {
    insta::assert_snapshot!("appointment-reminder", svg(&example("appointment-reminder")));
}

#[test]
fn permit_check_svg() {
    insta::assert_snapshot!("permit-check", svg(&example("permit-check")));
}

/// The flagship waiting for its review.
#[test]
fn reviewed_notice_waiting_for_review() {
    let path = ["read-application", "request-review", "await-review"];
    assert_marked_snapshot("reviewed-notice", &Marks::along(&path, StepMark::Waiting));
}

/// A reminder sent: the run finished.
#[test]
fn appointment_reminder_finished() {
    let path = ["read-availability", "pick-slot", "book-appointment", "wait-for-reminder", "send-reminder", "reminded"];
    assert_marked_snapshot("appointment-reminder", &Marks::along(&path, StepMark::Finished));
}

/// The renewal's effect is unknown: the run needs an operator at the call.
#[test]
fn permit_check_in_attention_at_the_renewal() {
    let path = ["read-permit", "evaluate-renewal", "route-renewal", "renew-permit"];
    assert_marked_snapshot("permit-check", &Marks::along(&path, StepMark::Attention));
}
