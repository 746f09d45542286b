//! `receipt` and `observe`: every answer, and percent-encoded path segments.

use coordinator_core::machine::event::{Observation, ReceiptAnswer};
use coordinator_products::{ProductClient, Reason};
use serde_json::json;

use crate::support::{Product, nothing_listening, reply, static_connection, url};

async fn receipt_for(status: u16, body: &'static str) -> ReceiptAnswer {
    let product = Product::start(move |_| reply(status, &[], body)).await;
    let answer = ProductClient::new().receipt(&product.connection(), "run-1:send-notice").await;
    assert_eq!(product.requests().len(), 1);
    answer
}

async fn observation_for(status: u16, body: &'static str) -> Observation {
    let product = Product::start(move |_| reply(status, &[], body)).await;
    let answer = ProductClient::new().observe(&product.connection(), "result", "review-17").await;
    assert_eq!(product.requests().len(), 1);
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_is_found_not_found_expired_or_unavailable() {
    let body = r#"{"output": {"messageId": "m-1"}, "completions": {"delivery": "d-1"}}"#;
    let completions = [("delivery".to_owned(), "d-1".to_owned())].into();
    assert_eq!(receipt_for(200, body).await, ReceiptAnswer::Found { output: json!({"messageId": "m-1"}), completions });
    assert_eq!(receipt_for(404, "").await, ReceiptAnswer::NotFound);
    assert_eq!(receipt_for(410, "").await, ReceiptAnswer::Expired);
    for status in [500, 503, 400, 302] {
        assert_eq!(receipt_for(status, "").await, ReceiptAnswer::Unavailable, "HTTP {status}");
    }
    // A receipt settles an unknown effect only when it is well-formed.
    assert_eq!(receipt_for(200, "found it").await, ReceiptAnswer::Unavailable);
    assert_eq!(receipt_for(200, r#"{"completions": {}}"#).await, ReceiptAnswer::Unavailable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_lookup_that_cannot_connect_is_unavailable() {
    let conn = static_connection(url(&format!("http://{}/sim/messaging", nothing_listening().await)));
    let explained = ProductClient::new().receipt_explained(&conn, "k").await;
    assert_eq!(explained.answer, ReceiptAnswer::Unavailable);
    assert_eq!(explained.reason, Reason::NotConnected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observation_is_pending_complete_or_unavailable() {
    assert_eq!(observation_for(200, r#"{"state": "pending"}"#).await, Observation::Pending);
    let complete = r#"{"state": "complete", "value": {"decision": "approved"}}"#;
    assert_eq!(observation_for(200, complete).await, Observation::Complete { value: json!({"decision": "approved"}) });
    for body in ["garbage", r#"{"state": "complete"}"#, r#"{"state": "decided"}"#, r#"{"value": 1}"#, ""] {
        assert_eq!(observation_for(200, body).await, Observation::Unavailable, "{body:?}");
    }
    for status in [404, 500, 503] {
        assert_eq!(observation_for(status, r#"{"state": "pending"}"#).await, Observation::Unavailable, "HTTP {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_segments_are_percent_encoded_under_the_base_path() {
    let product = Product::start(|_| reply(404, &[], "")).await;
    let client = ProductClient::new();
    let conn = product.connection();
    let _ = client.receipt(&conn, "run-1:send notice/x?y#z").await;
    let _ = client.observe(&conn, "result", "rev/17 %2e").await;
    let paths: Vec<_> = product.requests().into_iter().map(|r| (r.method.to_string(), r.path)).collect();
    assert_eq!(
        paths,
        [
            ("GET".to_owned(), "/sim/messaging/v1/receipts/run-1:send%20notice%2Fx%3Fy%23z".to_owned()),
            ("GET".to_owned(), "/sim/messaging/v1/completions/result/rev%2F17%20%252e".to_owned()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_that_a_url_cannot_carry_is_unavailable_without_a_request() {
    let product = Product::start(|_| reply(200, &[], r#"{"state": "pending"}"#)).await;
    let client = ProductClient::new();
    for reference in ["..", ".", ""] {
        let explained = client.observe_explained(&product.connection(), "result", reference).await;
        assert_eq!(explained.answer, Observation::Unavailable, "{reference:?}");
        assert!(matches!(explained.reason, Reason::Unsendable(_)));
    }
    assert!(product.requests().is_empty() && product.token_requests().is_empty());
}
