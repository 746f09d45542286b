//! Distributed traces (docs/reference/runtime.md, `telemetry`): an OTLP receiver in the test
//! process gets the flagship run's spans — its root span, every decision and
//! every product request — all in one trace whose id is the run id, each
//! child linked to the root; a run admitted with a `traceparent` continues
//! the caller's trace; the simulators see a `traceparent` on the requests made
//! for a run, naming the span of the request. Over gRPC and HTTP/protobuf.

use std::time::{Duration, Instant};

use coordinator::Drained;

use crate::support::otlp::{Received, Receiver};
use crate::support::stack::{Stack, StackOptions, at};
use crate::support::{GUARD, TOKEN, admission, on_runtime};

/// A caller's trace context, as an upstream service would send it.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

async fn stack_exporting_to(receiver: &Receiver, protocol: &str) -> Stack {
    let endpoint = receiver.endpoint.clone();
    let protocol = protocol.to_owned();
    // Reviews are decided by the test ([`finished`]).
    Stack::start(StackOptions {
        edit_runtime: Some(Box::new(move |text| {
            format!("{text}telemetry: {{otlp: {{endpoint: \"{endpoint}\", protocol: {protocol}}}, serviceName: coordinator-under-test}}\n")
        })),
        ..StackOptions::default()
    })
    .await
}

/// Admits the flagship's sample input with a `traceparent`; returns the run id.
async fn admit_traced(stack: &Stack, key: &str, traceparent: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/runs", stack.url))
        .bearer_auth(TOKEN)
        .header("traceparent", traceparent)
        .json(&admission(&stack.revision, key))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status().as_u16(), 201);
    let admitted: serde_json::Value = response.json().await.unwrap_or_default();
    admitted["runId"].as_str().unwrap_or_else(|| panic!("{admitted}")).to_owned()
}

/// Carries the run to its end: once it waits for its review, the reviewer
/// decides (casework announces the decision, which brings the observation
/// forward; a decision announced before the wait began would only be seen at
/// casework's next observation, 15 minutes on).
async fn finished(stack: &Stack, run: &str) {
    stack.until(run, "waiting for the review", |i| at(i, "await-review")).await;
    for reference in stack.sims.sims.casework.references() {
        let (status, answer) = stack.decide(&reference, "approved").await;
        assert_eq!(status, 200, "{answer}");
    }
    let view = stack.until(run, "finished", |v| v["state"] == "finished").await;
    assert_eq!(view["outcome"], "notice-sent");
}

/// Drains the service (which exports the last spans), then waits until the receiver has the run's root span.
async fn drained_with_root(stack: &mut Stack, receiver: &Receiver, runs: &[&str]) -> Vec<Received> {
    assert_eq!(stack.service.drain().await, Drained::Clean);
    let started = Instant::now();
    loop {
        let spans = receiver.spans();
        let roots = runs
            .iter()
            .filter(|run| {
                spans
                    .iter()
                    .any(|s| s.name == "run" && s.attributes.get("coordinator.run_id") == Some(&(**run).to_owned()))
            })
            .count();
        if roots == runs.len() {
            return spans;
        }
        assert!(started.elapsed() < GUARD, "the root spans never arrived; got {spans:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn of_trace<'a>(spans: &'a [Received], trace: &str) -> Vec<&'a Received> {
    spans.iter().filter(|s| s.trace_id == trace).collect()
}

/// The run's spans form one tree: a root `run` span and every other span its child.
fn one_tree<'a>(spans: &[&'a Received], run: &str) -> &'a Received {
    let roots: Vec<&&Received> = spans.iter().filter(|s| s.name == "run").collect();
    assert_eq!(roots.len(), 1, "one root span: {spans:#?}");
    let root = *roots[0];
    for span in spans.iter().filter(|s| s.name != "run") {
        assert_eq!(span.parent_id, root.span_id, "{} hangs from the run's root: {span:#?}", span.name);
        assert_eq!(span.attributes.get("coordinator.run_id").map(String::as_str), Some(run), "{span:#?}");
    }
    assert_eq!(root.attributes.get("coordinator.state").map(String::as_str), Some("finished"));
    assert_eq!(root.attributes.get("coordinator.workflow").map(String::as_str), Some("reviewed-notice"));
    root
}

fn names<'a>(spans: &[&'a Received]) -> Vec<&'a str> {
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names
}

#[test]
fn the_flagship_run_is_one_trace_of_its_decisions_and_requests_over_grpc() {
    on_runtime(async {
        let receiver = Receiver::grpc().await;
        let mut stack = stack_exporting_to(&receiver, "grpc").await;
        let run = stack.admit("traced-1").await;
        finished(&stack, &run).await;
        let spans = drained_with_root(&mut stack, &receiver, &[&run]).await;

        let trace = run.replace('-', "");
        let mine = of_trace(&spans, &trace);
        let root = one_tree(&mine, &run);
        assert!(root.parent_id.is_empty(), "a run admitted without a traceparent starts its own trace");
        assert!(mine.iter().all(|s| s.service == "coordinator-under-test"), "serviceName");
        let names = names(&mine);
        for expected in ["decide admitted", "decide call-answered", "product attempt", "run"] {
            assert!(names.contains(&expected), "{expected} missing from {names:?}");
        }
        let attempts: Vec<&&Received> = mine.iter().filter(|s| s.name == "product attempt").collect();
        let mut operations: Vec<&str> =
            attempts.iter().filter_map(|s| s.attributes.get("coordinator.operation").map(String::as_str)).collect();
        operations.sort_unstable();
        assert_eq!(operations, ["read-record/v1", "submit-message/v1", "submit-review-request/v1"]);
        for attempt in &attempts {
            assert_eq!(
                attempt.attributes.get("coordinator.answer").map(String::as_str),
                Some("accepted"),
                "{attempt:#?}"
            );
            assert!(attempt.attributes.contains_key("coordinator.connection"), "{attempt:#?}");
            assert_eq!(
                attempt.attributes.get("coordinator.reason").map(String::as_str),
                Some("the product answered HTTP 200")
            );
        }
        let decisions: Vec<&&Received> = mine.iter().filter(|s| s.name.starts_with("decide ")).collect();
        assert!(
            decisions.iter().all(|d| d.attributes.get("coordinator.outcome").map(String::as_str) == Some("applied"))
        );

        // Each product saw the run's trace, naming the span of the request it got.
        let attempt_ids: Vec<&str> = attempts.iter().map(|s| s.span_id.as_str()).collect();
        for (product, seen) in [
            ("breg", stack.sims.sims.breg.traceparents()),
            ("casework", stack.sims.sims.casework.traceparents()),
            ("messaging", stack.sims.sims.messaging.traceparents()),
        ] {
            let parsed: Vec<(&str, &str, &str)> = seen
                .iter()
                .filter_map(|t| {
                    let parts: Vec<&str> = t.split('-').collect();
                    (parts.len() == 4).then(|| (parts[1], parts[2], parts[3]))
                })
                .collect();
            assert!(!parsed.is_empty(), "{product} saw no traceparent");
            assert!(parsed.iter().all(|(t, _, flags)| *t == trace && *flags == "01"), "{product}: {seen:?}");
            assert!(
                parsed.iter().any(|(_, parent, _)| attempt_ids.contains(parent)),
                "{product}: no request names an exported attempt span: {seen:?}"
            );
        }

        // The API's own requests are server spans, and claim rounds have traces of their own.
        assert!(spans.iter().any(|s| s.name == "POST /v1/runs"
            && s.attributes.get("http.response.status_code").map(String::as_str) == Some("201")
            && s.attributes.get("enduser.id").map(String::as_str) == Some("operator")));
        assert!(spans.iter().any(|s| s.name == "claim round" && s.trace_id != trace));
    });
}

#[test]
fn a_run_admitted_with_a_traceparent_continues_the_callers_trace_over_http() {
    on_runtime(async {
        let receiver = Receiver::http().await;
        let mut stack = stack_exporting_to(&receiver, "http/protobuf").await;
        let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
        let run = admit_traced(&stack, "traced-2", &caller).await;
        finished(&stack, &run).await;
        let spans = drained_with_root(&mut stack, &receiver, &[&run]).await;
        let mine: Vec<&Received> = of_trace(&spans, CALLER_TRACE)
            .into_iter()
            .filter(|s| s.attributes.get("coordinator.run_id") == Some(&run))
            .collect();
        let root = one_tree(&mine, &run);
        assert_eq!(root.parent_id, CALLER_SPAN, "the run's root span continues the caller's span");
        assert!(names(&mine).contains(&"product attempt"));
        let request = spans.iter().find(|s| s.name == "POST /v1/runs");
        assert!(
            request.is_some_and(|r| r.trace_id == CALLER_TRACE && r.parent_id == CALLER_SPAN),
            "the admission request continues the caller's trace too: {request:#?}"
        );
        assert!(stack.sims.sims.messaging.traceparents().iter().all(|t| t.contains(CALLER_TRACE)));
    });
}
