//! The unit tests' fixture: a small project checked in memory.

use std::collections::HashMap;

use coordinator_core::check::{ProjectSource, SourceError, check_project};
use coordinator_core::definition::Definition;

struct Files(HashMap<&'static str, &'static str>);

impl ProjectSource for Files {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        Ok(self.0.get(path).map(|text| (*text).to_owned()))
    }
    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        Ok(Vec::new())
    }
}

/// Checks an in-memory project; panics with the diagnostics if it is refused.
pub(crate) fn checked(workflow: &'static str, functions: &'static str) -> Definition {
    let files = Files(HashMap::from([("workflow.yaml", workflow), ("functions.rhai", functions)]));
    let report = check_project(&files).expect("in-memory files are always readable");
    let diagnostics = format!("{:#?}", report.diagnostics);
    report.checked.unwrap_or_else(|| panic!("the fixture must check clean: {diagnostics}")).definition
}

/// Every route kind: a read, a mutation with one of its two declared
/// refusals routed, a wait-for with timeout and cancel routes, a choose
/// (one case needing escapes), a mutation with a receipt and a retry policy.
const WORKFLOW: &str = r#"
apiVersion: coordinator/v1
kind: Workflow
workflow: {id: tiny-review, title: Tiny review}
functions: functions.rhai
deadlineSeconds: 86400
input: {type: object}
operations:
  read: {operation: breg.read-record/v1, connection: registry}
  submit: {operation: casework.submit-review-request/v1, connection: casework}
  notify: {operation: messaging.submit-message/v1, connection: messaging}
start: read-subject
steps:
  read-subject: {type: call, operation: read, input: {function: subject, arguments: [{type: input}]}, next: request}
  request: {type: call, operation: submit, input: {function: request, arguments: [{type: step, step: read-subject}]},
            onDeclaredRefusal: {review-already-open: refused}, next: await}
  await: {type: wait-for, completion: {step: request, name: result}, timeoutSeconds: 3600, onTimeout: timed-out,
          onCancel: cancelled, next: decide}
  decide: {type: choose, choose: {function: decision, arguments: [{type: step, step: await}]},
           cases: {approved: send, "rejected \"<x>\"": rejected}}
  send: {type: call, operation: notify, input: {function: message, arguments: [{type: input}]}, next: approved,
         retry: {maxAttempts: 5, initialIntervalSeconds: 2}}
  approved: {type: finish, outcome: approved}
  rejected: {type: finish, outcome: rejected}
  refused: {type: finish, outcome: refused}
  timed-out: {type: finish, outcome: timed-out}
  cancelled: {type: finish, outcome: cancelled}
outcomes: {approved: {type: "null"}, rejected: {type: "null"}, refused: {type: "null"}, timed-out: {type: "null"},
           cancelled: {type: "null"}}
"#;

const FUNCTIONS: &str = r#"
fn subject(input) { #{ recordType: "application", recordId: input.id } }
fn request(record) { #{ subject: record, reviewType: "approval" } }
fn decision(result) { result.decision }
fn message(input) { #{ to: input.id } }
"#;

/// The tiny-review project's definition.
pub(crate) fn fixture() -> Definition {
    checked(WORKFLOW, FUNCTIONS)
}
