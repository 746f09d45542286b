//! `ProductClient::call`: one test per row of the classification
//! (docs/reference/runs.md#calls-and-prepared-commands).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use coordinator_core::machine::event::CallAnswer;
use coordinator_products::{BodyFailure, Explained, ProductClient, Reason, Sending, UNSENDABLE};
use serde_json::{Value, json};

use crate::support::{self, Product, RUN_ID, Reply, command, nothing_listening, raw, reply, static_connection, url};

const OPERATION: &str = "submit-message/v1";

async fn call_product(product: &Product) -> Explained<CallAnswer> {
    let command = command(json!({"recipient": "r-1", "text": "hello"}));
    ProductClient::new().call_explained(&product.connection(), OPERATION, &command, RUN_ID, 1, Sending::Keyed).await
}

async fn answer_to(status: u16, headers: &'static [(&'static str, &'static str)], body: &'static str) -> CallAnswer {
    let product = Product::start(move |_| reply(status, headers, body)).await;
    let answer = call_product(&product).await.answer;
    assert_eq!(product.requests().len(), 1, "HTTP {status} must come from exactly one request");
    answer
}

fn refused(code: &str) -> CallAnswer {
    CallAnswer::Refused { code: code.into() }
}

fn retryable(seconds: Option<u64>) -> CallAnswer {
    CallAnswer::Retryable { retry_after_seconds: seconds }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_is_accepted_with_output_and_completions() {
    let body = r#"{"output": {"messageId": "m-1"}, "completions": {"result": "r-17"}}"#;
    let answer = answer_to(200, &[("content-type", "application/json")], body).await;
    let completions = [("result".to_owned(), "r-17".to_owned())].into();
    assert_eq!(answer, CallAnswer::Accepted { output: json!({"messageId": "m-1"}), completions });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_with_a_body_that_is_not_the_envelope_is_accepted_with_null_output() {
    for body in ["not json", r#"{"result": 1}"#, r#"{"output": 1, "completions": {"result": 5}}"#, ""] {
        let product = Product::start(move |_| reply(200, &[], body)).await;
        let explained = call_product(&product).await;
        let expected = CallAnswer::Accepted { output: Value::Null, completions: Default::default() };
        assert_eq!(explained.answer, expected, "{body:?}");
        assert_eq!(explained.reason, Reason::MalformedBody { status: 200 });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_refusal_carries_its_code() {
    let body = r#"{"refusal": {"code": "recipient-opted-out"}}"#;
    assert_eq!(answer_to(409, &[], body).await, refused("recipient-opted-out"));
    assert_eq!(answer_to(422, &[], body).await, refused("recipient-opted-out"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4xx_without_a_refusal_body_is_refused_with_its_status() {
    assert_eq!(answer_to(400, &[], "").await, refused("http-400"));
    assert_eq!(answer_to(401, &[], "unauthorized").await, refused("http-401"));
    assert_eq!(answer_to(404, &[], r#"{"error": "no such operation"}"#).await, refused("http-404"));
    assert_eq!(answer_to(422, &[], r#"{"refusal": {"code": 7}}"#).await, refused("http-422"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_refused_and_not_followed() {
    let product = Product::start(|r| {
        if r.path.ends_with("/elsewhere") {
            reply(200, &[], r#"{"output": 1}"#)
        } else {
            reply(302, &[("location", "/elsewhere")], "")
        }
    })
    .await;
    assert_eq!(call_product(&product).await.answer, refused("http-302"));
    assert_eq!(product.requests().len(), 1, "the redirect was followed");
    assert_eq!(answer_to(307, &[("location", "http://127.0.0.1:1/")], "").await, refused("http-307"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_and_unavailable_are_retryable_with_retry_after() {
    assert_eq!(answer_to(429, &[("retry-after", "7")], "").await, retryable(Some(7)));
    assert_eq!(answer_to(503, &[("retry-after", "30")], "busy").await, retryable(Some(30)));
    assert_eq!(answer_to(429, &[], "").await, retryable(None));
    // An HTTP-date counts from the answer's own Date.
    let date = &[("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT"), ("date", "Wed, 21 Oct 2026 07:27:15 GMT")];
    assert_eq!(answer_to(503, date, "").await, retryable(Some(45)));
    assert_eq!(answer_to(503, &[("retry-after", "in a while")], "").await, retryable(None));
    // A refusal body does not make a 429 a refusal.
    assert_eq!(answer_to(429, &[], r#"{"refusal": {"code": "slow-down"}}"#).await, retryable(None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_uncertain() {
    for status in [500, 501, 502, 504, 505] {
        assert_eq!(answer_to(status, &[], "oops").await, CallAnswer::Uncertain, "HTTP {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_within_the_request_timeout_is_uncertain() {
    let product = Product::start(|_| Reply::Hang).await;
    let conn = product.connection().with_timeouts(Duration::from_millis(200), Duration::from_millis(200));
    let started = Instant::now();
    let explained =
        ProductClient::new().call_explained(&conn, OPERATION, &command(json!({})), RUN_ID, 1, Sending::Keyed).await;
    assert_eq!(explained.answer, CallAnswer::Uncertain);
    assert_eq!(explained.reason, Reason::TimedOut);
    assert_eq!(product.requests().len(), 1, "the request reached the product");
    assert!(started.elapsed() < Duration::from_secs(5), "the timeout did not apply: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_after_the_request_is_uncertain() {
    let (base, count) = raw(b"").await;
    let explained = call_static(&base).await;
    assert_eq!(explained.answer, CallAnswer::Uncertain);
    assert_eq!(explained.reason, Reason::ConnectionLost);
    assert_eq!(count.load(Ordering::SeqCst), 1, "exactly one request was read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_body_is_uncertain() {
    let cases: [(&'static [u8], u16); 3] = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"output\"", 200),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"out", 200),
        (b"HTTP/1.1 409 Conflict\r\nContent-Length: 80\r\n\r\n{\"refusal\": {\"co", 409),
    ];
    for (answer, status) in cases {
        let (base, count) = raw(answer).await;
        let explained = call_static(&base).await;
        assert_eq!(explained.answer, CallAnswer::Uncertain, "HTTP {status}");
        assert_eq!(explained.reason, Reason::BodyUnreadable { status, failure: BodyFailure::Broken });
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_uncertain() {
    let product = Product::start(|_| reply(200, &[], r#"{"output": "a long enough output"}"#)).await;
    let client = ProductClient::new().with_max_response_bytes(16);
    let explained =
        client.call_explained(&product.connection(), OPERATION, &command(json!({})), RUN_ID, 1, Sending::Keyed).await;
    assert_eq!(explained.answer, CallAnswer::Uncertain);
    assert_eq!(explained.reason, Reason::BodyUnreadable { status: 200, failure: BodyFailure::TooLarge { limit: 16 } });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_retryable() {
    let base = url(&format!("http://{}/sim/messaging", nothing_listening().await));
    let explained = call_static(&base).await;
    assert_eq!(explained.answer, retryable(None));
    assert_eq!(explained.reason, Reason::NotConnected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_failure_is_retryable_and_sends_nothing() {
    // https:// to a plain-HTTP product: the handshake fails before any request.
    let product = Product::start(|_| reply(200, &[], r#"{"output": 1}"#)).await;
    let base = url(&format!("https://{}/sim/messaging", product.addr()));
    let explained = call_static(&base).await;
    assert_eq!(explained.answer, retryable(None));
    assert_eq!(explained.reason, Reason::NotConnected);
    assert!(product.requests().is_empty(), "a request reached the product");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_timeout_is_retryable() {
    // A listener that never accepts, its backlog filled: the kernel drops further
    // SYNs, so a connect hangs until the connect timeout, before anything is sent.
    let (base, _listener) = support::unanswered().await;
    let conn = static_connection(base).with_timeouts(Duration::from_millis(200), Duration::from_secs(10));
    let started = Instant::now();
    let explained =
        ProductClient::new().call_explained(&conn, OPERATION, &command(json!({})), RUN_ID, 1, Sending::Keyed).await;
    assert_eq!(explained.answer, retryable(None));
    assert_eq!(explained.reason, Reason::NotConnected);
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(150), "the connect did not hang: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "the connect timeout did not apply: {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsendable_request_is_refused_without_sending_or_asking_for_a_token() {
    let product = Product::start(|_| reply(200, &[], r#"{"output": 1}"#)).await;
    let client = ProductClient::new();
    let conn = product.connection();
    let input = command(json!({}));
    for operation in ["submit-message", "messaging/submit-message/v1", "../v1", "submit-message/1"] {
        let explained = client.call_explained(&conn, operation, &input, RUN_ID, 1, Sending::Keyed).await;
        assert_eq!(explained.answer, refused(UNSENDABLE), "{operation}");
    }
    let explained = client.call_explained(&conn, OPERATION, &input, "run\nid", 1, Sending::Keyed).await;
    assert_eq!(explained.answer, refused(UNSENDABLE));
    assert!(product.requests().is_empty() && product.token_requests().is_empty());
}

async fn call_static(base: &coordinator_products::HttpUrl) -> Explained<CallAnswer> {
    let conn = support::static_connection(base.clone());
    ProductClient::new().call_explained(&conn, OPERATION, &command(json!({"a": 1})), RUN_ID, 1, Sending::Keyed).await
}
