//! Credentials and headers: a fresh token for every attempt, the token request's
//! form, nothing sent without a token, and the protocol headers of an operation.

use coordinator_core::machine::event::{CallAnswer, Observation, ReceiptAnswer};
use coordinator_products::{ProductClient, Reason, Secret, Sending, TokenError, TokenSource};
use serde_json::json;

use crate::support::{
    CLIENT_SECRET, Product, RUN_ID, Tokens, command, connection, nothing_listening, reply, static_connection, url,
};

const ACCEPTED: &str = r#"{"output": {"messageId": "m-1"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attempt_gets_a_fresh_token() {
    let product = Product::start(|_| reply(200, &[], ACCEPTED)).await;
    let client = ProductClient::new();
    let conn = product.connection();
    let input = command(json!({"text": "hi"}));
    for attempt in 1..=2 {
        let answer = client.call(&conn, "submit-message/v1", &input, RUN_ID, attempt, Sending::Keyed).await;
        assert!(matches!(answer, CallAnswer::Accepted { .. }), "{answer:?}");
    }
    assert_eq!(product.token_requests().len(), 2, "one token request per attempt");
    let authorizations: Vec<_> = product.requests().iter().map(|r| r.header("authorization")).collect();
    assert_eq!(authorizations, [Some("Bearer tok-1".to_owned()), Some("Bearer tok-2".to_owned())]);
    // Receipts and observations get their own fresh tokens too.
    let _ = client.receipt(&conn, "k").await;
    let _ = client.observe(&conn, "result", "r-1").await;
    assert_eq!(product.token_requests().len(), 4);
    assert_eq!(product.requests()[3].header("authorization").as_deref(), Some("Bearer tok-4"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effects_get_connections_of_their_own_and_reads_and_lookups_reuse_idle_ones() {
    let product = Product::start(|r| {
        if r.path.contains("/v1/completions/") {
            reply(200, &[], r#"{"state": "pending"}"#)
        } else {
            reply(200, &[], ACCEPTED)
        }
    })
    .await;
    let client = ProductClient::new();
    let conn = product.connection();
    let input = command(json!({"text": "hi"}));
    for attempt in 1..=3 {
        let answer = client.call(&conn, "submit-message/v1", &input, RUN_ID, attempt, Sending::Keyed).await;
        assert!(matches!(answer, CallAnswer::Accepted { .. }), "{answer:?}");
        let answer = client.call(&conn, "read-record/v1", &input, RUN_ID, attempt, Sending::Read).await;
        assert!(matches!(answer, CallAnswer::Accepted { .. }), "{answer:?}");
    }
    for _ in 0..2 {
        let _ = client.receipt(&conn, "k").await;
        assert_eq!(client.observe(&conn, "result", "r-1").await, Observation::Pending);
    }
    let requests = product.requests();
    let peers = |path: &str| -> Vec<_> { requests.iter().filter(|r| r.path.contains(path)).map(|r| r.peer).collect() };
    let (effects, reads) = (peers("/v1/operations/submit-message/"), peers("/v1/operations/read-record/"));
    let lookups: Vec<_> = requests.iter().filter(|r| !r.path.contains("/v1/operations/")).map(|r| r.peer).collect();
    let tokens: Vec<_> = product.token_requests().iter().map(|r| r.peer).collect();
    assert_eq!((effects.len(), reads.len(), lookups.len(), tokens.len()), (3, 3, 4, 10));
    // Every mutation went out on a connection nothing else used.
    for (i, peer) in effects.iter().enumerate() {
        let shared = requests.iter().filter(|r| r.peer == *peer).count() + tokens.iter().filter(|p| *p == peer).count();
        assert_eq!(shared, 1, "mutation {i} shared its connection {peer}");
    }
    // Tokens, reads and lookups change nothing: they reuse idle connections.
    let mut reused: Vec<_> = tokens.iter().chain(&reads).chain(&lookups).collect();
    reused.sort();
    reused.dedup();
    assert!(reused.len() < 3, "17 token, read and lookup requests on {} connections", reused.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_request_is_a_client_credentials_grant() {
    let product = Product::start(|_| reply(200, &[], ACCEPTED)).await;
    let _ = ProductClient::new()
        .call(&product.connection(), "submit-message/v1", &command(json!({})), RUN_ID, 1, Sending::Keyed)
        .await;
    let requests = product.token_requests();
    let [request] = requests.as_slice() else { panic!("{} token requests", requests.len()) };
    assert_eq!(request.header("content-type").as_deref(), Some("application/x-www-form-urlencoded"));
    let form = String::from_utf8_lossy(&request.body).into_owned();
    let mut fields: Vec<&str> = form.split('&').collect();
    fields.sort_unstable();
    let secret = format!("client_secret={CLIENT_SECRET}");
    let mut expected = vec!["client_id=coordinator", &secret, "grant_type=client_credentials", "scope=messaging.send"];
    expected.sort_unstable();
    assert_eq!(fields, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_nothing_is_sent_and_the_call_is_retryable() {
    let down = url(&format!("http://{}/oauth/token", nothing_listening().await));
    let cases = [
        (Tokens::Issue("unused"), Some(down), TokenError::Unreachable),
        (Tokens::Refuse(401), None, TokenError::Refused { status: 401 }),
        (Tokens::Refuse(503), None, TokenError::Refused { status: 503 }),
        (Tokens::Garbage, None, TokenError::InvalidResponse),
    ];
    for (tokens, endpoint, expected) in cases {
        let product = Product::start_with(tokens, |_| reply(200, &[], ACCEPTED)).await;
        let mut conn = product.connection();
        if let (Some(endpoint), TokenSource::ClientSecret { token_endpoint, .. }) = (endpoint, &mut conn.token) {
            *token_endpoint = endpoint;
        }
        let client = ProductClient::new();
        let explained =
            client.call_explained(&conn, "submit-message/v1", &command(json!({})), RUN_ID, 1, Sending::Keyed).await;
        assert_eq!(explained.answer, CallAnswer::Retryable { retry_after_seconds: None }, "{expected:?}");
        assert_eq!(explained.reason, Reason::Token(expected));
        assert_eq!(client.receipt(&conn, "k").await, ReceiptAnswer::Unavailable);
        assert_eq!(client.observe(&conn, "result", "r-1").await, Observation::Unavailable);
        assert!(product.requests().is_empty(), "a request was sent without a token ({expected:?})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_carries_the_protocol_headers_and_the_command() {
    let product = Product::start(|_| reply(200, &[], ACCEPTED)).await;
    let client = ProductClient::new();
    let input = command(json!({"recipient": "r-1", "text": "hello"}));
    let _ = client.call(&product.connection(), "submit-message/v1", &input, RUN_ID, 3, Sending::Keyed).await;
    let _ = client.call(&product.connection(), "read-record/v1", &input, RUN_ID, 4, Sending::Read).await;
    let requests = product.requests();
    let [keyed, unkeyed] = requests.as_slice() else { panic!("{} requests", requests.len()) };

    assert_eq!(keyed.method, "POST");
    assert_eq!(keyed.path, "/sim/messaging/v1/operations/submit-message/v1");
    assert_eq!(keyed.header("idempotency-key").as_deref(), Some(input.idempotency_key.as_str()));
    assert_eq!(keyed.header("coordinator-run-id").as_deref(), Some(RUN_ID));
    assert_eq!(keyed.header("coordinator-attempt").as_deref(), Some("3"));
    assert_eq!(keyed.header("content-type").as_deref(), Some("application/json"));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&keyed.body).ok(), Some(input.input.clone()));

    assert_eq!(unkeyed.path, "/sim/messaging/v1/operations/read-record/v1");
    assert_eq!(unkeyed.header("idempotency-key"), None, "a read carries no key");
    assert_eq!(unkeyed.header("coordinator-run-id").as_deref(), Some(RUN_ID));
    assert_eq!(unkeyed.header("coordinator-attempt").as_deref(), Some("4"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_token_is_sent_as_is_without_a_token_request() {
    let product = Product::start(|_| reply(200, &[], ACCEPTED)).await;
    let conn = static_connection(product.base());
    let answer =
        ProductClient::new().call(&conn, "submit-message/v1", &command(json!({})), RUN_ID, 1, Sending::Keyed).await;
    assert!(matches!(answer, CallAnswer::Accepted { .. }));
    assert_eq!(product.requests()[0].header("authorization").as_deref(), Some("Bearer static-token"));
    assert!(product.token_requests().is_empty());

    // A static token that cannot be a header value is a credential failure, not a send.
    let conn = connection(product.base(), TokenSource::Static(Secret::new("two words")));
    let explained = ProductClient::new()
        .call_explained(&conn, "submit-message/v1", &command(json!({})), RUN_ID, 2, Sending::Keyed)
        .await;
    assert_eq!(explained.reason, Reason::Token(TokenError::Unusable));
    assert_eq!(product.requests().len(), 1);
}
