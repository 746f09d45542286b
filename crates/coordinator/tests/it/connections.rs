//! An operator pauses a connection (`POST /v1/connections/{name}/pause`):
//! the product receives nothing while it is paused — through a restart of
//! the service — the run's inspection says what it waits on, the pause and
//! the resume are journaled with the operator, and once resumed every run
//! goes on to its finish. The list, and the refusals of a bad request.

use std::time::Duration;

use coordinator::process::serve::Mode;
use serde_json::{Value, json};

use crate::support::deploy::{EAGER, start};
use crate::support::stack::{Stack, StackOptions};
use crate::support::{get, get_as, journal, metric, metrics, on_runtime, post, post_as, run_until};

/// The pause gauge of the registry connection.
const PAUSED_GAUGE: &str = "coordinator_connection_paused{connection=\"registry\"}";

/// A pause's reason.
const REASON: &str = "BReg asked us to stop until their migration ends";

async fn pause(stack: &Stack, name: &str, verb: &str, body: &Value) -> (u16, Value) {
    post(&format!("{}/v1/connections/{name}/{verb}", stack.url), body).await
}

/// Requests BReg (connection `registry`) received so far.
fn breg_requests(stack: &Stack) -> u64 {
    stack.sims.sims.breg.load().requests
}

#[test]
fn a_paused_connection_is_sent_nothing_until_it_is_resumed_even_across_a_restart() {
    on_runtime(async {
        // The review wait observes every second: a decision announced before the run entered its
        // wait (a notification only brings an open wait's observation forward) costs a second.
        let options = StackOptions {
            edits: vec![EAGER],
            auto_decide: Some(Duration::from_millis(50)),
            ..StackOptions::default()
        };
        let mut stack = Stack::start(options).await;

        let (status, listed) = get(&format!("{}/v1/connections", stack.url)).await;
        assert_eq!(status, 200, "{listed}");
        let registry =
            listed["connections"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "registry")).cloned();
        let registry = registry.unwrap_or_else(|| panic!("registry is listed: {listed}"));
        let closed = json!({"state": "closed", "since": null, "why": null, "probeAt": null, "failures": 0});
        let expected = json!({"name": "registry", "dispatch": "in-process", "workflows": ["reviewed-notice"],
            "paused": null, "state": "closed", "breaker": closed, "holdUntil": null, "pace": 1.0});
        assert_eq!(registry, expected);

        let (status, paused) = pause(&stack, "registry", "pause", &json!({"reason": REASON})).await;
        assert_eq!(status, 200, "{paused}");
        assert_eq!((paused["changed"].as_bool(), paused["paused"]["reason"].as_str()), (Some(true), Some(REASON)));
        let by = paused["paused"]["by"].as_str().unwrap_or_default().to_owned();
        let (status, again) = pause(&stack, "registry", "pause", &json!({"reason": "twice"})).await;
        assert_eq!(
            (status, again["changed"].as_bool(), again["paused"]["reason"].as_str()),
            (200, Some(false), Some(REASON))
        );

        // Runs admitted now wait on BReg, and say so.
        let runs = [stack.admit("paused-1").await, stack.admit("paused-2").await];
        for run in &runs {
            let inspection = stack.until(run, "waiting on the registry", |i| i["waiting"].is_object()).await;
            let message = inspection["waiting"]["message"].as_str().unwrap_or_default();
            assert!(message.starts_with(&format!("waiting: connection registry paused by {by} at ")), "{message}");
            assert!(message.ends_with(&format!(": {REASON}")), "{message}");
            assert_eq!(inspection["waiting"]["step"], "read-application");
        }
        assert_eq!(metric(&metrics(&stack.url).await, PAUSED_GAUGE), Some(1.0));
        // Longer than any worker sleeps without a claim round: still nothing sent.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(breg_requests(&stack), 0, "BReg received a request while paused");

        // The pause is in the database: a restarted service sends nothing either.
        stack.service.drain().await;
        stack.service = start(&stack.runtime, Mode::Normal).await;
        let later = stack.admit("after-restart").await;
        stack.until(&later, "waiting on the registry", |i| i["waiting"].is_object()).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(breg_requests(&stack), 0, "BReg received a request after the restart");

        let (status, resumed) = pause(&stack, "registry", "resume", &json!({"reason": "BReg is back"})).await;
        assert_eq!(
            (status, resumed["changed"].as_bool(), resumed["paused"].is_null()),
            (200, Some(true), true),
            "{resumed}"
        );
        for run in runs.iter().chain([&later]) {
            let ended = run_until(&stack.url, run, "finished", |v| v["state"] != "running").await;
            assert_eq!((ended["state"].as_str(), ended["outcome"].as_str()), (Some("finished"), Some("notice-sent")));
            assert!(stack.inspect(run).await["waiting"].is_null());
        }
        assert!(breg_requests(&stack) >= 3, "each run read BReg once resumed");
        assert_eq!(metric(&metrics(&stack.url).await, PAUSED_GAUGE), Some(0.0));
        let (status, again) = pause(&stack, "registry", "resume", &json!({"reason": "twice"})).await;
        assert_eq!((status, again["changed"].as_bool()), (200, Some(false)));

        let entries = journal(&stack.url, None).await;
        let steered: Vec<(&str, Option<&str>)> = entries
            .iter()
            .filter(|e| e["kind"] == "connection")
            .map(|e| (e["detail"].as_str().unwrap_or_default(), e["actor"].as_str()))
            .collect();
        let expected = [
            (format!("connection registry paused: {REASON}"), Some(by.as_str())),
            ("connection registry resumed: BReg is back".to_owned(), Some(by.as_str())),
        ];
        assert_eq!(steered, expected.iter().map(|(d, a)| (d.as_str(), *a)).collect::<Vec<_>>());
    });
}

#[test]
fn pausing_refuses_what_it_cannot_do_and_changes_nothing() {
    on_runtime(async {
        let options = StackOptions { reader: Some(("reader-token", "[read]")), ..StackOptions::default() };
        let stack = Stack::start(options).await;
        let url = |name: &str| format!("{}/v1/connections/{name}/pause", stack.url);

        let (status, answer) = post(&url("no-such-connection"), &json!({"reason": "r"})).await;
        assert_eq!((status, answer["code"].as_str()), (404, Some("connection.unknown")), "{answer}");
        for body in [
            json!({}),
            json!({"reason": ""}),
            json!({"reason": "   "}),
            json!({"reason": "r", "more": 1}),
            json!({"reason": "x".repeat(501)}),
            json!("stop"),
            json!(["stop"]),
        ] {
            let (status, answer) = post(&url("registry"), &body).await;
            assert_eq!((status, answer["code"].as_str()), (400, Some("request.invalid")), "{body}: {answer}");
        }
        let (status, answer) = post_as(&url("registry"), Some("reader-token"), &json!({"reason": "r"})).await;
        assert_eq!((status, answer["code"].as_str()), (403, Some("auth.forbidden")), "{answer}");
        let (status, answer) = get_as(&format!("{}/v1/connections", stack.url), Some("reader-token")).await;
        assert_eq!((status, answer["code"].as_str()), (403, Some("auth.forbidden")), "{answer}");
        let (status, answer) = post_as(&url("registry"), None, &json!({"reason": "r"})).await;
        assert_eq!(status, 401, "{answer}");

        let (_, listed) = get(&format!("{}/v1/connections", stack.url)).await;
        let connections = listed["connections"].as_array().cloned().unwrap_or_default();
        assert!(!connections.is_empty() && connections.iter().all(|c| c["paused"].is_null()), "{listed}");
        let entries = journal(&stack.url, None).await;
        assert!(entries.iter().all(|e| e["kind"] != "connection"), "nothing refused is journaled");
    });
}
