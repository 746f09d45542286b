//! Operator commands over HTTP: cancel follows the rules of SPEC §3 (a call in
//! flight settles first; a wait with `onCancel` follows it), and commands the
//! rules do not allow are refused with their stable code.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{get, on_runtime, post, sample_input, start};

#[test]
fn cancel_ends_a_run_by_the_rules_and_refusals_have_codes() {
    on_runtime(async {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dev = start(data.path().to_path_buf()).await;
        let body = json!({
            "workflow": "reviewed-notice", "revision": dev.revision,
            "input": sample_input(), "idempotencyKey": "cancel-1",
        });
        let (status, admitted) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let run = admitted["runId"].as_str().unwrap_or_default().to_owned();

        // Wait until the review was requested, then cancel (during or just before the wait).
        let started = Instant::now();
        while dev.sims.casework.effects().is_empty() {
            assert!(started.elapsed() < Duration::from_secs(20), "the review was never requested");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, answer) = post(&format!("{}/v1/runs/{run}/cancel", dev.url()), &json!({})).await;
        assert_eq!(status, 202, "{answer}");

        let view = loop {
            let (_, view) = get(&format!("{}/v1/runs/{run}", dev.url())).await;
            if view["state"] != "running" && view["state"] != "cancel-requested" {
                break view;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "not ended after 30 s: {view}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // The review request was accepted: a mutation's effect, so cancelled-after-effect.
        assert_eq!(view["state"], "cancelled-after-effect", "{view}");
        // Either the cancel reached the wait and its onCancel route withdrew the request, or it
        // came while the request was in flight, which settled first and ended the run.
        let withdrawals: u64 = dev
            .sims
            .casework
            .effects()
            .iter()
            .filter(|e| e.operation == "withdraw-review-request/v1")
            .map(|e| e.effects)
            .sum();
        match view["outcome"].as_str() {
            Some("withdrawn-on-cancel") => assert_eq!(withdrawals, 1, "{view}"),
            None => assert_eq!(withdrawals, 0, "{view}"),
            other => panic!("unexpected outcome {other:?}: {view}"),
        }
        assert!(dev.sims.messaging.effects().is_empty(), "no notice after a cancel");

        // A second cancel changes nothing; retry-same and reconcile are refused with their codes.
        let (status, again) = post(&format!("{}/v1/runs/{run}/cancel", dev.url()), &json!({})).await;
        assert_eq!((status, again["state"].as_str()), (200, Some("cancelled-after-effect")), "{again}");
        let (status, error) =
            post(&format!("{}/v1/runs/{run}/steps/send-notice/retry-same", dev.url()), &json!({})).await;
        assert_eq!((status, error["code"].as_str()), (409, Some("run.ended")), "{error}");
        let (status, error) =
            post(&format!("{}/v1/runs/{run}/steps/request-review/reconcile", dev.url()), &json!({})).await;
        assert_eq!((status, error["code"].as_str()), (409, Some("step.effect-not-unknown")), "{error}");
        let (status, error) = post(&format!("{}/v1/runs/nope/cancel", dev.url()), &json!({})).await;
        assert_eq!((status, error["code"].as_str()), (404, Some("run.unknown")), "{error}");
    });
}
