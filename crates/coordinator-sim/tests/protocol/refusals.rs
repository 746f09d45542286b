//! Declared refusals: the product's own "no effect" answers.

use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use serde_json::json;

use crate::harness::{message, start, start_default};

#[tokio::test]
async fn opted_out_recipients_are_refused_without_a_message() {
    let h = start(SimConfig { opted_out: vec!["person-9".to_owned()], ..SimConfig::default() }).await;
    h.refused("messaging", "submit-message/v1", Some("k"), &message("person-9"), 409, "recipient-opted-out").await;
    h.sims.messaging.opt_out("person-10");
    h.refused("messaging", "submit-message/v1", Some("k2"), &message("person-10"), 409, "recipient-opted-out").await;
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (1, 0));
    assert!(h.sims.messaging.sent().is_empty());
    assert_eq!(h.receipt("messaging", "k").await.status(), reqwest::StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_taken_slot_is_refused_and_a_cancelled_appointment_cannot_be_cancelled_again() {
    let h = start_default().await;
    let booking = |who: &str| json!({"calendarId": "desk-2", "slotId": "2026-11-02T08:00:00Z/30", "attendee": {"kind": "person", "id": who}});
    let first = h.accepted("scheduling", "create-appointment/v1", Some("b1"), &booking("a")).await;
    h.refused("scheduling", "create-appointment/v1", Some("b2"), &booking("b"), 409, "slot-taken").await;
    assert_eq!(h.counts("scheduling", "create-appointment/v1", Some("b2")).await, (1, 0));

    let id = first["output"]["appointmentId"].as_str().unwrap_or_default().to_owned();
    let cancel = json!({"appointmentId": id, "reason": "no longer needed"});
    let cancelled = h.accepted("scheduling", "cancel-appointment/v1", Some("c1"), &cancel).await;
    assert_eq!(cancelled["output"]["state"], "cancelled");
    h.refused("scheduling", "cancel-appointment/v1", Some("c2"), &cancel, 409, "already-cancelled").await;
    // The slot is free again.
    h.accepted("scheduling", "create-appointment/v1", Some("b3"), &booking("b")).await;
}

#[tokio::test]
async fn casework_refuses_what_its_policy_does_not_review() {
    let casework = CaseworkConfig {
        not_reviewable: ["secret-review".to_owned()].into(),
        one_open_request_per_subject: true,
        ..CaseworkConfig::default()
    };
    let h = start(SimConfig { casework, ..SimConfig::default() }).await;
    let subject = json!({"recordType": "application", "recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10"});
    let request = |review_type: &str| json!({"subject": subject, "reviewType": review_type});
    h.refused(
        "casework",
        "submit-review-request/v1",
        Some("r1"),
        &request("secret-review"),
        422,
        "subject-not-reviewable",
    )
    .await;
    h.accepted("casework", "submit-review-request/v1", Some("r2"), &request("notice-approval")).await;
    h.refused(
        "casework",
        "submit-review-request/v1",
        Some("r3"),
        &request("notice-approval"),
        409,
        "review-already-open",
    )
    .await;
}
