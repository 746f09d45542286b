//! A connection's shared pace, watched from the product's side (the
//! simulator's `GET /v1/load`: when each request arrived): a `429` with
//! `Retry-After: 5` stops every run's requests to that product for 5 s, not
//! only the run that got it; a product answering `503` to everything opens
//! the connection's breaker, after which it receives only probes, one per
//! interval; the first probe answered closes it, and every run finishes with
//! its notice sent once. Opening and closing are journaled and shown by
//! `GET /v1/connections`, `/readyz` and `coordinator_connection_state`. A
//! product that goes down in the middle of a load receives only probes from
//! the first probe on, and every run finishes once it is back, each notice
//! sent once. Limits (`concurrency`, `ratePerSecond`) hold at the product.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::deploy::EAGER;
use crate::support::stack::{Stack, StackOptions, attempts, with_field};
use crate::support::{get, journal, metric, metrics, on_runtime, until_state};

const NOTICE: &str = "submit-message/v1";

/// Messaging's requests so far, each arrival in ms since the epoch.
fn arrivals(stack: &Stack) -> Vec<u64> {
    stack.sims.sims.messaging.load().arrivals
}

/// The messaging connection as `GET /v1/connections` shows it.
async fn messaging(stack: &Stack) -> Value {
    let (status, listed) = get(&format!("{}/v1/connections", stack.url)).await;
    assert_eq!(status, 200, "{listed}");
    let found = listed["connections"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "messaging")).cloned();
    found.unwrap_or_else(|| panic!("messaging is listed: {listed}"))
}

/// Polls `GET /v1/connections` until messaging's breaker is `state`.
async fn until_breaker(stack: &Stack, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + crate::support::GUARD;
    loop {
        let connection = messaging(stack).await;
        if connection["state"] == state {
            return connection;
        }
        assert!(tokio::time::Instant::now() < deadline, "messaging's breaker never became {state}: {connection}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until messaging has received `n` requests.
async fn until_arrivals(stack: &Stack, n: usize) {
    let deadline = tokio::time::Instant::now() + crate::support::GUARD;
    while arrivals(stack).len() < n {
        assert!(tokio::time::Instant::now() < deadline, "messaging never received {n} requests");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stack_options(edit_runtime: Option<Box<dyn FnOnce(String) -> String>>) -> StackOptions {
    StackOptions {
        edits: vec![EAGER],
        auto_decide: Some(Duration::from_millis(50)),
        edit_runtime,
        ..StackOptions::default()
    }
}

#[test]
fn a_retry_after_stops_every_runs_requests_to_that_product() {
    on_runtime(async {
        let stack = Stack::start(stack_options(None)).await;
        let limited =
            json!({"operation": NOTICE, "fault": "unavailable", "status": 429, "retryAfterSeconds": 5, "count": 1});
        stack.fault("messaging", limited).await;
        let first = stack.admit("hold-1").await;
        // The 429 is answered and recorded before the run's retry is queued.
        stack.until(&first, "the notice refused with 429, its retry queued", |i| attempts(i, "send-notice") >= 2).await;
        let held = messaging(&stack).await;
        assert!(held["holdUntil"].is_i64(), "the connection is held: {held}");
        let others = [stack.admit("hold-2").await, stack.admit("hold-3").await];
        for run in std::iter::once(&first).chain(&others) {
            until_state(&stack.url, run, "finished").await;
        }
        let seen = arrivals(&stack);
        let limited_at = seen.first().copied().unwrap_or_default();
        let early: Vec<u64> = seen.iter().skip(1).filter(|&&at| at < limited_at + 5_000).copied().collect();
        assert!(early.is_empty(), "requests within 5 s of the 429 at {limited_at}: {early:?}");
        assert_eq!(seen.len(), 4, "the 429, then each run's notice once: {seen:?}");
    });
}

#[test]
fn a_product_down_gets_only_probes_until_it_answers_again() {
    on_runtime(async {
        let breaker =
            |yaml: String| with_field(&yaml, "messaging", "breaker: {openAfterFailures: 2, probeEverySeconds: 2}");
        let stack = Stack::start(stack_options(Some(Box::new(breaker)))).await;
        stack.fault("messaging", json!({"operation": NOTICE, "fault": "unavailable", "count": 1_000_000})).await;
        let first = stack.admit("down-1").await;
        let open = until_breaker(&stack, "open").await;
        let opened_at = open["breaker"]["since"].as_i64().unwrap_or_default();
        assert!(open["breaker"]["why"].as_str().is_some_and(|w| w.contains("503")), "{open}");
        let (_, ready) = get(&format!("{}/readyz", stack.url)).await;
        assert!(
            ready["connections"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["name"] == "messaging" && c["state"] != "closed")),
            "{ready}"
        );
        let state = metric(&metrics(&stack.url).await, "coordinator_connection_state{connection=\"messaging\"}");
        assert!(matches!(state, Some(1.0 | 2.0)), "open (1) or probing (2): {state:?}");

        // A second run waits behind the breaker too; the product sees only probes.
        let second = stack.admit("down-2").await;
        let before = arrivals(&stack).len();
        until_arrivals(&stack, before + 2).await;
        let after_open: Vec<u64> =
            arrivals(&stack).into_iter().filter(|&at| i64::try_from(at).unwrap_or(0) > opened_at).collect();
        for pair in after_open.windows(2) {
            assert!(pair[1] >= pair[0] + 2_000, "probes closer than 2 s apart: {after_open:?}");
        }

        // The product is back: the next probe closes the breaker and both runs finish, each notice sent once.
        let cleared =
            reqwest::Client::new().delete(format!("{}/sim/messaging/v1/faults", stack.sims.base)).send().await;
        assert!(cleared.is_ok_and(|r| r.status().is_success()));
        for run in [&first, &second] {
            until_state(&stack.url, run, "finished").await;
        }
        assert_eq!(messaging(&stack).await["state"], "closed");
        let accepted = stack.effects("messaging").await;
        assert_eq!(accepted.len(), 2, "{accepted:?}");
        let entries = journal(&stack.url, None).await;
        let breaker_lines: Vec<&str> =
            entries.iter().filter(|e| e["kind"] == "connection").filter_map(|e| e["detail"].as_str()).collect();
        assert_eq!(breaker_lines.len(), 2, "opened and closed: {breaker_lines:?}");
        assert!(breaker_lines[0].starts_with("connection messaging: breaker opened (the product answered HTTP 503)"));
        assert!(breaker_lines[1].starts_with("connection messaging: breaker closed"));
    });
}

/// The stack with `limits` written on messaging.
async fn limited_stack(limits: &'static str) -> Stack {
    let edit = move |yaml: String| with_field(&yaml, "messaging", &format!("limits: {limits}"));
    Stack::start(stack_options(Some(Box::new(edit)))).await
}

#[test]
fn a_concurrency_limit_holds_at_the_product() {
    on_runtime(async {
        let stack = limited_stack("{concurrency: 2}").await;
        // Each notice is answered a second late (within the request timeout): requests overlap unless held back.
        stack
            .fault("messaging", json!({"operation": NOTICE, "fault": "timeout", "delaySeconds": 1, "count": 1000}))
            .await;
        let mut runs = Vec::new();
        for n in 0..6 {
            runs.push(stack.admit(&format!("concurrency-{n}")).await);
        }
        for run in &runs {
            until_state(&stack.url, run, "finished").await;
        }
        let load = stack.sims.sims.messaging.load();
        assert_eq!(load.requests, 6, "each notice once: {load:?}");
        assert!(load.max_in_flight <= 2, "at most 2 in flight at messaging: {load:?}");
        assert_eq!(messaging(&stack).await["state"], "closed");
    });
}

#[test]
fn a_rate_limit_holds_at_the_product_over_the_test() {
    on_runtime(async {
        let stack = limited_stack("{ratePerSecond: 2, burst: 1}").await;
        let start = coordinator::engine::now_ms();
        let mut runs = Vec::new();
        for n in 0..6 {
            runs.push(stack.admit(&format!("rate-{n}")).await);
        }
        for run in &runs {
            until_state(&stack.url, run, "finished").await;
        }
        let end = coordinator::engine::now_ms();
        let received = arrivals(&stack).len();
        assert_eq!(received, 6, "each notice once");
        // A bucket of 1 refilled at 2 a second allows at most 1 + 2 × the seconds the test took.
        #[allow(clippy::cast_precision_loss, reason = "a test's milliseconds")]
        let allowed = 1.0 + 2.0 * (end - start) as f64 / 1000.0;
        #[allow(clippy::cast_precision_loss, reason = "six requests")]
        let sent = received as f64;
        assert!(sent <= allowed, "{received} requests in {} ms: the bucket allows {allowed}", end - start);
    });
}

/// Runs admitted while messaging goes down and comes back.
const LOAD: usize = 30;

#[test]
fn a_product_down_in_the_middle_of_a_load_gets_only_probes_and_every_run_finishes() {
    on_runtime(async {
        let breaker =
            |yaml: String| with_field(&yaml, "messaging", "breaker: {openAfterFailures: 3, probeEverySeconds: 2}");
        let stack = Stack::start(stack_options(Some(Box::new(breaker)))).await;
        let mut runs = Vec::new();
        for n in 0..LOAD / 3 {
            runs.push(stack.admit(&format!("before-{n}")).await);
        }
        until_arrivals(&stack, 1).await;
        // Down: every notice answered 503, while more runs come in.
        stack.fault("messaging", json!({"operation": NOTICE, "fault": "unavailable", "count": 1_000_000})).await;
        for n in LOAD / 3..LOAD {
            runs.push(stack.admit(&format!("during-{n}")).await);
        }
        let open = until_breaker(&stack, "open").await;
        let probe_at = open["breaker"]["since"].as_i64().unwrap_or_default() + 2_000;
        // Two probes at least, then the product is back.
        let deadline = tokio::time::Instant::now() + crate::support::GUARD;
        while arrivals(&stack).iter().filter(|&&at| i64::try_from(at).unwrap_or(0) >= probe_at).count() < 2 {
            assert!(tokio::time::Instant::now() < deadline, "no probes");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let cleared =
            reqwest::Client::new().delete(format!("{}/sim/messaging/v1/faults", stack.sims.base)).send().await;
        let back_at = coordinator::engine::now_ms();
        assert!(cleared.is_ok_and(|r| r.status().is_success()));
        for run in &runs {
            until_state(&stack.url, run, "finished").await;
        }
        let probes: Vec<u64> = arrivals(&stack)
            .into_iter()
            .filter(|&at| i64::try_from(at).is_ok_and(|at| at >= probe_at && at < back_at))
            .collect();
        for pair in probes.windows(2) {
            assert!(pair[1] >= pair[0] + 2_000, "more than the probes while the product was down: {probes:?}");
        }
        let accepted = stack.effects("messaging").await;
        assert_eq!(accepted.len(), LOAD, "each notice sent once: {accepted:?}");
        assert!(accepted.iter().all(|e| e["effects"] == 1), "{accepted:?}");
    });
}
