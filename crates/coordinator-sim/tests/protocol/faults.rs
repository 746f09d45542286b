//! Each fault kind of `POST {base}/v1/faults`, and what the client and the
//! effects count see.

use std::time::Instant;

use reqwest::StatusCode;
use reqwest::header::RETRY_AFTER;
use serde_json::json;

use crate::harness::{SHORT, json, message, start_default};

#[tokio::test]
async fn refuse_answers_the_code_without_effect_for_count_calls() {
    let h = start_default().await;
    let fault = json!({"operation": "submit-message/v1", "fault": "refuse", "code": "quota-exceeded", "count": 2});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);
    h.refused("messaging", "submit-message/v1", Some("k"), &message("p"), 422, "quota-exceeded").await;
    h.refused("messaging", "submit-message/v1", Some("k"), &message("p"), 422, "quota-exceeded").await;
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (2, 0));
    h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (3, 1));
}

#[tokio::test]
async fn refuse_can_choose_its_status() {
    let h = start_default().await;
    let fault = json!({"operation": "casework.submit-review-request/v1", "fault": "refuse",
        "code": "review-already-open", "status": 409});
    assert_eq!(h.fault("casework", &fault).await, StatusCode::OK);
    let review = json!({"subject": {"recordType": "application", "recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10"},
        "reviewType": "notice-approval"});
    h.refused("casework", "submit-review-request/v1", Some("r"), &review, 409, "review-already-open").await;
}

#[tokio::test]
async fn unavailable_is_a_503_with_retry_after_and_no_effect() {
    let h = start_default().await;
    let fault = json!({"operation": "submit-message/v1", "fault": "unavailable"});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);
    let response = h.call("messaging", "submit-message/v1", Some("k"), &message("p")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("1"));
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (1, 0));
    h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;
}

#[tokio::test]
async fn unavailable_can_be_a_429_with_the_retry_after_asked_for() {
    let h = start_default().await;
    let fault = json!({"operation": "submit-message/v1", "fault": "unavailable", "status": 429,
        "retryAfterSeconds": 5, "count": 2});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);
    for _ in 0..2 {
        let response = h.call("messaging", "submit-message/v1", Some("k"), &message("p")).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("5"));
    }
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (2, 0));
    h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;
    let bad = json!({"operation": "submit-message/v1", "fault": "unavailable", "status": 500});
    assert_eq!(h.fault("messaging", &bad).await, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn timeout_acts_at_once_and_answers_after_the_delay() {
    let h = start_default().await;
    let fault = json!({"operation": "submit-message/v1", "fault": "timeout", "delaySeconds": 0.2, "count": 2});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);

    // A client that gives up first sees a timeout, yet the effect happened.
    let gave_up = h.operation("messaging", "submit-message/v1", Some("k"), &message("p")).timeout(SHORT).send().await;
    assert!(gave_up.as_ref().is_err_and(reqwest::Error::is_timeout), "{gave_up:?}");
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (1, 1));

    // A patient client gets the normal answer (the replay) after the delay.
    let started = Instant::now();
    let late = h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;
    assert!(started.elapsed().as_millis() >= 200);
    assert_eq!(late["output"]["messageId"], "msg-1");
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("k")).await, (2, 1));
}

#[tokio::test]
async fn drop_response_after_effect_closes_the_connection_and_the_receipt_finds_it() {
    let h = start_default().await;
    let fault = json!({"operation": "submit-message/v1", "fault": "drop-response-after-effect"});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);
    let lost = h.operation("messaging", "submit-message/v1", Some("run-1:send"), &message("p")).send().await;
    let error = match lost {
        Ok(response) => panic!("expected no answer, got {}", response.status()),
        Err(e) => e,
    };
    assert!(!error.is_timeout() && !error.is_status(), "{error:?}");
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("run-1:send")).await, (1, 1));

    let receipt = h.receipt("messaging", "run-1:send").await;
    assert_eq!(receipt.status(), StatusCode::OK);
    let receipt = json(receipt).await;
    assert_eq!(receipt["output"]["messageId"], "msg-1");
    let replay = h.accepted("messaging", "submit-message/v1", Some("run-1:send"), &message("p")).await;
    assert_eq!(replay, receipt);
    assert_eq!(h.sims.messaging.sent().len(), 1);
}

#[tokio::test]
async fn drop_request_closes_the_connection_without_acting_and_keeps_no_receipt() {
    let h = start_default().await;
    let fault = json!({"operation": "submit-message/v1", "fault": "drop-request"});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);
    let lost = h.operation("messaging", "submit-message/v1", Some("run-1:send"), &message("p")).send().await;
    let error = match lost {
        Ok(response) => panic!("expected no answer, got {}", response.status()),
        Err(e) => e,
    };
    assert!(!error.is_timeout() && !error.is_status(), "{error:?}");
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("run-1:send")).await, (1, 0));
    assert_eq!(h.receipt("messaging", "run-1:send").await.status(), StatusCode::NOT_FOUND);
    assert!(h.sims.messaging.sent().is_empty());

    // A resend with the key acts, for the first time.
    h.accepted("messaging", "submit-message/v1", Some("run-1:send"), &message("p")).await;
    assert_eq!(h.counts("messaging", "submit-message/v1", Some("run-1:send")).await, (2, 1));
    assert_eq!(h.sims.messaging.sent().len(), 1);
}

#[tokio::test]
async fn faults_can_be_cleared_and_bad_fault_requests_are_refused() {
    let h = start_default().await;
    let fault = json!({"operation": "submit-message/v1", "fault": "unavailable", "count": 5});
    assert_eq!(h.fault("messaging", &fault).await, StatusCode::OK);
    let cleared = h.http.delete(format!("{}/v1/faults", h.url("messaging"))).send().await;
    assert_eq!(crate::harness::sent(cleared).status(), StatusCode::NO_CONTENT);
    h.accepted("messaging", "submit-message/v1", Some("k"), &message("p")).await;

    for bad in [
        json!({"operation": "read-record/v1", "fault": "unavailable"}),
        json!({"operation": "submit-message/v1", "fault": "explode"}),
        json!({"operation": "submit-message/v1", "fault": "refuse"}),
        json!({"operation": "submit-message/v1", "fault": "unavailable", "colour": "red"}),
    ] {
        assert_eq!(h.fault("messaging", &bad).await, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn faults_of_one_operation_leave_the_others_alone() {
    let h = start_default().await;
    let fault = json!({"operation": "create-appointment/v1", "fault": "unavailable"});
    assert_eq!(h.fault("scheduling", &fault).await, StatusCode::OK);
    let query = json!({"calendarId": "c", "from": "2026-11-02T08:00:00Z", "to": "2026-11-02T09:00:00Z",
        "durationMinutes": 30});
    let slots = h.accepted("scheduling", "read-availability/v1", None, &query).await;
    assert_eq!(slots["output"]["slots"].as_array().map(Vec::len), Some(2));
}
