//! Definite "not done" (connection refused, no token, 503 with `Retry-After`)
//! is resent with backoff, and a lost answer to a read is read again: the run
//! finishes with one effect per key, or fails with `retry.exhausted` when the
//! step's policy is spent.

use serde_json::json;

use super::eager_stack;
use crate::support::deploy::ClosedPort;
use crate::support::on_runtime;
use crate::support::stack::{Stack, at, attempts, effect, in_connection, step};

const NOTICE: &str = "submit-message/v1";
const REVIEW: &str = "submit-review-request/v1";
const READ: &str = "read-record/v1";

/// Asserts notice-sent with one request and one effect for the review and the notice.
async fn sent_once(stack: &Stack, run: &str, notice_requests: u64) {
    let inspection = stack.settled(run).await;
    assert_eq!(
        (inspection["state"].as_str(), inspection["outcome"].as_str()),
        (Some("finished"), Some("notice-sent")),
        "{inspection}"
    );
    assert_eq!(stack.count_of("casework", REVIEW, run, "request-review").await, (1, 1));
    assert_eq!(stack.count_of("messaging", NOTICE, run, "send-notice").await, (notice_requests, 1));
}

#[test]
fn a_product_that_refuses_connections_is_retried_until_it_is_back() {
    on_runtime(async {
        // Messaging's baseUrl names a port where nothing listens yet.
        let closed = ClosedPort::reserve();
        let port = closed.port;
        let edit = move |yaml: String| {
            let sims = yaml.split("baseUrl: ").nth(1).and_then(|s| s.split("/sim/").next()).unwrap_or("").to_owned();
            in_connection(
                &yaml,
                "messaging",
                &format!("{sims}/sim/messaging"),
                &format!("http://127.0.0.1:{port}/sim/messaging"),
            )
        };
        let stack = eager_stack(&[], 5, Some(Box::new(edit))).await;
        let run = stack.admit("down-1").await;
        let refused = stack
            .until(&run, "send-notice retried after refused connections", |i| {
                at(i, "send-notice") && attempts(i, "send-notice") >= 2
            })
            .await;
        assert_eq!(refused["state"], "running", "a refused connection is retryable: {refused}");
        assert_eq!(effect(&refused, "send-notice"), "none", "{refused}");
        assert_eq!(step(&refused, "send-notice")["call"]["pending"], "attempt", "{refused}");
        assert!(stack.effects("messaging").await.is_empty(), "nothing reached messaging");

        // Messaging comes up on that port: the next attempt goes through.
        let _up = stack.open_port(closed).await;
        sent_once(&stack, &run, 1).await;
        // Attempt 1 met a refused connection (attempt 2 was queued); a later one went through.
        assert!(attempts(&stack.inspect(&run).await, "send-notice") >= 2);
    });
}

#[test]
fn a_503_storm_is_retried_and_the_notice_sent_once() {
    on_runtime(async {
        let stack = eager_stack(&[], 5, None).await;
        stack.fault("messaging", json!({"operation": NOTICE, "fault": "unavailable", "count": 2})).await;
        let run = stack.admit("storm-1").await;
        sent_once(&stack, &run, 3).await;
        let inspection = stack.inspect(&run).await;
        assert_eq!(attempts(&inspection, "send-notice"), 3, "{inspection}");
        assert_eq!(effect(&inspection, "send-notice"), "accepted");
    });
}

#[test]
fn a_503_storm_longer_than_max_attempts_fails_the_run_without_an_effect() {
    on_runtime(async {
        let retry = (
            "      recipient-opted-out: notice-refused\n",
            "      recipient-opted-out: notice-refused\n    retry: {maxAttempts: 3, initialIntervalSeconds: 1, backoffCoefficient: 1, maxIntervalSeconds: 1}\n",
        );
        let stack = eager_stack(&[retry], 5, None).await;
        stack.fault("messaging", json!({"operation": NOTICE, "fault": "unavailable", "count": 5})).await;
        let run = stack.admit("storm-2").await;
        let inspection = stack.settled(&run).await;
        assert_eq!(inspection["state"], "failed", "{inspection}");
        assert_eq!(inspection["failure"]["code"], "retry.exhausted", "{inspection}");
        assert_eq!(inspection["failure"]["step"], "send-notice", "{inspection}");
        assert_eq!(attempts(&inspection, "send-notice"), 3, "maxAttempts counts the first attempt");
        assert_eq!(effect(&inspection, "send-notice"), "none", "{inspection}");
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (3, 0));
        assert_eq!(stack.count_of("casework", REVIEW, &run, "request-review").await, (1, 1));
    });
}

#[test]
fn no_token_means_nothing_is_sent_until_the_token_endpoint_is_back() {
    on_runtime(async {
        // Messaging's connection gets its tokens from a port where nothing listens yet.
        let closed = ClosedPort::reserve();
        let port = closed.port;
        let edit = move |yaml: String| {
            let sims = yaml.split("tokenEndpoint: ").nth(1).and_then(|s| s.split('\n').next()).unwrap_or("").to_owned();
            in_connection(&yaml, "messaging", &sims, &format!("http://127.0.0.1:{port}/sim/token"))
        };
        let stack = eager_stack(&[], 5, Some(Box::new(edit))).await;
        let run = stack.admit("token-1").await;
        let waiting = stack
            .until(&run, "send-notice retried without a token", |i| {
                at(i, "send-notice") && attempts(i, "send-notice") >= 2
            })
            .await;
        assert_eq!(waiting["state"], "running", "{waiting}");
        assert_eq!(effect(&waiting, "send-notice"), "none", "{waiting}");
        assert!(stack.effects("messaging").await.is_empty(), "nothing was sent without a token");
        // The other connections got their tokens and worked meanwhile.
        assert_eq!(stack.count_of("casework", REVIEW, &run, "request-review").await, (1, 1));

        let _up = stack.open_port(closed).await;
        sent_once(&stack, &run, 1).await;
    });
}

#[test]
fn a_read_answered_after_the_timeout_is_read_again() {
    on_runtime(async {
        // Requests time out after 1 s; the registry answers the first read after 3 s.
        let stack = eager_stack(&[], 1, None).await;
        stack.fault("breg", json!({"operation": READ, "fault": "timeout", "delaySeconds": 3})).await;
        let run = stack.admit("slow-read-1").await;
        sent_once(&stack, &run, 1).await;
        let inspection = stack.inspect(&run).await;
        assert_eq!(attempts(&inspection, "read-application"), 2, "read again after the lost answer: {inspection}");
        assert_eq!(effect(&inspection, "read-application"), "accepted");
        assert_eq!(stack.count("breg", READ, None).await, (2, 0), "reads are never effects");
    });
}
