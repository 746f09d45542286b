//! `coordinatorctl restore-hold [show|place|release]`: the deployment's
//! restore hold (`GET|POST|DELETE /v1/restore-hold`). While it is placed no
//! run dispatches a command; placing and releasing are idempotent. The
//! service requires `operate` for every workflow.

use clap::ValueEnum;
use coordinator_core::machine::time::Instant;
use serde_json::Value;

use crate::Exit;
use crate::client::{Body, Client, ServiceArgs};
use crate::operate;

/// What to do with the hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HoldAction {
    /// Show whether it is placed and how many runs it holds.
    Show,
    /// Place it (after restoring the database, before any run goes on).
    Place,
    /// Release it (once every unknown effect has been looked at).
    Release,
}

/// Runs `restore-hold`, placing or releasing with `reason` when one is given.
pub fn run(args: &ServiceArgs, action: HoldAction, reason: Option<&str>) -> Exit {
    let path = ["v1", "restore-hold"];
    let body = || reason.map_or(Body::Empty, |r| Body::Json(serde_json::json!({"reason": r})));
    let result = Client::connect(args).and_then(|client| match action {
        HoldAction::Show => client.get(&path, &[]),
        HoldAction::Place => client.post(&path, &[], body()),
        HoldAction::Release => client.delete(&path, body()),
    });
    operate::report(args, "restore-hold", result, human)
}

fn human(hold: &Value) -> String {
    let held = hold["heldRuns"].as_u64().unwrap_or(0);
    if hold["placed"] != true {
        return format!("restore hold: not placed ({held} run(s) held)\n");
    }
    let at = match &hold["placedAt"] {
        Value::Number(n) => n.as_i64().map_or_else(|| n.to_string(), |ms| Instant(ms).to_rfc3339()),
        Value::String(s) => s.clone(),
        _ => "-".into(),
    };
    let by = hold["placedBy"].as_str().unwrap_or("-");
    let mut text = format!("restore hold: placed at {at} by {by}; {held} run(s) held\n");
    match hold["reason"].as_str() {
        // The fence placed it: its evidence, then what the operator does next.
        Some(reason) if by == "coordinator" => text.push_str(&format!(
            "  placed by the restore fence: {reason}\n  review the runs in attention, then release the hold \
             (`coordinatorctl restore-hold release`)\n"
        )),
        Some(reason) => text.push_str(&format!("  reason: {reason}\n")),
        None => {}
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hold_is_described() {
        let placed = json!({"placed": true, "placedAt": 0, "placedBy": "ops", "heldRuns": 2});
        assert_eq!(human(&placed), "restore hold: placed at 1970-01-01T00:00:00Z by ops; 2 run(s) held\n");
        let released = json!({"placed": false, "placedAt": null, "placedBy": null, "heldRuns": 0});
        assert_eq!(human(&released), "restore hold: not placed (0 run(s) held)\n");
        let fenced = json!({"placed": true, "placedAt": 0, "placedBy": "coordinator", "reason": "the timeline changed from 1 to 2", "heldRuns": 1});
        let text = human(&fenced);
        assert!(
            text.contains(
                "by coordinator; 1 run(s) held\n  placed by the restore fence: the timeline changed from 1 to 2\n"
            ),
            "{text}"
        );
        let said = json!({"placed": true, "placedAt": 0, "placedBy": "ops", "reason": "restored from the 02:00 backup", "heldRuns": 1});
        assert_eq!(
            human(&said),
            "restore hold: placed at 1970-01-01T00:00:00Z by ops; 1 run(s) held\n  reason: restored from the 02:00 backup\n"
        );
    }
}
