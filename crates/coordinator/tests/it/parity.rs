//! Parity between `coordinatorctl test` and the running service: each compared
//! case of the flagship's `scenarios.yaml` runs BOTH through the scenario
//! runner behind `coordinatorctl test` (`coordinator_core::scenario`, in
//! process, virtual clock, scripted replies) AND through `coordinator serve`
//! (the same package: the revisions are asserted equal) against the simulators
//! scripted to give the same replies, and the two must agree on the path, the
//! final state, the outcome, the failure, the published output (product-made
//! ids aside), the effect of every call step and the observations of the wait.
//! The simulators' counts must agree too: an accepted mutation has exactly one
//! effect under its key, a refused or undispatched one none, and no key more
//! than one.
//!
//! The script is translated, not restated: a call's `refused` reply becomes a
//! `refuse` fault with its code, `retryable` an `unavailable` fault (503),
//! `uncertain` a `drop-response-after-effect` fault (mutations; a
//! `drop-request` fault, which loses the request without acting, when the
//! script's receipt then says `not-found`) or a `timeout` fault past the 5 s
//! request timeout (reads), `accepted` and a `found` or `not-found` receipt are
//! the simulators' own answers. Virtual time passes on the service's clock
//! (`Engine::advance_clock`): each `pending` observation comes when the clock
//! is moved to the wait's next observation; once the script observes nothing
//! more, the clock is moved to the wait's timeout (the reviewer deciding just
//! before when the late read finds a decision, so that the withdrawal is
//! casework's own `already-decided` refusal and the late read its own answer);
//! and a call the script answers with nothing but `retryable` is left to the
//! run deadline, the clock moved there after its first refused attempt (the
//! retries in between are not each replayed, so attempts are not compared).
//! Each `complete` observation is a completion notification (the reviewer
//! deciding first); operator actions are the API's `reconcile`/`retry-same`; a
//! scripted cancel comes once the script has nothing more for the run before it.
//!
//! Every case of the flagship is compared ([`NOT_COMPARED`] is empty):
//! `approved-and-notice-sent` (the happy path), `recipient-opted-out`,
//! `review-refused` (a casework refusal), `rejected` (a casework decision),
//! `decided-after-timeout` and `withdrawn-after-timeout` (1 343 observations
//! over 14 days, then the timeout), `cancel-during-the-wait`,
//! `cancel-after-a-decision-arrived`, `uncertain-notice-settled-by-reconcile`,
//! `receipt-not-found-leaves-the-effect-unknown`,
//! `uncertain-notice-settled-by-retry-same`,
//! `completion-nudge-brings-the-observation-forward`, `lost-read-is-read-again`,
//! `run-deadline` (30 days), `refusal-that-is-not-declared`,
//! `uncertain-withdrawal-on-the-cancel-route-needs-an-operator`,
//! `a-scripted-cancel-ends-a-run-waiting-for-an-operator`.
//! Elapsed times are never compared: virtual seconds are not wall-clock ones.

use std::collections::VecDeque;
use std::time::Duration;

use coordinator::process::project_dir::ProjectDir;
use coordinator_core::check::check_project;
use coordinator_core::decode::{self, Decoder};
use coordinator_core::machine::Settings;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::time::Instant;
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::run::EffectState;
use coordinator_core::model::scenarios::{Case, OperatorAction, ReceiptResult, Reply};
use coordinator_core::scenario::{self, CaseReport};
use coordinator_core::yaml;
use coordinator_functions::Limits;
use serde_json::{Value, json};

use crate::support::stack::{Stack, StackOptions, at, effect, path, step};
use crate::support::{self, GUARD, on_runtime};

/// Cases the service does not reproduce, and why (none, now).
const NOT_COMPARED: &[(&str, &str)] = &[];

/// The only review request of a case's fresh simulators.
const REVIEW: &str = "review-1";

/// The flagship compiled as `coordinatorctl test` compiles it, and its scenarios.
fn flagship() -> (Workflow, Vec<Case>) {
    let project = support::flagship();
    let report = check_project(&ProjectDir::new(project.clone())).unwrap_or_else(|e| panic!("check: {e}"));
    let Some(checked) = report.checked else { panic!("the flagship was refused: {:?}", report.diagnostics) };
    let workflow = Workflow::compile(checked.definition, Limits::default()).unwrap_or_else(|e| panic!("compile: {e}"));
    let text = std::fs::read_to_string(project.join("scenarios.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let root = yaml::parse("scenarios.yaml", &text).unwrap_or_else(|e| panic!("scenarios.yaml: {e:?}"));
    let mut decoder = Decoder::new("scenarios.yaml");
    let file = decode::scenarios::decode(&mut decoder, &root);
    let Some(file) = file.filter(|_| decoder.diagnostics.is_empty()) else {
        panic!("scenarios.yaml: {:?}", decoder.diagnostics)
    };
    (workflow, file.cases)
}

/// The case run by the scenario runner, as `coordinatorctl test` runs it.
fn run_scripted(workflow: &Workflow, case: &Case) -> CaseReport {
    coordinator_functions::with_call_stack(&Limits::default(), || {
        scenario::run_case(workflow, case, &Settings::default())
    })
}

#[test]
fn every_scenario_is_compared_or_excluded_with_a_reason() {
    let (workflow, cases) = flagship();
    let compared = COMPARED.iter().map(|(_, id)| *id);
    let excluded = NOT_COMPARED.iter().map(|(id, _)| *id);
    let mut listed: Vec<&str> = compared.chain(excluded).collect();
    listed.sort_unstable();
    let mut ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(listed, ids, "every case is compared or excluded, once");
    for case in &cases {
        let report = run_scripted(&workflow, case);
        assert!(report.passed, "{}: {:?}", case.id, report.problem);
    }
}

/// `(product, operation without the product, effect)` of a call step.
fn target(workflow: &Workflow, step: &str) -> Option<(String, String, Effect)> {
    let (_, pinned) = workflow.operation_of(step)?;
    let (product, operation) = pinned.operation.split_once('.')?;
    Some((product.to_owned(), operation.to_owned(), pinned.descriptor.effect))
}

/// The decision the case's late read finds (`read-late-decision` answers
/// `state: decided`): the reviewer decides just before the wait times out, so
/// that the withdrawal after the timeout is casework's own `already-decided`.
fn late_decision(case: &Case) -> Option<String> {
    let replies = case.replies.get("read-late-decision")?;
    replies.iter().find_map(|reply| match reply {
        Reply::Accepted { output, .. } if output["state"] == "decided" => {
            Some(output["decision"].as_str().unwrap_or("approved").to_owned())
        }
        _ => None,
    })
}

/// Queues, per operation, the faults that make the simulators give the case's call replies.
async fn script_products(stack: &Stack, workflow: &Workflow, case: &Case) {
    let decided_late = late_decision(case).is_some();
    for (name, replies) in &case.replies {
        let Some((product, operation, kind)) = target(workflow, name) else { continue };
        let mut accepted = false;
        for (i, reply) in replies.iter().enumerate() {
            let count = reply.times();
            let lost_before_acting =
                matches!(replies.get(i + 1), Some(Reply::Receipt { result: ReceiptResult::NotFound, .. }));
            let fault = match reply {
                Reply::Accepted { .. }
                | Reply::Receipt { result: ReceiptResult::Found | ReceiptResult::NotFound, .. } => {
                    accepted = true;
                    continue;
                }
                Reply::Refused { code } if decided_late && name == "withdraw-review" => {
                    assert_eq!(code, "already-decided", "{}: step {name}: a decided review refuses so", case.id);
                    accepted = true;
                    continue;
                }
                Reply::Refused { code } => {
                    json!({"operation": operation, "fault": "refuse", "code": code, "status": 409})
                }
                Reply::Retryable { .. } => json!({"operation": operation, "fault": "unavailable", "count": count}),
                Reply::Uncertain { .. } if kind == Effect::Read => {
                    json!({"operation": operation, "fault": "timeout", "delaySeconds": 10, "count": count})
                }
                Reply::Uncertain { .. } if lost_before_acting => {
                    json!({"operation": operation, "fault": "drop-request", "count": count})
                }
                Reply::Uncertain { .. } => {
                    json!({"operation": operation, "fault": "drop-response-after-effect", "count": count})
                }
                other => panic!("{}: step {name}: no simulator fault gives `{}`", case.id, other.type_name()),
            };
            assert!(!accepted, "{}: step {name}: a fault after the product's own answer cannot be queued", case.id);
            stack.fault(&product, fault).await;
        }
    }
}

/// Moves the service's clock forward to `instant` (an RFC 3339 instant of the
/// inspection): the scenario's virtual time passing.
fn travel_to(stack: &Stack, instant: &Value) {
    travel_to_ms(stack, ms(instant));
}

/// Moves the service's clock forward to `target` (ms since the Unix epoch), if it is ahead.
fn travel_to_ms(stack: &Stack, target: i64) {
    let engine = &stack.service.engine;
    let ahead = u64::try_from(target.saturating_sub(engine.now())).unwrap_or(0);
    engine.advance_clock(Duration::from_millis(ahead));
}

/// An RFC 3339 instant of the inspection, in ms since the Unix epoch.
fn ms(instant: &Value) -> i64 {
    let text = instant.as_str().unwrap_or_else(|| panic!("not an instant: {instant}"));
    let Some(instant) = Instant::parse_rfc3339(text) else { panic!("not an instant: {text}") };
    instant.0
}

/// How close to the run deadline the clock jumps before each retry left is replayed
/// (more than the longest backoff, 300 s, so the last retries before it happen).
const BEFORE_DEADLINE_MS: i64 = 600_000;

/// Runs the case through the service, answering as the script says; returns the final inspection.
async fn drive(stack: &Stack, case: &Case) -> (String, Value) {
    let mut observations: VecDeque<Reply> = VecDeque::new();
    for reply in case.replies.get("await-review").into_iter().flatten() {
        observations.extend(std::iter::repeat_n(reply.clone(), reply.times() as usize));
    }
    let mut operator: Vec<(String, VecDeque<OperatorAction>)> =
        case.operator.iter().map(|(s, a)| (s.clone(), a.actions().into())).collect();
    let mut cancel = case.cancel_at_seconds.is_some();
    let run = stack.admit_input(&case.id, case.input.clone()).await;
    let late_decision = late_decision(case);
    // The guard restarts whenever the script moves on: a long case is not a stuck one.
    let mut started = std::time::Instant::now();
    loop {
        assert!(started.elapsed() < GUARD, "{}: the run did not settle", case.id);
        let inspection = stack.inspect(&run).await;
        let state = inspection["state"].as_str().unwrap_or_default().to_owned();
        if !matches!(state.as_str(), "running" | "attention" | "cancel-requested") {
            return (run, inspection);
        }
        if let Some(attention) = inspection["attention"]["step"].as_str() {
            let scripted = operator.iter_mut().find(|(s, _)| s == attention).and_then(|(_, a)| a.pop_front());
            let Some(action) = scripted.or(cancel.then_some(OperatorAction::Cancel)) else {
                // Waiting for an operator the case does not script: it stops here.
                return (run, inspection);
            };
            match action {
                OperatorAction::Cancel => {
                    cancel = false;
                    let (status, answer) = stack.cancel(&run).await;
                    assert_eq!(status, 202, "{}: cancel: {answer}", case.id);
                }
                action => {
                    let (status, answer) = stack.operate(&run, attention, action.as_str()).await;
                    assert_eq!(status, 202, "{}: {}: {answer}", case.id, action.as_str());
                }
            }
            let what = format!("{}: the operator's action applied", case.id);
            stack
                .until(&run, &what, |i| i["attention"].is_null() || step(i, attention)["call"]["pending"].is_null())
                .await;
            started = std::time::Instant::now();
            continue;
        }
        if at(&inspection, "await-review") {
            let wait = &step(&inspection, "await-review")["wait"];
            let seen = wait["observations"].as_u64().unwrap_or(0);
            if wait["nextObservationAt"].is_null() && matches!(observations.front(), Some(Reply::Pending { .. })) {
                // An observation is under way: the next one is not scheduled yet.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            match observations.pop_front() {
                Some(Reply::Complete { value }) => {
                    let decision = value["decision"].as_str().unwrap_or("approved");
                    let (status, answer) = stack.decide(REVIEW, decision).await;
                    assert_eq!(status, 200, "{}: decide: {answer}", case.id);
                    stack.nudge(REVIEW).await;
                }
                // The clock reaches the next observation, as the scenario's does.
                Some(Reply::Pending { .. }) => travel_to(stack, &wait["nextObservationAt"]),
                Some(other) => panic!("{}: an observation cannot be `{}`", case.id, other.type_name()),
                None if cancel => {
                    cancel = false;
                    let (status, answer) = stack.cancel(&run).await;
                    assert_eq!(status, 202, "{}: cancel: {answer}", case.id);
                    continue;
                }
                None => {
                    // Nothing more is observed: the clock reaches the wait's timeout
                    // (the reviewer deciding in the last instant when the late read finds a decision).
                    if let Some(decision) = &late_decision {
                        let (status, answer) = stack.decide(REVIEW, decision).await;
                        assert_eq!(status, 200, "{}: decide: {answer}", case.id);
                    }
                    travel_to(stack, &wait["timeoutAt"]);
                    let what = format!("{}: the wait's timeout", case.id);
                    stack.until(&run, &what, |i| !at(i, "await-review")).await;
                    started = std::time::Instant::now();
                    continue;
                }
            }
            let what = format!("{}: observation {}", case.id, seen + 1);
            stack
                .until(&run, &what, |i| {
                    !at(i, "await-review") || step(i, "await-review")["wait"]["observations"].as_u64() > Some(seen)
                })
                .await;
            started = std::time::Instant::now();
            continue;
        }
        if let Some(current) = inspection["currentStep"].as_str()
            && step(&inspection, current)["call"]["pending"] == "attempt"
            && step(&inspection, current)["call"]["attempts"].as_u64() >= Some(1)
            && case.replies.get(current).is_some_and(|r| r.iter().all(|r| matches!(r, Reply::Retryable { .. })))
        {
            // The product answers nothing but "try later" until the run's deadline:
            // the clock jumps to shortly before it (the retries in between are not
            // replayed), goes to each retry left, then to the deadline itself.
            let deadline = ms(&inspection["deadlineAt"]);
            let next = ms(&step(&inspection, current)["call"]["nextAttemptAt"]);
            if next >= deadline {
                travel_to_ms(stack, deadline);
                let what = format!("{}: the run deadline", case.id);
                stack.until(&run, &what, |i| i["state"] != "running").await;
            } else {
                travel_to_ms(stack, next.max(deadline - BEFORE_DEADLINE_MS));
                let what = format!("{}: the retry of {current}", case.id);
                stack
                    .until(&run, &what, |i| {
                        i["state"] != "running"
                            || step(i, current)["call"]["nextAttemptAt"]
                                .as_str()
                                .is_some_and(|t| Instant::parse_rfc3339(t).is_some_and(|t| t.0 > next))
                    })
                    .await;
            }
            started = std::time::Instant::now();
            continue;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The published output with the ids the products made up replaced (they differ by design).
fn without_product_ids(output: &Value) -> Value {
    let mut output = output.clone();
    if let Some(map) = output.as_object_mut() {
        for key in ["reviewRequestId", "messageId"] {
            if let Some(value) = map.get_mut(key) {
                *value = json!("<made by the product>");
            }
        }
    }
    output
}

/// Runs case `id` both ways and compares.
async fn compare(id: &str) {
    let (workflow, cases) = flagship();
    let Some(case) = cases.iter().find(|c| c.id == id) else { panic!("no case {id} in scenarios.yaml") };
    let report = run_scripted(&workflow, case);
    assert!(report.passed, "{id} fails under coordinatorctl test: {:?}", report.problem);
    let Some(scripted) = report.actual else { panic!("{id}: no result") };

    // Requests time out after 5 s: a loaded machine answers within it; a
    // scripted `timeout` fault (10 s) does not.
    let stack = Stack::start(StackOptions { notify: false, request_seconds: 5, ..StackOptions::default() }).await;
    assert_eq!(stack.revision, workflow.revision, "the service runs the revision the scenarios test");
    script_products(&stack, &workflow, case).await;
    let (run, served) = drive(&stack, case).await;
    let view = stack.view(&run).await;

    assert_eq!(path(&served), scripted.path, "{id}: path");
    assert_eq!(served["state"], scripted.state.as_str(), "{id}: state: {served}");
    assert_eq!(served["outcome"].as_str(), scripted.outcome.as_deref(), "{id}: outcome");
    assert_eq!(served["failure"]["code"].as_str(), scripted.failure.as_deref(), "{id}: failure: {served}");
    let scripted_output = scripted.output.clone().unwrap_or(Value::Null);
    assert_eq!(without_product_ids(&view["output"]), without_product_ids(&scripted_output), "{id}: output");
    for (name, expected) in &scripted.effects {
        assert_eq!(effect(&served, name), expected.as_str(), "{id}: effect of {name}: {served}");
        let Some((product, operation, kind)) = target(&workflow, name) else { continue };
        if kind == Effect::Read {
            continue;
        }
        let (requests, effects) = stack.count_of(&product, &operation, &run, name).await;
        let want = match expected {
            EffectState::Accepted => Some(1),
            EffectState::Refused | EffectState::None => Some(0),
            EffectState::Unknown => None,
        };
        assert!(
            effects <= 1 && want.is_none_or(|w| w == effects),
            "{id}: {name}: {requests} requests, {effects} effects"
        );
    }
    for (name, count) in &scripted.observations {
        let served_count = path(&served).contains(name).then(|| step(&served, name)["wait"]["observations"].as_u64());
        assert_eq!(served_count.flatten().unwrap_or(0), u64::from(*count), "{id}: observations of {name}");
    }
}

/// Each compared case: (test name, case id).
macro_rules! parity {
    ($($name:ident => $id:literal,)*) => {
        const COMPARED: &[(&str, &str)] = &[$((stringify!($name), $id),)*];
        $(
            #[test]
            fn $name() {
                on_runtime(compare($id));
            }
        )*
    };
}

parity! {
    approved_and_notice_sent => "approved-and-notice-sent",
    recipient_opted_out => "recipient-opted-out",
    review_refused => "review-refused",
    rejected => "rejected",
    cancel_during_the_wait => "cancel-during-the-wait",
    cancel_after_a_decision_arrived => "cancel-after-a-decision-arrived",
    uncertain_notice_settled_by_reconcile => "uncertain-notice-settled-by-reconcile",
    uncertain_notice_settled_by_retry_same => "uncertain-notice-settled-by-retry-same",
    completion_nudge_brings_the_observation_forward => "completion-nudge-brings-the-observation-forward",
    lost_read_is_read_again => "lost-read-is-read-again",
    refusal_that_is_not_declared => "refusal-that-is-not-declared",
    uncertain_withdrawal_on_the_cancel_route_needs_an_operator => "uncertain-withdrawal-on-the-cancel-route-needs-an-operator",
    a_scripted_cancel_ends_a_run_waiting_for_an_operator => "a-scripted-cancel-ends-a-run-waiting-for-an-operator",
    decided_after_timeout => "decided-after-timeout",
    withdrawn_after_timeout => "withdrawn-after-timeout",
    run_deadline => "run-deadline",
    receipt_not_found_leaves_the_effect_unknown => "receipt-not-found-leaves-the-effect-unknown",
}
