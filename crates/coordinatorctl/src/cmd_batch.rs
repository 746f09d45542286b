//! `coordinatorctl batch start|status|runs|cancel|list`: durable batches of an
//! operator command (`POST /v1/batches`, `GET /v1/batches[/{id}[/runs]]`,
//! `POST /v1/batches/{id}/cancel`). A batch is worked by the service, not by
//! this command: it survives the operator's laptop. `start --dry-run` shows
//! what the command would do to each run and writes nothing.

use serde_json::{Map, Value, json};

use crate::Exit;
use crate::client::{Body, Client, ServiceArgs};
use crate::operate;

/// What `batch start` sends.
pub struct StartArgs {
    /// `reconcile`, `retry-same` or `cancel`.
    pub action: String,
    /// Filter fields (`workflow`, `state`, `reason`, `step`, `revision`, `from`, `to`, `idempotencyKey`).
    pub filter: Vec<(&'static str, Option<String>)>,
    /// Search keys (`key.NAME`).
    pub keys: Vec<(String, String)>,
    /// Why (journaled with each command).
    pub reason: String,
    /// Only say what it would do.
    pub dry_run: bool,
}

/// Runs `batch start`.
pub fn start(args: &ServiceArgs, start: &StartArgs) -> Exit {
    let mut filter = Map::new();
    for (name, value) in &start.filter {
        if let Some(value) = value {
            filter.insert((*name).to_owned(), json!(value));
        }
    }
    for (name, value) in &start.keys {
        filter.insert(format!("key.{name}"), json!(value));
    }
    let body = json!({"action": start.action, "filter": filter, "reason": start.reason, "dryRun": start.dry_run});
    let result = Client::connect(args).and_then(|client| client.post(&["v1", "batches"], &[], Body::Json(body)));
    operate::report(args, "batch start", result, human_started)
}

/// Runs `batch status ID`.
pub fn status(args: &ServiceArgs, id: &str) -> Exit {
    let result = Client::connect(args).and_then(|client| client.get(&["v1", "batches", id], &[]));
    operate::report(args, "batch status", result, human_batch)
}

/// Runs `batch runs ID`: a page of the batch's runs and what it did to each.
pub fn runs(args: &ServiceArgs, id: &str, outcome: Option<&str>, after: Option<&str>, limit: u32) -> Exit {
    let limit = limit.to_string();
    let mut query = vec![("limit", limit.as_str())];
    query.extend(outcome.map(|o| ("outcome", o)));
    query.extend(after.map(|a| ("after", a)));
    let result = Client::connect(args).and_then(|client| client.get(&["v1", "batches", id, "runs"], &query));
    operate::report(args, "batch runs", result, human_runs)
}

fn human_runs(answer: &Value) -> String {
    let runs = answer["runs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut text: String = runs
        .iter()
        .map(|r| {
            let outcome = match (r["outcome"].as_str(), r["code"].as_str()) {
                (Some("refused"), Some(code)) => format!("refused ({code})"),
                (Some(outcome), _) => outcome.to_owned(),
                (None, _) => "-".to_owned(),
            };
            format!("{}  {outcome}\n", operate::text(r, "runId"))
        })
        .collect();
    if runs.is_empty() {
        text.push_str("no runs\n");
    }
    if let Some(next) = answer["next"].as_str() {
        text.push_str(&format!("more: --after {next}\n"));
    }
    text
}

/// Runs `batch cancel ID`.
pub fn cancel(args: &ServiceArgs, id: &str) -> Exit {
    let result =
        Client::connect(args).and_then(|client| client.post(&["v1", "batches", id, "cancel"], &[], Body::Empty));
    operate::report(args, "batch cancel", result, |answer| {
        let note = if answer["changed"] == true { "cancelled" } else { "had ended already" };
        format!("{}: {note}\n{}", operate::text(answer, "batchId"), human_batch(answer))
    })
}

/// Runs `batch list`.
pub fn list(args: &ServiceArgs) -> Exit {
    let result = Client::connect(args).and_then(|client| client.get(&["v1", "batches"], &[]));
    operate::report(args, "batch list", result, |answer| {
        let batches = answer["batches"].as_array().map(Vec::as_slice).unwrap_or_default();
        if batches.is_empty() {
            return "no batches\n".into();
        }
        batches.iter().map(line).collect()
    })
}

fn human_started(answer: &Value) -> String {
    if answer["dryRun"] == true {
        let refused = counts(&answer["wouldRefuse"]);
        let mut text = format!(
            "dry run of {}: {} run(s) match; of the {} previewed, {} would be acted on{}\n",
            operate::text(answer, "action"),
            answer["matched"],
            answer["previewed"],
            answer["wouldApply"],
            if refused.is_empty() { String::new() } else { format!(", refused: {refused}") },
        );
        for run in answer["runs"].as_array().into_iter().flatten() {
            let outcome = match run["code"].as_str() {
                Some(code) => format!("refused ({code})"),
                None => "acted on".to_owned(),
            };
            text.push_str(&format!("  {}  {outcome}\n", operate::text(run, "runId")));
        }
        text.push_str("nothing was written; start it without --dry-run\n");
        return text;
    }
    format!(
        "batch {} started over {} run(s); follow it with `coordinatorctl batch status {}`\n",
        operate::text(answer, "batchId"),
        answer["matched"],
        operate::text(answer, "batchId")
    )
}

/// `code: n, …` of a map of counts.
fn counts(value: &Value) -> String {
    let counted: Vec<String> =
        value.as_object().into_iter().flatten().map(|(code, n)| format!("{code}: {n}")).collect();
    counted.join(", ")
}

fn human_batch(b: &Value) -> String {
    let refused = counts(&b["refused"]);
    format!(
        "{}\n  reason: {}\n  by {} at {}{}\n",
        line(b),
        operate::text(b, "reason"),
        operate::text(b, "createdBy"),
        operate::text(b, "createdAt"),
        if refused.is_empty() { String::new() } else { format!("\n  refused: {refused}") },
    )
}

/// One batch on one line: id, action, state and progress.
fn line(b: &Value) -> String {
    format!(
        "{}  {}  {}  matched {}, done {}, refused {}, remaining {}\n",
        operate::text(b, "batchId"),
        operate::text(b, "action"),
        operate::text(b, "state"),
        b["matched"],
        b["done"],
        b["refused"].as_object().map_or(0, |r| r.values().filter_map(Value::as_u64).sum::<u64>()),
        b["remaining"],
    )
    .trim_end()
    .to_owned()
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_one_line_of_progress_and_a_dry_run_says_nothing_was_written() {
        let batch = json!({"batchId": "b1", "action": "reconcile", "state": "running", "matched": 843, "done": 400,
            "refused": {"step.effect-not-unknown": 3}, "remaining": 440, "reason": "incident", "createdBy": "ops",
            "createdAt": "2026-12-07T10:00:00Z"});
        assert_eq!(line(&batch), "b1  reconcile  running  matched 843, done 400, refused 3, remaining 440\n");
        assert!(human_batch(&batch).contains("refused: step.effect-not-unknown: 3"));
        let dry = json!({"dryRun": true, "action": "cancel", "matched": 2, "previewed": 2, "wouldApply": 1,
            "wouldRefuse": {"nothing-to-do": 1}, "runs": [{"runId": "r1", "outcome": "apply"},
            {"runId": "r2", "outcome": "refused", "code": "nothing-to-do"}]});
        let text = human_started(&dry);
        assert!(
            text.contains("2 run(s) match; of the 2 previewed, 1 would be acted on, refused: nothing-to-do: 1"),
            "{text}"
        );
        assert!(text.contains("r2  refused (nothing-to-do)") && text.contains("nothing was written"), "{text}");
    }

    #[test]
    fn a_batch_s_runs_say_what_it_did_and_where_the_next_page_starts() {
        let page = json!({"runs": [{"runId": "r1", "outcome": "done", "code": null},
            {"runId": "r2", "outcome": "refused", "code": "run.no-unknown-effect"}], "next": "r2"});
        assert_eq!(human_runs(&page), "r1  done\nr2  refused (run.no-unknown-effect)\nmore: --after r2\n");
        assert_eq!(human_runs(&json!({"runs": [], "next": null})), "no runs\n");
    }
}
