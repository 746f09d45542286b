//! Review requests: decisions by hand and by the auto-decide timer, the
//! completion `result`, withdrawal and the notification.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::harness::{Harness, json, sent, start, start_default};

fn review(requested: Option<&str>) -> Value {
    let mut command = json!({
        "subject": {"recordType": "application", "recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "revision": 1},
        "reviewType": "notice-approval"
    });
    if let Some(decision) = requested {
        command["requestedDecision"] = json!(decision);
    }
    command
}

async fn submit(h: &Harness, key: &str, requested: Option<&str>) -> String {
    let accepted = h.accepted("casework", "submit-review-request/v1", Some(key), &review(requested)).await;
    let reference = accepted["completions"]["result"].as_str().map(str::to_owned).unwrap_or_default();
    assert_eq!(accepted["output"]["reviewRequestId"], reference.as_str());
    reference
}

async fn decide(h: &Harness, reference: &str, decision: &str) -> reqwest::Response {
    let url = format!("{}/v1/reviews/{reference}/decision", h.url("casework"));
    sent(h.http.post(url).json(&json!({"decision": decision})).send().await)
}

#[tokio::test]
async fn a_decision_completes_the_result_and_blocks_withdrawal() {
    let h = start_default().await;
    let reference = submit(&h, "r", None).await;
    assert_eq!(json(h.completion("casework", "result", &reference).await).await, json!({"state": "pending"}));

    let decided = decide(&h, &reference, "rejected").await;
    assert_eq!(decided.status(), StatusCode::OK);
    let completion = json(h.completion("casework", "result", &reference).await).await;
    assert_eq!(completion["state"], "complete");
    assert_eq!(completion["value"]["decision"], "rejected");
    assert!(completion["value"]["decidedAt"].as_str().is_some_and(|t| t.ends_with('Z')));

    assert_eq!(decide(&h, &reference, "approved").await.status(), StatusCode::CONFLICT);
    let withdraw = json!({"reviewRequestId": reference, "reason": "stopped waiting"});
    h.refused("casework", "withdraw-review-request/v1", Some("w"), &withdraw, 409, "already-decided").await;
    assert_eq!(h.counts("casework", "withdraw-review-request/v1", Some("w")).await, (1, 0));
    let read = h.accepted("casework", "read-review-request/v1", None, &json!({"reviewRequestId": reference})).await;
    assert_eq!(read["output"]["state"], "decided");
    assert_eq!(read["output"]["decision"], "rejected");
}

#[tokio::test]
async fn a_withdrawn_request_stays_pending_as_a_completion_and_cannot_be_decided() {
    let h = start_default().await;
    let reference = submit(&h, "r", None).await;
    let withdraw = json!({"reviewRequestId": reference, "reason": "cancelled"});
    let withdrawn = h.accepted("casework", "withdraw-review-request/v1", Some("w"), &withdraw).await;
    assert_eq!(withdrawn["output"]["state"], "withdrawn");
    assert_eq!(decide(&h, &reference, "approved").await.status(), StatusCode::CONFLICT);
    assert_eq!(json(h.completion("casework", "result", &reference).await).await, json!({"state": "pending"}));
    assert_eq!(h.completion("casework", "result", "review-99").await.status(), StatusCode::NOT_FOUND);
    assert_eq!(h.completion("casework", "other", &reference).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(decide(&h, "review-99", "approved").await.status(), StatusCode::NOT_FOUND);
}

/// A receiver for decision notifications: each reference and its bearer token.
async fn notification_receiver() -> (String, mpsc::UnboundedReceiver<(Value, Option<String>)>) {
    async fn receive(
        State(tx): State<mpsc::UnboundedSender<(Value, Option<String>)>>,
        headers: HeaderMap,
        axum::Json(body): axum::Json<Value>,
    ) {
        let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let _ = tx.send((body, auth));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("cannot bind: {e}"),
    };
    let url = match listener.local_addr() {
        Ok(addr) => format!("http://{addr}/v1/completions/casework"),
        Err(e) => panic!("no address: {e}"),
    };
    let app = Router::new().route("/v1/completions/casework", post(receive)).with_state(tx);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

#[tokio::test]
async fn auto_decide_follows_the_requested_decision_and_notifies() {
    let (url, mut notifications) = notification_receiver().await;
    let casework = CaseworkConfig {
        auto_decide_after: Some(Duration::from_millis(50)),
        notify_url: Some(url),
        notify_token: Some("operator-token".to_owned()),
        ..CaseworkConfig::default()
    };
    let h = start(SimConfig { casework, ..SimConfig::default() }).await;
    let rejected = submit(&h, "r1", Some("rejected")).await;
    let approved = submit(&h, "r2", None).await;
    // A replay is not a new request: it must not schedule a second decision.
    assert_eq!(submit(&h, "r1", Some("rejected")).await, rejected);

    let mut seen = Vec::new();
    for _ in 0..2 {
        let next = tokio::time::timeout(Duration::from_secs(5), notifications.recv()).await;
        let Ok(Some((body, auth))) = next else { panic!("no notification: {next:?}") };
        assert_eq!(auth.as_deref(), Some("Bearer operator-token"));
        seen.push(body["reference"].as_str().map(str::to_owned).unwrap_or_default());
    }
    seen.sort();
    assert_eq!(seen, [rejected.clone(), approved.clone()]);
    for (reference, decision) in [(rejected, "rejected"), (approved, "approved")] {
        let completion = json(h.completion("casework", "result", &reference).await).await;
        assert_eq!(completion["state"], "complete", "{reference}");
        assert_eq!(completion["value"]["decision"], decision, "{reference}");
    }
    let extra = tokio::time::timeout(Duration::from_millis(100), notifications.recv()).await;
    assert!(extra.is_err(), "one notification per request: {extra:?}");
}

#[tokio::test]
async fn auto_decide_leaves_requests_decided_or_withdrawn_meanwhile() {
    let casework = CaseworkConfig { auto_decide_after: Some(Duration::from_millis(50)), ..CaseworkConfig::default() };
    let h = start(SimConfig { casework, ..SimConfig::default() }).await;
    let reference = submit(&h, "r", Some("approved")).await;
    assert_eq!(decide(&h, &reference, "rejected").await.status(), StatusCode::OK);
    let withdrawn = submit(&h, "r2", None).await;
    let withdraw = json!({"reviewRequestId": withdrawn, "reason": "cancelled"});
    h.accepted("casework", "withdraw-review-request/v1", Some("w"), &withdraw).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let completion = json(h.completion("casework", "result", &reference).await).await;
    assert_eq!(completion["value"]["decision"], "rejected");
    let review = h.sims.casework.review(&withdrawn).map(|r| r.state);
    assert_eq!(review, Some(coordinator_sim::casework::ReviewState::Withdrawn));
}
