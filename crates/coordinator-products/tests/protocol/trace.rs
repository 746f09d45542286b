//! The W3C `traceparent` header: sent with an operation, a receipt lookup and
//! an observation when the caller gives one, and absent otherwise.

use coordinator_products::{ProductClient, Sending, Traceparent};
use serde_json::json;

use crate::support::{Product, RUN_ID, command, reply};

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_carries_the_traceparent_it_is_given() {
    let product = Product::start(|_| reply(200, &[], r#"{"output": {}, "completions": {}}"#)).await;
    let trace = Traceparent::parse(TRACE);
    assert!(trace.is_some());
    let client = ProductClient::new();
    let conn = product.connection();
    let command = command(json!({"recipient": "r-1", "text": "hello"}));
    client.call_traced(&conn, "submit-message/v1", &command, RUN_ID, 1, Sending::Keyed, trace).await;
    client.receipt_traced(&conn, "key-1", trace).await;
    client.observe_traced(&conn, "result", "ref-1", trace).await;
    client.call_explained(&conn, "submit-message/v1", &command, RUN_ID, 2, Sending::Keyed).await;
    let seen: Vec<Option<String>> = product.requests().iter().map(|r| r.header("traceparent")).collect();
    assert_eq!(seen, [Some(TRACE.to_owned()), Some(TRACE.to_owned()), Some(TRACE.to_owned()), None]);
}
