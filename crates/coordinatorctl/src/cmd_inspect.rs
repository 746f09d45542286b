//! `coordinatorctl inspect RUN`: the operator's view of a run
//! (`GET /v1/runs/{id}/inspection`) — each step entered with its type, a
//! call's effect and attempts, a wait's timing and observations, why the run
//! needs an operator, and the recovery actions the rules accept now, each
//! with the command that applies it. The API shows no input, command, product
//! response or output, and neither does this.

use serde_json::Value;

use crate::Exit;
use crate::client::{Client, ServiceArgs};
use crate::cmd_runs::failure;
use crate::operate::{self, text};

/// Runs `inspect RUN`.
pub fn run(args: &ServiceArgs, run: &str) -> Exit {
    let result = Client::connect(args).and_then(|client| client.get(&["v1", "runs", run, "inspection"], &[]));
    operate::report(args, "inspect", result, human)
}

/// The inspection for people.
fn human(inspection: &Value) -> String {
    let run = text(inspection, "runId");
    let mut out = format!("run {run}\n");
    let mut line = |label: &str, value: String| out.push_str(&format!("  {label:<17} {value}\n"));
    line("workflow", format!("{} {}", text(inspection, "workflow"), text(inspection, "revision")));
    line("state", text(inspection, "state").to_owned());
    if inspection["attention"].is_object() {
        let attention = &inspection["attention"];
        let at = attention["step"].as_str().map(|s| format!(" at step {s}")).unwrap_or_default();
        line("attention", format!("{}{at}", text(attention, "reason")));
    }
    if let Some(message) = inspection["waiting"]["message"].as_str() {
        let resume =
            format!("coordinatorctl connections resume {} --reason …", text(&inspection["waiting"], "connection"));
        line("waiting", format!("{}\n    {resume}", message.trim_start_matches("waiting: ")));
    }
    line("current step", text(inspection, "currentStep").to_owned());
    line("admitted", text(inspection, "admittedAt").to_owned());
    line("deadline", text(inspection, "deadlineAt").to_owned());
    if inspection["hold"] == true {
        line("restore hold", "placed".into());
    }
    if inspection["cancelRequested"] == true {
        line("cancel requested", "yes".into());
    }
    if let Some(outcome) = inspection["outcome"].as_str() {
        line("outcome", outcome.to_owned());
    }
    if inspection["failure"].is_object() {
        line("failure", failure(&inspection["failure"]));
    }
    let available = names(&inspection["availableActions"]);
    line("actions", if available.is_empty() { "none".into() } else { available.join(", ") });
    for action in &available {
        out.push_str(&format!("    {}\n", suggestion(run, action, None)));
    }
    out.push_str("\nsteps\n");
    for step in inspection["steps"].as_array().into_iter().flatten() {
        out.push_str(&human_step(run, step));
    }
    out
}

/// One step: `N. id  type  [current]`, then its call or wait, then its recovery actions.
fn human_step(run: &str, step: &Value) -> String {
    let position = step["position"].as_u64().map_or_else(|| "?".to_owned(), |p| p.to_string());
    let name = text(step, "step");
    let current = if step["current"] == true { "  ◀ current" } else { "" };
    let mut out = format!("  {position:>2}. {name}  {}{current}\n", text(step, "type"));
    if step["call"].is_object() {
        out.push_str(&human_call(&step["call"]));
    }
    if step["wait"].is_object() {
        out.push_str(&human_wait(&step["wait"]));
    }
    let recovery = names(&step["recoveryActions"]);
    if !recovery.is_empty() {
        out.push_str(&format!("      recovery: {}\n", recovery.join(", ")));
        for action in &recovery {
            out.push_str(&format!("        {}\n", suggestion(run, action, Some(name))));
        }
    }
    out
}

fn human_call(call: &Value) -> String {
    let mut out = format!(
        "      {} ({}) via {}\n",
        text(call, "operation"),
        text(call, "operationEffect"),
        text(call, "connection")
    );
    let attempts = call["attempts"].as_u64().unwrap_or(0);
    let mut facts = vec![format!("effect {}", text(call, "effect")), plural(attempts, "attempt")];
    if let Some(pending) = call["pending"].as_str() {
        facts.push(match pending {
            "attempt" => "an attempt is queued or in flight".to_owned(),
            "receipt" => "a receipt lookup is under way".to_owned(),
            other => format!("waiting for {other}"),
        });
    }
    if let Some(at) = call["nextAttemptAt"].as_str() {
        facts.push(format!("next attempt at {at}"));
    }
    if let Some(refusal) = call["refusal"].as_str() {
        facts.push(format!("refused: {refusal}"));
    }
    facts.push(if call["receipt"] == true { "has a receipt".into() } else { "no receipt".into() });
    if let Some(last) = call["lastReceipt"].as_str() {
        facts.push(format!("last receipt lookup: {last}"));
    }
    out.push_str(&format!("      {}\n", facts.join(" · ")));
    out
}

fn human_wait(wait: &Value) -> String {
    let mut timing = Vec::new();
    for (key, label) in [("startedAt", "started"), ("until", "until"), ("timeoutAt", "times out")] {
        if let Some(at) = wait[key].as_str() {
            timing.push(format!("{label} {at}"));
        }
    }
    if let Some(seconds) = wait["intervalSeconds"].as_u64() {
        timing.push(format!("observed every {seconds} s"));
    }
    let mut out = String::new();
    if !timing.is_empty() {
        out.push_str(&format!("      {}\n", timing.join(" · ")));
    }
    let mut observed = Vec::new();
    if let Some(count) = wait["observations"].as_u64() {
        observed.push(plural(count, "observation"));
    }
    if let Some(at) = wait["lastObservationAt"].as_str() {
        observed.push(format!("last at {at}"));
    }
    if wait["observing"] == true {
        observed.push("one under way".into());
    }
    if let Some(at) = wait["nextObservationAt"].as_str() {
        observed.push(format!("next at {at}"));
    }
    if let Some(resolution) = wait["resolution"].as_str() {
        observed.push(format!("ended: {resolution}"));
    }
    if !observed.is_empty() {
        out.push_str(&format!("      {}\n", observed.join(" · ")));
    }
    out
}

/// The strings of a JSON array.
fn names(value: &Value) -> Vec<&str> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// The command that applies a recovery action.
fn suggestion(run: &str, action: &str, step: Option<&str>) -> String {
    match (action, step) {
        ("cancel", _) | (_, None) => format!("coordinatorctl {action} {run}"),
        (_, Some(step)) => format!("coordinatorctl {action} {run} {step}"),
    }
}

/// `1 attempt`, `2 attempts`.
fn plural(count: u64, noun: &str) -> String {
    if count == 1 { format!("1 {noun}") } else { format!("{count} {noun}s") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unknown_effect_shows_its_recovery_commands() {
        let inspection = json!({
            "runId": "r1", "workflow": "reviewed-notice", "revision": "sha256:ab", "state": "attention",
            "admittedAt": "2026-01-01T00:00:00Z", "deadlineAt": "2026-01-08T00:00:00Z", "currentStep": "send-notice",
            "attention": {"reason": "unknown-effect", "step": "send-notice"}, "hold": false,
            "cancelRequested": false, "outcome": null, "failure": null, "availableActions": ["cancel"],
            "steps": [
                {"step": "await-review", "type": "wait-for", "position": 1, "current": false, "recoveryActions": [],
                 "wait": {"kind": "wait-for", "startedAt": "2026-01-01T00:00:01Z", "until": null,
                          "timeoutAt": "2026-01-03T00:00:01Z", "intervalSeconds": 1, "nextObservationAt": null,
                          "lastObservationAt": "2026-01-01T00:00:03Z", "observing": false, "observations": 2,
                          "resolution": "completed"}},
                {"step": "send-notice", "type": "call", "position": 2, "current": true,
                 "recoveryActions": ["reconcile", "retry-same", "cancel"],
                 "call": {"operation": "messaging.submit-message/v1", "connection": "messaging",
                          "operationEffect": "mutation", "effect": "unknown", "attempts": 1, "pending": null,
                          "nextAttemptAt": null, "refusal": null, "receipt": true, "lastReceipt": null}}
            ],
            "waiting": {"connection": "messaging", "step": "send-notice", "pausedBy": "ops",
                        "pausedAt": "2026-01-01T00:00:05Z", "reason": "asked to stop",
                        "message": "waiting: connection messaging paused by ops at 2026-01-01T00:00:05Z: asked to stop"}
        });
        let text = human(&inspection);
        for needle in [
            "attention         unknown-effect at step send-notice",
            "waiting           connection messaging paused by ops at 2026-01-01T00:00:05Z: asked to stop\n",
            "coordinatorctl connections resume messaging --reason",
            "actions           cancel\n    coordinatorctl cancel r1\n",
            "   1. await-review  wait-for\n",
            "started 2026-01-01T00:00:01Z · times out 2026-01-03T00:00:01Z · observed every 1 s",
            "2 observations · last at 2026-01-01T00:00:03Z · ended: completed",
            "   2. send-notice  call  ◀ current\n",
            "messaging.submit-message/v1 (mutation) via messaging",
            "effect unknown · 1 attempt · has a receipt",
            "recovery: reconcile, retry-same, cancel",
            "coordinatorctl reconcile r1 send-notice",
            "coordinatorctl retry-same r1 send-notice",
        ] {
            assert!(text.contains(needle), "lacks {needle:?}:\n{text}");
        }
    }
}
