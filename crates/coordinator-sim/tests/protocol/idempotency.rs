//! Idempotency keys: replays without a second effect, and the request checks
//! that come before any effect.

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{json, message, start_default};

#[tokio::test]
async fn the_same_key_replays_the_original_outcome_with_one_effect() {
    let h = start_default().await;
    let first = h.accepted("messaging", "submit-message/v1", Some("run-1:send"), &message("p")).await;
    let again = h.accepted("messaging", "submit-message/v1", Some("run-1:send"), &message("p")).await;
    assert_eq!(first, again);
    assert_eq!(first["output"]["messageId"], "msg-1");
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("run-1:send")).await, (2, 1));
    assert_eq!(h.sims.messaging.sent().len(), 1);

    let other = h.accepted("messaging", "submit-message/v1", Some("run-2:send"), &message("p")).await;
    assert_eq!(other["output"]["messageId"], "msg-2");
}

#[tokio::test]
async fn evaluations_replay_too_and_are_counted_once() {
    let h = start_default().await;
    let command = json!({"model": "permit-renewal/v2", "facts": {"expectedResult": "ineligible"}});
    let first = h.accepted("evaluation", "evaluate/v1", Some("e"), &command).await;
    let again = h.accepted("evaluation", "evaluate/v1", Some("e"), &command).await;
    assert_eq!(first, again);
    assert_eq!(first["output"]["result"], "ineligible");
    assert_eq!(h.sims.evaluation.evaluations(), 1);
    assert_eq!(h.counts("evaluation", "evaluate/v1", Some("e")).await, (2, 1));
}

#[tokio::test]
async fn a_key_reused_for_another_command_is_refused_without_effect() {
    let h = start_default().await;
    h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;
    h.refused("messaging", "submit-message/v1", Some("k"), &message("q"), 409, "idempotency-key-reused").await;
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (2, 1));
}

#[tokio::test]
async fn mutations_and_evaluations_need_a_key_and_reads_do_not() {
    let h = start_default().await;
    h.refused("messaging", "submit-message/v1", None, &message("p"), 400, "idempotency-key-missing").await;
    let evaluate = json!({"model": "permit-renewal/v2", "facts": {}});
    h.refused("evaluation", "evaluate/v1", None, &evaluate, 400, "idempotency-key-missing").await;
    let read = json!({"recordType": "application", "recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10"});
    let record = h.accepted("breg", "read-record/v1", None, &read).await;
    assert_eq!(record["output"]["revision"], 1);
    assert_eq!(h.counts("breg", "read-record/v1", None).await, (1, 0), "a read is never an effect");
    assert!(h.sims.messaging.sent().is_empty());
}

#[tokio::test]
async fn commands_are_checked_against_the_catalog_before_any_effect() {
    let h = start_default().await;
    let bad = json!({"recipient": {"kind": "robot", "id": "p"}, "template": "t", "variables": {}});
    h.refused("messaging", "submit-message/v1", Some("k"), &bad, 422, "invalid-command").await;
    let response = h
        .http
        .post(format!("{}/v1/operations/submit-message/v1", h.url("messaging")))
        .bearer_auth(&h.token)
        .header("Idempotency-Key", "k")
        .body("not json")
        .send()
        .await;
    let response = crate::harness::sent(response);
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    h.refused("messaging", "submit-message/v2", Some("k"), &message("p"), 404, "unknown-operation").await;
    h.refused("breg", "apply-proposal/v1", Some("k"), &json!({"proposalId": "x"}), 404, "unknown-operation").await;
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await.1, 0);
    assert_eq!(json(h.receipt("messaging", "k").await).await["code"], "receipt-not-found");
}
