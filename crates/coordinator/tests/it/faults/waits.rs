//! Waits and cancellation against the running service: a decision that comes
//! after the wait's timeout takes the timeout path (withdraw, then read whether
//! a decision arrived anyway); a cancel during the wait follows the wait's
//! `onCancel` route; a cancel while a call is in flight lets the call settle
//! first and then ends the run.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::stack::{Stack, StackOptions, at, effect, path, step};
use crate::support::{GUARD, on_runtime};

const REVIEW: &str = "submit-review-request/v1";
const WITHDRAW: &str = "withdraw-review-request/v1";
const READ_REVIEW: &str = "read-review-request/v1";
const READ: &str = "read-record/v1";

/// Asserts `(state, outcome)` of a settled run.
async fn ended(stack: &Stack, run: &str, state: &str, outcome: Option<&str>) -> Value {
    let inspection = stack.settled(run).await;
    assert_eq!((inspection["state"].as_str(), inspection["outcome"].as_str()), (Some(state), outcome), "{inspection}");
    inspection
}

#[test]
fn a_decision_after_the_timeout_takes_the_timeout_path() {
    on_runtime(async {
        // The review wait times out after 2 s (deadline 120 s); reviews are decided by hand.
        let short = ("    timeoutSeconds: 1209600", "    observeEverySeconds: 1\n    timeoutSeconds: 2");
        let edits = vec![short, ("deadlineSeconds: 2592000", "deadlineSeconds: 120")];
        let stack = Stack::start(StackOptions { edits, ..StackOptions::default() }).await;

        // Nobody decides in time: the request is withdrawn, and a decision made later is refused.
        let withdrawn = stack.admit("late-1").await;
        let done = ended(&stack, &withdrawn, "finished", Some("withdrawn-after-timeout")).await;
        let expected = [
            "read-application",
            "request-review",
            "await-review",
            "withdraw-review",
            "read-late-decision",
            "route-late-decision",
            "withdrawn-after-timeout",
        ];
        assert_eq!(path(&done), expected);
        assert_eq!(step(&done, "await-review")["wait"]["resolution"], "timed-out", "{done}");
        assert_eq!(effect(&done, "withdraw-review"), "accepted");
        let (status, answer) = stack.decide("review-1", "approved").await;
        assert_eq!((status, answer["code"].as_str()), (409, Some("withdrawn")), "{answer}");
        stack.nudge("review-1").await;
        assert_eq!(stack.count_of("casework", REVIEW, &withdrawn, "request-review").await, (1, 1));
        assert_eq!(stack.count_of("casework", WITHDRAW, &withdrawn, "withdraw-review").await, (1, 1));
        let after = stack.inspect(&withdrawn).await;
        assert_eq!(
            (after["state"].as_str(), after["outcome"].as_str()),
            (Some("finished"), Some("withdrawn-after-timeout"))
        );

        // The decision arrives after the timeout, while casework answers the withdrawal with 503:
        // the withdrawal is refused `already-decided` (declared: the route continues) and the
        // late decision is read.
        stack.fault("casework", json!({"operation": WITHDRAW, "fault": "unavailable", "count": 2})).await;
        let decided = stack.admit("late-2").await;
        let timed_out = stack.until(&decided, "the wait timed out", |i| at(i, "withdraw-review")).await;
        assert_eq!(step(&timed_out, "await-review")["wait"]["resolution"], "timed-out", "{timed_out}");
        let (status, answer) = stack.decide("review-2", "approved").await;
        assert_eq!(status, 200, "{answer}");
        let done = ended(&stack, &decided, "finished", Some("decided-after-timeout")).await;
        let withdraw = step(&done, "withdraw-review");
        assert_eq!(withdraw["call"]["effect"], "refused", "{done}");
        assert_eq!(withdraw["call"]["refusal"], "already-decided", "{done}");
        assert_eq!(effect(&done, "read-late-decision"), "accepted");
        assert_eq!(stack.view(&decided).await["output"]["decision"], "approved");
        assert_eq!(stack.count_of("casework", REVIEW, &decided, "request-review").await, (1, 1));
        assert_eq!(
            stack.count_of("casework", WITHDRAW, &decided, "withdraw-review").await,
            (3, 0),
            "two 503s and a refusal: no effect"
        );
        assert_eq!(stack.count("casework", READ_REVIEW, None).await, (2, 0), "one late read per run");
        assert!(stack.effects("messaging").await.is_empty(), "no notice after a timeout");
    });
}

#[test]
fn cancel_during_the_wait_follows_the_cancel_route() {
    on_runtime(async {
        let stack = Stack::start(StackOptions::default()).await;
        let run = stack.admit("cancel-wait-1").await;
        stack.until(&run, "awaiting the review", |i| at(i, "await-review")).await;
        let (status, answer) = stack.cancel(&run).await;
        assert_eq!(status, 202, "{answer}");

        let done = ended(&stack, &run, "cancelled-after-effect", Some("withdrawn-on-cancel")).await;
        let expected =
            ["read-application", "request-review", "await-review", "withdraw-on-cancel", "withdrawn-on-cancel"];
        assert_eq!(path(&done), expected);
        assert_eq!(step(&done, "await-review")["wait"]["resolution"], "cancelled", "{done}");
        assert_eq!(effect(&done, "withdraw-on-cancel"), "accepted");
        assert_eq!(stack.view(&run).await["output"], Value::Null, "the outcome publishes no output");
        assert_eq!(stack.count_of("casework", REVIEW, &run, "request-review").await, (1, 1));
        assert_eq!(stack.count_of("casework", WITHDRAW, &run, "withdraw-on-cancel").await, (1, 1));
        let (status, answer) = stack.decide("review-1", "approved").await;
        assert_eq!((status, answer["code"].as_str()), (409, Some("withdrawn")), "the request was withdrawn: {answer}");
        assert!(stack.effects("messaging").await.is_empty());
    });
}

#[test]
fn cancel_while_a_call_is_in_flight_settles_the_call_first() {
    on_runtime(async {
        let stack = Stack::start(StackOptions::default()).await;

        // Casework acts at once and answers the review request after 2 s (requests time out after 5 s).
        stack.fault("casework", json!({"operation": REVIEW, "fault": "timeout", "delaySeconds": 2})).await;
        let run = stack.admit("in-flight-1").await;
        let key = format!("{run}:request-review");
        let started = std::time::Instant::now();
        while stack.count("casework", REVIEW, Some(&key)).await != (1, 1) {
            assert!(started.elapsed() < GUARD, "the review request never reached casework");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, answer) = stack.cancel(&run).await;
        assert_eq!((status, answer["state"].as_str()), (202, Some("cancel-requested")), "{answer}");
        let settling = stack.inspect(&run).await;
        assert_eq!(settling["cancelRequested"], true, "{settling}");
        assert_eq!(step(&settling, "request-review")["call"]["pending"], "attempt", "still in flight: {settling}");

        // The answer is applied (the effect is accepted, not forgotten), then the run ends:
        // the call step has no onCancel route, so nothing more is dispatched.
        let done = ended(&stack, &run, "cancelled-after-effect", None).await;
        assert_eq!(effect(&done, "request-review"), "accepted", "{done}");
        assert_eq!(path(&done), ["read-application", "request-review"], "the wait was never entered");
        assert_eq!(stack.count_of("casework", REVIEW, &run, "request-review").await, (1, 1));

        // The same with a read in flight: no mutation was accepted, so the run is just `cancelled`.
        stack.fault("breg", json!({"operation": READ, "fault": "timeout", "delaySeconds": 2})).await;
        let reading = stack.admit("in-flight-2").await;
        let started = std::time::Instant::now();
        while stack.count("breg", READ, None).await.0 < 2 {
            assert!(started.elapsed() < GUARD, "the second read never reached the registry");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, answer) = stack.cancel(&reading).await;
        assert_eq!((status, answer["state"].as_str()), (202, Some("cancel-requested")), "{answer}");
        let done = ended(&stack, &reading, "cancelled", None).await;
        assert_eq!(effect(&done, "read-application"), "accepted", "{done}");
        assert_eq!(path(&done), ["read-application"]);
        assert_eq!(stack.count_of("casework", REVIEW, &reading, "request-review").await, (0, 0), "nothing dispatched");
    });
}
