//! The revision changes with everything that changes execution, and with nothing else.

use coordinator_core::check::MemoryProject;

use crate::support::{Edit, check, example, summary};

fn revision(source: &MemoryProject) -> String {
    let report = check(source);
    match report.revision() {
        Some(r) => r.to_owned(),
        None => panic!("project refused:\n{}", summary(&report)),
    }
}

fn base() -> MemoryProject {
    example("reviewed-notice")
}

#[test]
fn presentation_does_not_change_the_revision() {
    let original = revision(&base());
    let cases = [
        ("title", base().edit("workflow.yaml", "title: Reviewed notice", "title: Something else entirely")),
        ("description", base().edit("workflow.yaml", "description: >-", "description: >-\n    A new first line.")),
        ("project.version", base().edit("workflow.yaml", "version: \"1\"", "version: \"2\"")),
        (
            "a comment",
            base().edit(
                "workflow.yaml",
                "apiVersion: coordinator/v1",
                "# a new comment\napiVersion: coordinator/v1 # and another",
            ),
        ),
        (
            "key order",
            base().edit(
                "workflow.yaml",
                "apiVersion: coordinator/v1\nkind: Workflow",
                "kind: Workflow\napiVersion: coordinator/v1",
            ),
        ),
        (
            "flow vs block style",
            base().edit("workflow.yaml", "deadlineSeconds: 2592000", "\"deadlineSeconds\":    2592000"),
        ),
        ("blank lines", base().edit("workflow.yaml", "start: read-application", "\n\n\nstart:   read-application\n")),
        ("input.json", base().edit("input.json", "{", "{ ")),
    ];
    for (what, project) in cases {
        assert_eq!(revision(&project), original, "changing {what} changed the revision");
    }
}

#[test]
fn execution_relevant_changes_change_the_revision() {
    let original = revision(&base());
    let cases = [
        ("the deadline", base().edit("workflow.yaml", "deadlineSeconds: 2592000", "deadlineSeconds: 2592001")),
        (
            "a route",
            base().edit(
                "workflow.yaml",
                "maxIntervalSeconds: 120}\n    next: request-review",
                "maxIntervalSeconds: 121}\n    next: request-review",
            ),
        ),
        ("a connection", base().edit("workflow.yaml", "connection: registry}", "connection: registry-2}")),
        ("the input schema", base().edit("workflow.yaml", "maxLength: 128", "maxLength: 127")),
        ("the function source", base().edit("functions.rhai", "fn ", "// a comment is an edit too\nfn ")),
        ("line endings are normalised, but text is not", base().edit("functions.rhai", "fn ", "fn  ")),
    ];
    for (what, project) in cases {
        assert_ne!(revision(&project), original, "changing {what} did not change the revision");
    }
}

#[test]
fn line_endings_of_the_functions_file_do_not_matter() {
    let original = revision(&base());
    let text = base().0.get("functions.rhai").cloned().unwrap_or_default();
    let crlf = base().with("functions.rhai", &text.replace('\n', "\r\n"));
    assert_eq!(revision(&crlf), original);
}

const SMALL: &str = r#"apiVersion: coordinator/v1
kind: Workflow
workflow: {id: small}
functions: functions.rhai
deadlineSeconds: 60
input: {type: object}
operations:
  read: {operation: breg.read-record/v1, connection: registry}
start: read
steps:
  read: {type: call, operation: read, input: {function: f, arguments: [{type: input}]}, next: done}
  done: {type: finish, outcome: done}
outcomes:
  done: {type: "null"}
"#;

/// [`SMALL`] reading a permit through the project's own catalog.
fn with_project_catalog() -> MemoryProject {
    let catalog = "apiVersion: coordinator/v1\nkind: Catalog\nproduct: permits\noperations:\n  read-permit/v1: {effect: read, recovery: read-again, receipt: false, input: {type: object}, output: {type: object}}\n";
    MemoryProject::default()
        .with("workflow.yaml", &SMALL.replace("breg.read-record/v1", "permits.read-permit/v1"))
        .with("functions.rhai", "fn f(x) { x }")
        .with("catalog/permits.yaml", catalog)
}

#[test]
fn a_project_catalog_descriptor_is_pinned_in_the_revision() {
    let project = with_project_catalog();
    let original = revision(&project);
    let changed =
        project.edit("catalog/permits.yaml", "output: {type: object}", "output: {type: object, required: [id]}");
    assert_ne!(revision(&changed), original);
}

const PINNED: &str = "sha256:735e56c9c4588c29003e000ca080cf807a0d75ed7ab172783da88746df8d6246";

#[test]
fn the_revision_of_a_fixed_project_is_pinned() {
    // Pins canonical JSON and hashing: if this changes, every deployed revision changes.
    // A project catalog, so that edits of the built-in catalog do not move the pin.
    let project = with_project_catalog();
    let report = check(&project);
    let definition = report.checked.as_ref().map(|c| c.definition.clone());
    let json = definition.and_then(|d| d.canonical_json().ok()).map(|b| String::from_utf8_lossy(&b).into_owned());
    let json = json.unwrap_or_default();
    assert!(json.starts_with(r#"{"deadlineSeconds":60,"functions":"fn f(x) { x }","input":{"type":"object"},"operations":{"read":{"connection":"registry","descriptor":{"#), "{json}");
    assert_eq!(revision(&project), coordinator_core::definition::sha256_id(json.as_bytes()));
    assert_eq!(revision(&project), PINNED);
}

#[test]
fn search_keys_are_part_of_the_revision_and_their_descriptions_are_not() {
    let base = MemoryProject::default()
        .with("workflow.yaml", SMALL)
        .with("functions.rhai", "fn f(x) { x }\nfn k(input) { () }");
    let keyed =
        base.clone().edit("workflow.yaml", "\nstart:", "\nsearchKeys:\n  case: {function: k, notSecret: true}\nstart:");
    let described = keyed.clone().edit("workflow.yaml", "notSecret: true}", "notSecret: true, description: The case.}");
    let renamed = keyed.clone().edit("workflow.yaml", "  case:", "  file:");
    assert_ne!(revision(&keyed), revision(&base));
    assert_eq!(revision(&described), revision(&keyed));
    assert_ne!(revision(&renamed), revision(&keyed));
}
