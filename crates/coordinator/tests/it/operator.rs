//! Operator commands over HTTP: cancel follows the rules of
//! docs/reference/runs.md#cancellation (a call in flight settles first; a wait
//! with `onCancel` follows it), and commands the rules do not allow are refused
//! with their stable code.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{admit, on_runtime, post, settled, start};

#[test]
fn cancel_ends_a_run_by_the_rules_and_refusals_have_codes() {
    on_runtime(async {
        let dev = start().await;
        let run = admit(&dev.url(), &dev.revision, "cancel-1").await;

        // Wait until the review was requested, then cancel (during or just before the wait).
        let started = Instant::now();
        while dev.sims.casework.effects().is_empty() {
            assert!(started.elapsed() < Duration::from_secs(20), "the review was never requested");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, answer) = post(&format!("{}/v1/runs/{run}/cancel", dev.url()), &json!({})).await;
        assert_eq!(status, 202, "{answer}");

        let view = settled(&dev.url(), &run).await;
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

/// A run id is a UUID: its upper-case spelling names the same run for every
/// command (it once gave `500 internal` on cancel, retry-same and reconcile).
#[test]
fn a_run_id_in_upper_case_names_the_same_run() {
    on_runtime(async {
        let dev = start().await;
        let run = admit(&dev.url(), &dev.revision, "upper-1").await;
        let upper = run.to_uppercase();
        for step in ["retry-same", "reconcile"] {
            let (status, refused) =
                post(&format!("{}/v1/runs/{upper}/steps/read-application/{step}", dev.url()), &json!({})).await;
            assert!(matches!(status, 200 | 202 | 409), "{step}: {status} {refused}");
        }
        let (status, cancelled) = post(&format!("{}/v1/runs/{upper}/cancel", dev.url()), &json!({})).await;
        assert!(matches!(status, 200 | 202), "{status} {cancelled}");
        assert_eq!(cancelled["runId"], json!(run), "the run's own spelling");
        let view = settled(&dev.url(), &run).await;
        assert!(view["state"].as_str().is_some_and(|s| s.starts_with("cancelled")), "{view}");
    });
}
