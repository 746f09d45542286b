//! `coordinatorctl schedules [list|pause WORKFLOW ID --reason R|resume WORKFLOW ID --reason R]`:
//! the schedules of the active revisions (`GET /v1/schedules`) and an
//! operator's pause of one (`POST /v1/schedules/{workflow}/{id}/pause|resume`).
//! A paused schedule fires nothing until it is resumed, and then fires from
//! its next instant; both are journaled with the reason.

use coordinator_core::machine::time::Instant;
use serde_json::{Value, json};

use crate::Exit;
use crate::client::{Body, Client, ServiceArgs};
use crate::cmd_connections::Steer;
use crate::operate;

/// Runs `schedules list`.
pub fn list(args: &ServiceArgs) -> Exit {
    let result = Client::connect(args).and_then(|client| client.get(&["v1", "schedules"], &[]));
    operate::report(args, "schedules", result, human_list)
}

/// Runs `schedules pause|resume WORKFLOW ID --reason R`.
pub fn steer(args: &ServiceArgs, workflow: &str, id: &str, steer: Steer, reason: &str) -> Exit {
    let command = format!("schedules {}", steer.verb());
    let body = Body::Json(json!({"reason": reason}));
    let path = ["v1", "schedules", workflow, id, steer.verb()];
    let result = Client::connect(args).and_then(|client| client.post(&path, &[], body));
    operate::report(args, &command, result, |answer| human_steered(answer, steer))
}

fn human_list(answer: &Value) -> String {
    let schedules = answer["schedules"].as_array().map(Vec::as_slice).unwrap_or_default();
    if schedules.is_empty() {
        return "no schedules\n".into();
    }
    schedules.iter().map(block).collect()
}

fn human_steered(answer: &Value, steer: Steer) -> String {
    let note = steer.note(answer["changed"] == true);
    format!("{}/{}: {note}\n{}", operate::text(answer, "workflow"), operate::text(answer, "id"), block(answer))
}

fn at(ms: Option<i64>) -> String {
    ms.map_or_else(|| "-".to_owned(), |ms| Instant(ms).to_rfc3339())
}

/// One schedule: its name and calendar, then its next and last firing, a
/// held instant and a pause, each on its own line.
fn block(schedule: &Value) -> String {
    let calendar = match (schedule["cron"].as_str(), schedule["intervalSeconds"].as_u64()) {
        (Some(cron), _) => format!("cron \"{cron}\" in {}", operate::text(schedule, "timeZone")),
        (None, Some(every)) => format!("every {every} s from {}", operate::text(schedule, "anchor")),
        (None, None) => "-".to_owned(),
    };
    let mut text = format!(
        "{}/{}  {calendar}  overlap {}\n",
        operate::text(schedule, "workflow"),
        operate::text(schedule, "id"),
        operate::text(schedule, "overlap")
    );
    let next = match (schedule["next"].as_str(), schedule["nextLocal"].as_str()) {
        (Some(utc), Some(local)) => format!("{local} = {utc}"),
        (Some(utc), None) => utc.to_owned(),
        _ => "none (the calendar has no more instants)".to_owned(),
    };
    text.push_str(&format!("  next   {next}\n"));
    if let Some(last) = schedule["last"].as_object() {
        let run = last.get("runId").and_then(Value::as_str).unwrap_or("-");
        text.push_str(&format!("  last   {} -> run {run}\n", at(last.get("at").and_then(Value::as_i64))));
    }
    if let Some(pending) = schedule["pendingAt"].as_i64() {
        text.push_str(&format!("  held   {} (fires when the previous run ends)\n", at(Some(pending))));
    }
    if let Some(pause) = schedule["paused"].as_object() {
        let by = pause.get("by").and_then(Value::as_str).unwrap_or("-");
        let reason = pause.get("reason").and_then(Value::as_str).unwrap_or("");
        text.push_str(&format!("  paused by {by} at {}: {reason}\n", at(pause.get("at").and_then(Value::as_i64))));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nightly() -> Value {
        json!({"workflow": "nightly-reading", "id": "nightly", "cron": "30 2 * * *", "timeZone": "Europe/Berlin",
            "intervalSeconds": null, "anchor": null, "overlap": "skip", "catchUpSeconds": 7200,
            "nextAt": 1_774_747_800_000_i64, "next": "2026-03-29T01:30:00Z",
            "nextLocal": "2026-03-29 03:30:00 CEST (+02:00)", "pendingAt": null,
            "last": {"at": 0, "instant": "1970-01-01T00:00:00Z", "runId": "r-1"}, "paused": null})
    }

    #[test]
    fn schedules_are_listed_with_their_next_and_last_firing() {
        assert_eq!(
            human_list(&json!({"schedules": [nightly()]})),
            "nightly-reading/nightly  cron \"30 2 * * *\" in Europe/Berlin  overlap skip\n  \
             next   2026-03-29 03:30:00 CEST (+02:00) = 2026-03-29T01:30:00Z\n  \
             last   1970-01-01T00:00:00Z -> run r-1\n"
        );
        assert_eq!(human_list(&json!({"schedules": []})), "no schedules\n");
    }

    #[test]
    fn a_pause_and_a_held_instant_are_said() {
        let mut paused = nightly();
        paused["paused"] = json!({"by": "ops", "at": 0, "reason": "register maintenance"});
        paused["pendingAt"] = json!(30_000);
        paused["changed"] = json!(true);
        let text = human_steered(&paused, Steer::Pause);
        assert!(text.starts_with("nightly-reading/nightly: paused\n"), "{text}");
        assert!(text.contains("  held   1970-01-01T00:00:30Z (fires when the previous run ends)\n"), "{text}");
        assert!(text.ends_with("  paused by ops at 1970-01-01T00:00:00Z: register maintenance\n"), "{text}");
        paused["changed"] = json!(false);
        assert!(human_steered(&paused, Steer::Resume).starts_with("nightly-reading/nightly: was not paused"));
    }
}
