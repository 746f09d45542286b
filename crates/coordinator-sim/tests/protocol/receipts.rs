//! `GET {base}/v1/receipts/{key}`: found, not found, expired.

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{json, message, start_default};

#[tokio::test]
async fn receipts_show_the_original_outcome_until_they_expire() {
    let h = start_default().await;
    let booking = json!({"calendarId": "town-hall", "slotId": "2026-11-02T08:00:00Z/30",
        "attendee": {"kind": "person", "id": "p"}});
    let accepted = h.accepted("scheduling", "create-appointment/v1", Some("b"), &booking).await;
    h.accepted("messaging", "submit-message/v1", Some("m"), &message("p")).await;

    let found = h.receipt("scheduling", "b").await;
    assert_eq!(found.status(), StatusCode::OK);
    assert_eq!(json(found).await, accepted);
    assert_eq!(h.receipt("scheduling", "unknown").await.status(), StatusCode::NOT_FOUND);

    let expire = json!({"operation": "create-appointment/v1", "fault": "expire-receipts"});
    assert_eq!(h.fault("scheduling", &expire).await, StatusCode::OK);
    let gone = h.receipt("scheduling", "b").await;
    assert_eq!(gone.status(), StatusCode::GONE);
    assert_eq!(json(gone).await["code"], "receipt-expired");
    assert_eq!(h.receipt("messaging", "m").await.status(), StatusCode::OK, "other products keep theirs");

    // The product still knows the key: a resend replays, it does not book twice.
    let replay = h.accepted("scheduling", "create-appointment/v1", Some("b"), &booking).await;
    assert_eq!(replay, accepted);
    assert_eq!(h.counts("scheduling", "create-appointment/v1", Some("b")).await, (2, 1));
}

#[tokio::test]
async fn products_without_receipts_never_show_one() {
    let h = start_default().await;
    let action = json!({"recordType": "application", "recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10",
        "action": "mark-notified"});
    let accepted = h.accepted("breg", "invoke-action/v1", Some("a"), &action).await;
    assert_eq!(accepted["output"]["revision"], 2);
    assert_eq!(h.receipt("breg", "a").await.status(), StatusCode::NOT_FOUND);
    let stale = json!({"recordType": "application", "recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10",
        "action": "mark-notified", "expectedRevision": 1});
    h.refused("breg", "invoke-action/v1", Some("a2"), &stale, 409, "revision-mismatch").await;
}
