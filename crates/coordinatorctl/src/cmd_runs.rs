//! `coordinatorctl status`, `list`, `cancel`, `retry-same` and `reconcile`:
//! reading runs and putting the operator's commands to a running service.
//! Whether a command applies is the service's state machine's decision; this
//! module only sends it and prints the answer.

use coordinator_core::machine::time::Instant;
use serde_json::{Value, json};

use crate::client::{Body, Client, ServiceArgs};
use crate::operate::{self, text};
use crate::render;
use crate::{Exit, Format};

/// The page size `list --all` asks for when `--limit` is not given.
const ALL_PAGE: u32 = 500;

/// Runs `status RUN`: `GET /v1/runs/{id}`.
pub fn status(args: &ServiceArgs, run: &str) -> Exit {
    let result = Client::connect(args).and_then(|client| client.get(&["v1", "runs", run], &[]));
    operate::report(args, "status", result, human_status)
}

fn human_status(run: &Value) -> String {
    let mut out = format!("run {}\n", text(run, "runId"));
    out.push_str(&format!("  workflow  {} {}\n", text(run, "workflow"), text(run, "revision")));
    out.push_str(&format!("  state     {}\n", text(run, "state")));
    if run["state"] == "attention" {
        out.push_str(&format!(
            "  help      `coordinatorctl inspect {}` shows what needs an operator\n",
            text(run, "runId")
        ));
    }
    if let Some(outcome) = run["outcome"].as_str() {
        out.push_str(&format!("  outcome   {outcome}\n"));
    }
    if run["failure"].is_object() {
        out.push_str(&format!("  failure   {}\n", failure(&run["failure"])));
    }
    if !run["output"].is_null() {
        out.push_str(&format!("  output    {}\n", run["output"]));
    }
    out
}

/// `code at step: message`.
pub fn failure(failure: &Value) -> String {
    let at = failure["step"].as_str().map(|s| format!(" at {s}")).unwrap_or_default();
    format!("{}{at}: {}", text(failure, "code"), text(failure, "message"))
}

/// The filters and paging of `list`.
pub struct ListArgs {
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Only runs in this state.
    pub state: Option<String>,
    /// The page size (1–500).
    pub limit: Option<u32>,
    /// Where to start (the `next` of an earlier page).
    pub cursor: Option<String>,
    /// Follow `next` until the last page.
    pub all: bool,
    /// Search key filters (name, value), each exact.
    pub keys: Vec<(String, String)>,
    /// Only runs admitted with this idempotency key.
    pub idempotency_key: Option<String>,
}

/// Runs `list`: `GET /v1/runs`, following the cursor with `--all`.
pub fn list(args: &ServiceArgs, list: &ListArgs) -> Exit {
    let client = match Client::connect(args) {
        Ok(client) => client,
        Err(error) => return operate::failed(args.format, "list", &error),
    };
    let limit = list.limit.or(list.all.then_some(ALL_PAGE)).map(|l| l.to_string());
    let mut cursor = list.cursor.clone();
    let mut runs: Vec<Value> = Vec::new();
    loop {
        let named: Vec<(String, &str)> = list.keys.iter().map(|(n, v)| (format!("key.{n}"), v.as_str())).collect();
        let mut query: Vec<(&str, &str)> = named.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        if let Some(key) = &list.idempotency_key {
            query.push(("idempotencyKey", key));
        }
        if let Some(workflow) = &list.workflow {
            query.push(("workflow", workflow));
        }
        if let Some(state) = &list.state {
            query.push(("state", state));
        }
        if let Some(limit) = &limit {
            query.push(("limit", limit));
        }
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor));
        }
        let answer = match client.get(&["v1", "runs"], &query) {
            Ok(answer) if operate::exit_of(answer.status) == Exit::Ok => answer,
            other => return operate::report(args, "list", other, |_| String::new()),
        };
        runs.extend(answer.body["runs"].as_array().into_iter().flatten().cloned());
        let next = answer.body["next"].as_str().map(str::to_owned);
        // A cursor that does not move would never end the loop.
        let follow = list.all && next.is_some() && next != cursor;
        cursor = next;
        if !follow {
            break;
        }
    }
    let next = if list.all { None } else { cursor };
    match args.format {
        Format::Json => {
            render::print_json(&operate::wrap("list", true, Some(200), &json!({"runs": runs, "next": next})))
        }
        Format::Human => {
            render::out(&human_list(&runs));
            if let Some(next) = next {
                eprintln!("the page is full: add --cursor {next} for the next one, or --all for every page");
            }
        }
    }
    Exit::Ok
}

fn human_list(runs: &[Value]) -> String {
    if runs.is_empty() {
        return "no runs\n".into();
    }
    let width = |key: &str, header: &str| {
        runs.iter().map(|r| text(r, key).chars().count()).chain([header.len()]).max().unwrap_or(0)
    };
    let (id, workflow, state) = (width("runId", "RUN"), width("workflow", "WORKFLOW"), width("state", "STATE"));
    let mut out = format!("{:id$}  {:workflow$}  {:state$}  ADMITTED\n", "RUN", "WORKFLOW", "STATE");
    for run in runs {
        let admitted = match &run["admittedAt"] {
            Value::Number(n) => n.as_i64().map_or_else(|| n.to_string(), |ms| Instant(ms).to_rfc3339()),
            Value::String(s) => s.clone(),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:id$}  {:workflow$}  {:state$}  {admitted}\n",
            text(run, "runId"),
            text(run, "workflow"),
            text(run, "state")
        ));
    }
    out
}

/// An operator's command on a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator<'a> {
    /// `POST /v1/runs/{id}/cancel`.
    Cancel,
    /// `POST /v1/runs/{id}/steps/{step}/retry-same`.
    RetrySame(&'a str),
    /// `POST /v1/runs/{id}/steps/{step}/reconcile`.
    Reconcile(&'a str),
}

impl Operator<'_> {
    /// The command's name (the last segment of its path).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Cancel => "cancel",
            Operator::RetrySame(_) => "retry-same",
            Operator::Reconcile(_) => "reconcile",
        }
    }
}

/// Runs `cancel RUN`, `retry-same RUN STEP` or `reconcile RUN STEP`: `202`
/// applied, `200` with a `note` when there was nothing to do (both exit 0),
/// `409` with the rule's code (exit 1).
pub fn command(args: &ServiceArgs, run: &str, operator: Operator<'_>) -> Exit {
    let segments: Vec<&str> = match operator {
        Operator::Cancel => vec!["v1", "runs", run, "cancel"],
        Operator::RetrySame(step) | Operator::Reconcile(step) => {
            vec!["v1", "runs", run, "steps", step, operator.as_str()]
        }
    };
    let result = Client::connect(args).and_then(|client| client.post(&segments, &[], Body::Empty));
    operate::report(args, operator.as_str(), result, |answer| human_command(operator, answer))
}

fn human_command(operator: Operator<'_>, answer: &Value) -> String {
    let target = match operator {
        Operator::RetrySame(step) | Operator::Reconcile(step) => format!("run {} step {step}", text(answer, "runId")),
        Operator::Cancel => format!("run {}", text(answer, "runId")),
    };
    match answer["note"].as_str() {
        Some(note) => format!("{}: nothing to do: {note} ({target} is {})\n", operator.as_str(), text(answer, "state")),
        None => format!("{}: accepted for {target}; the run is {}\n", operator.as_str(), text(answer, "state")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_printed_and_an_applied_command_names_the_state() {
        let noted = json!({"runId": "r1", "state": "cancelled", "note": "the run has ended"});
        assert_eq!(
            human_command(Operator::Cancel, &noted),
            "cancel: nothing to do: the run has ended (run r1 is cancelled)\n"
        );
        let applied = json!({"runId": "r1", "state": "running"});
        assert_eq!(
            human_command(Operator::Reconcile("send-notice"), &applied),
            "reconcile: accepted for run r1 step send-notice; the run is running\n"
        );
    }

    #[test]
    fn lists_are_aligned_tables_with_readable_times() {
        let runs = [json!({"runId": "r1", "workflow": "w", "state": "running", "admittedAt": 0})];
        let text = human_list(&runs);
        assert_eq!(text, "RUN  WORKFLOW  STATE    ADMITTED\nr1   w         running  1970-01-01T00:00:00Z\n");
        assert_eq!(human_list(&[]), "no runs\n");
    }

    #[test]
    fn status_shows_the_failure_and_output() {
        let run = json!({"runId": "r", "workflow": "w", "revision": "sha256:1", "state": "failed",
            "outcome": null, "output": null, "failure": {"code": "wait.timed-out", "step": "s", "message": "m"}});
        let text = human_status(&run);
        assert!(text.contains("failure   wait.timed-out at s: m"), "{text}");
        assert!(!text.contains("output"), "{text}");
    }
}
