//! `coordinatorctl connections [list|pause NAME --reason R|resume NAME --reason R]`:
//! the deployment's connections (`GET /v1/connections`) and an operator's
//! pause of one (`POST /v1/connections/{name}/pause|resume`). A paused
//! connection is sent nothing until it is resumed; both are journaled with
//! the reason. Pausing needs `operate` for every workflow using the connection.

use coordinator_core::machine::time::Instant;
use serde_json::{Value, json};

use crate::Exit;
use crate::client::{Body, Client, ServiceArgs};
use crate::operate;

/// Pause or resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// Stop sending.
    Pause,
    /// Send again.
    Resume,
}

impl Steer {
    /// The path segment and verb: `pause` or `resume`.
    pub fn verb(self) -> &'static str {
        match self {
            Steer::Pause => "pause",
            Steer::Resume => "resume",
        }
    }

    /// What the answer's `changed` means, in words.
    pub fn note(self, changed: bool) -> &'static str {
        match (self, changed) {
            (Steer::Pause, true) => "paused",
            (Steer::Pause, false) => "was paused already (the earlier pause stays)",
            (Steer::Resume, true) => "resumed",
            (Steer::Resume, false) => "was not paused",
        }
    }
}

/// Runs `connections list`.
pub fn list(args: &ServiceArgs) -> Exit {
    let result = Client::connect(args).and_then(|client| client.get(&["v1", "connections"], &[]));
    operate::report(args, "connections", result, human_list)
}

/// Runs `connections pause|resume NAME --reason R`.
pub fn steer(args: &ServiceArgs, name: &str, steer: Steer, reason: &str) -> Exit {
    let command = format!("connections {}", steer.verb());
    let body = Body::Json(json!({"reason": reason}));
    let path = ["v1", "connections", name, steer.verb()];
    let result = Client::connect(args).and_then(|client| client.post(&path, &[], body));
    operate::report(args, &command, result, |answer| human_steered(answer, steer))
}

fn human_list(answer: &Value) -> String {
    let connections = answer["connections"].as_array().map(Vec::as_slice).unwrap_or_default();
    if connections.is_empty() {
        return "no connections\n".into();
    }
    connections.iter().map(line).collect()
}

fn human_steered(answer: &Value, steer: Steer) -> String {
    let note = steer.note(answer["changed"] == true);
    format!("{}: {note}\n{}", operate::text(answer, "name"), line(answer))
}

/// One connection on one line: name, dispatch, paused or running, workflows.
fn line(connection: &Value) -> String {
    let name = operate::text(connection, "name");
    let dispatch = operate::text(connection, "dispatch");
    let workflows: Vec<&str> =
        connection["workflows"].as_array().map(|w| w.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let used = if workflows.is_empty() { "no workflow".to_owned() } else { workflows.join(", ") };
    let state = match &connection["paused"] {
        Value::Object(pause) => {
            let at =
                pause.get("at").and_then(Value::as_i64).map_or_else(|| "-".to_owned(), |ms| Instant(ms).to_rfc3339());
            let by = pause.get("by").and_then(Value::as_str).unwrap_or("-");
            let reason = pause.get("reason").and_then(Value::as_str).unwrap_or("");
            format!("paused by {by} at {at}: {reason}")
        }
        _ => "running".to_owned(),
    };
    format!("{name}  {dispatch}  {state}{}  ({used})\n", pace(connection))
}

/// The breaker and a product's hold, when either holds the connection back (else nothing).
fn pace(connection: &Value) -> String {
    let at = |key: &str| connection["breaker"][key].as_i64().map(|ms| Instant(ms).to_rfc3339());
    let mut text = String::new();
    match connection["state"].as_str() {
        Some("open") => {
            let why = connection["breaker"]["why"].as_str().unwrap_or("-");
            let since = at("since").unwrap_or_else(|| "-".into());
            let probe = at("probeAt").map(|p| format!(", next probe at {p}")).unwrap_or_default();
            text.push_str(&format!("; breaker open since {since}: {why}{probe}"));
        }
        Some("half-open") => text.push_str("; breaker half-open: a probe is in flight"),
        _ => {}
    }
    if let Some(until) = connection["holdUntil"].as_i64() {
        text.push_str(&format!("; held until {} (the product's Retry-After)", Instant(until).to_rfc3339()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_listed_one_per_line() {
        let answer = json!({"connections": [
            {"name": "breg", "dispatch": "in-process", "workflows": ["reviewed-notice"], "paused": null},
            {"name": "messaging", "dispatch": "remote", "workflows": [],
             "paused": {"by": "ops", "at": 0, "reason": "asked to stop"}},
        ]});
        assert_eq!(
            human_list(&answer),
            "breg  in-process  running  (reviewed-notice)\n\
             messaging  remote  paused by ops at 1970-01-01T00:00:00Z: asked to stop  (no workflow)\n"
        );
        assert_eq!(human_list(&json!({"connections": []})), "no connections\n");
    }

    #[test]
    fn an_open_breaker_and_a_hold_are_said() {
        let open = json!({"name": "messaging", "dispatch": "in-process", "workflows": ["w"], "paused": null,
            "state": "open", "breaker": {"state": "open", "since": 0, "why": "the product answered HTTP 503",
            "probeAt": 30_000, "failures": 0}, "holdUntil": 1000});
        assert_eq!(
            line(&open),
            "messaging  in-process  running; breaker open since 1970-01-01T00:00:00Z: the product answered HTTP 503, \
             next probe at 1970-01-01T00:00:30Z; held until 1970-01-01T00:00:01Z (the product's Retry-After)  (w)\n"
        );
    }

    #[test]
    fn a_command_says_what_it_changed() {
        let paused = json!({"name": "breg", "dispatch": "in-process", "workflows": [], "changed": false,
            "paused": {"by": "ops", "at": 0, "reason": "r"}});
        assert!(human_steered(&paused, Steer::Pause).starts_with("breg: was paused already"));
        let resumed =
            json!({"name": "breg", "dispatch": "in-process", "workflows": [], "changed": true, "paused": null});
        assert_eq!(human_steered(&resumed, Steer::Resume), "breg: resumed\nbreg  in-process  running  (no workflow)\n");
    }
}
