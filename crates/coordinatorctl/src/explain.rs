//! `explain`: what each call, wait and finish of a checked workflow does,
//! including when a product refuses, an effect is unknown or a wait times out.
//!
//! Owns the explanation as text ([`human`]) and JSON ([`json`](fn@json)). Each fact is
//! written once per format side by side in one [`Block`], so the two cannot
//! drift apart. Everything comes from the pinned catalog descriptors and the
//! rules of docs/reference/runs.md; it decides nothing and does no IO.
//!
//! JSON (camelCase; steps in [`step_order`]): `{workflow, revision, start,
//! deadlineSeconds, calls, waits, finishes}`, where
//! - call: `{step, alias, operation, product, connection, effect, recovery
//!   (null for none), receipt, completions: [{name, observeEverySeconds}],
//!   declaredRefusals, onDeclaredRefusal: {CODE: STEP}, onOtherRefusal: THEN
//!   (any refusal not routed, declared or not), onUnknownEffect: {handling:
//!   "read-again" | "attention" | "not-dispatched", operatorActions}, retry:
//!   {maxAttempts (null: unlimited within the run deadline),
//!   initialIntervalSeconds, backoffCoefficient, maxIntervalSeconds}, routes}`;
//! - wait: `{step, type: "wait-for", completion: {step, name}, timeoutSeconds,
//!   onTimeout: THEN, onCancel: THEN, observeEverySeconds (effective),
//!   observeFloorSeconds, routes}` or `{step, type: "wait-until", onCancel:
//!   THEN, routes}`;
//! - finish: `{step, outcome, publishesOutput, reachedFrom: [{step, route}]}`;
//! - THEN: `{target}`, `{state: "failed", failure}` or `{state: "cancelled"}`;
//!   routes: `[{route, target}]`, route being the graph's label.

use coordinator_core::check::Checked;
use coordinator_core::definition::{Definition, PinnedOperation};
use coordinator_core::model::catalog::{Effect, OperationDescriptor, Recovery};
use coordinator_core::model::workflow::{
    CallStep, DEFAULT_OBSERVE_FLOOR_SECONDS, EffectiveRetry, RetryPolicy, Step, WaitForStep,
};
use serde_json::{Value, json};

use coordinator_graph::step_order;

/// docs/reference/runs.md#waits: the default `observeFloorSeconds`; a deployment may raise it.
const OBSERVE_FLOOR_SECONDS: u64 = DEFAULT_OBSERVE_FLOOR_SECONDS;

/// One explained step: its JSON object, and its text as a heading and named rows.
struct Block {
    value: Value,
    heading: String,
    rows: Vec<(&'static str, Vec<String>)>,
}

impl Block {
    fn new(heading: String, value: Value) -> Self {
        Block { value, heading, rows: Vec::new() }
    }

    /// A named row of text lines (`none` when there is none).
    fn row(mut self, name: &'static str, lines: impl IntoIterator<Item = String>) -> Self {
        self.rows.push((name, lines.into_iter().collect()));
        self
    }
}

/// The calls, waits and finishes, each in step order.
fn blocks(checked: &Checked) -> [Vec<Block>; 3] {
    let definition = &checked.definition;
    let order = step_order(definition);
    let [mut calls, mut waits, mut finishes] = [Vec::new(), Vec::new(), Vec::new()];
    for &(id, step) in &order {
        let (mut routes, mut routes_text) = (Vec::new(), Vec::new());
        for route in step.routes() {
            let (label, target) = (route.kind.label(), route.target);
            routes_text.push(format!("{label} -> {target}"));
            routes.push(json!({"route": label, "target": target}));
        }
        let routes = Value::Array(routes);
        match step {
            // The checker refuses a call whose alias is not pinned (`operation.unknown-alias`).
            Step::Call(call) => {
                if let Some(pinned) = definition.operations.get(&call.operation) {
                    calls.push(call_block(id, call, pinned, routes).row("routes", routes_text));
                }
            }
            Step::WaitFor(wait) => {
                waits.push(wait_for_block(definition, id, wait, routes).row("routes", routes_text));
            }
            Step::WaitUntil(wait) => {
                let on_cancel = Then::cancel(wait.on_cancel.as_deref());
                let value = json!({"step": id, "type": "wait-until", "onCancel": on_cancel.json(), "routes": routes});
                let block = Block::new(format!("wait-until {id}"), value);
                waits.push(block.row("cancel", [on_cancel.text()]).row("routes", routes_text));
            }
            Step::Finish(finish) => {
                let (mut from, mut from_text) = (Vec::new(), Vec::new());
                for &(source, s) in &order {
                    for route in s.routes().into_iter().filter(|r| r.target == id) {
                        from_text.push(format!("{source} ({})", route.kind.label()));
                        from.push(json!({"step": source, "route": route.kind.label()}));
                    }
                }
                let publishes = finish.output.is_some();
                let value = json!({
                    "step": id, "outcome": finish.outcome, "publishesOutput": publishes, "reachedFrom": from,
                });
                let output = if publishes { "its output" } else { "no output" };
                let outcome = format!("{} (publishes {output})", finish.outcome);
                let block = Block::new(format!("finish {id}"), value).row("outcome", [outcome]);
                finishes.push(block.row("reached from", from_text));
            }
            Step::Choose(_) => {}
        }
    }
    [calls, waits, finishes]
}

fn call_block(id: &str, call: &CallStep, pinned: &PinnedOperation, routes: Value) -> Block {
    let d = &pinned.descriptor;
    let (alias, operation, connection) = (&call.operation, &pinned.operation, &pinned.connection);
    let product = operation.split_once('.').map_or(operation.as_str(), |p| p.0);
    let (handling, actions, unknown) = unknown_effect(d);
    let (retry, retry_text) = retry(call.retry.as_ref());
    let (mut completions, mut completions_text) = (Vec::new(), Vec::new());
    for (name, completion) in &d.completions {
        let every = completion.observe_every_seconds;
        completions_text.push(format!("{name} (observed every {every} s)"));
        completions.push(json!({"name": name, "observeEverySeconds": every}));
    }
    let refused = Then::Failed("product-refused");
    let value = json!({
        "step": id, "alias": alias, "operation": operation, "product": product, "connection": connection,
        "effect": d.effect.as_str(), "recovery": d.recovery.map(Recovery::as_str), "receipt": d.receipt,
        "completions": completions, "declaredRefusals": d.declared_refusals,
        "onDeclaredRefusal": call.on_declared_refusal, "onOtherRefusal": refused.json(),
        "onUnknownEffect": {"handling": handling, "operatorActions": actions}, "retry": retry, "routes": routes,
    });
    let mut refusals = Vec::new();
    for code in &d.declared_refusals {
        let then = call.on_declared_refusal.get(code).map_or(Then::Failed("product-refused"), |t| Then::Step(t));
        refusals.push(format!("{code} (declared) {}", then.text()));
    }
    let other = if refusals.is_empty() { "any" } else { "any other" };
    refusals.push(format!("{other} refusal {}", refused.text()));
    let effect = d.effect.as_str();
    let recovery = d.recovery.map_or("none", Recovery::as_str);
    let receipt = if d.receipt { "yes" } else { "no" };
    let names = format!("{alias} = {operation} (product {product}, connection {connection})");
    let kind = format!("{effect}, recovery {recovery}, receipt {receipt}");
    Block::new(format!("call {id}"), value)
        .row("operation", [names])
        .row("effect", [kind])
        .row("completions", completions_text)
        .row("refusals", refusals)
        .row("unknown effect", [unknown])
        .row("retry", retry_text)
}

/// docs/reference/recovery.md#settling-an-unknown-effect: a read is read again;
/// a mutation or evaluation waits in `attention` for an operator, who may
/// `reconcile` only with a receipt and `retry-same` only what may be repeated
/// (never an evaluation).
fn unknown_effect(d: &OperationDescriptor) -> (&'static str, Vec<&'static str>, String) {
    let retry_same = match (d.effect, d.recovery) {
        (Effect::Mutation, Some(Recovery::ReadAgain | Recovery::SameCommand)) => Some("retry-same"),
        (Effect::Mutation | Effect::Read | Effect::Evaluation | Effect::ProposalAction, _) => None,
    };
    let reconcile = d.receipt.then_some("reconcile");
    let actions: Vec<_> = reconcile.into_iter().chain(retry_same).chain(["cancel"]).collect();
    let never = if retry_same.is_some() { "" } else { "never repeated: " };
    let attention = format!("{never}attention until an operator chooses {}", actions.join(" | "));
    let again = "read again automatically, under the retry policy";
    match d.effect {
        Effect::Read => ("read-again", Vec::new(), again.to_owned()),
        Effect::Mutation | Effect::Evaluation => ("attention", actions, attention),
        // The checker refuses proposal actions (`coordinator.operation.proposal-action`).
        Effect::ProposalAction => ("not-dispatched", Vec::new(), "never dispatched".to_owned()),
    }
}

/// The retry policy with the defaults of docs/reference/runs.md#retries filled
/// in, as JSON and text.
fn retry(policy: Option<&RetryPolicy>) -> (Value, [String; 2]) {
    let max_attempts = policy.and_then(|p| p.max_attempts);
    let effective = EffectiveRetry::of(policy);
    let initial = effective.initial_interval_seconds;
    let coefficient = effective.backoff_coefficient;
    let max_interval = effective.max_interval_seconds;
    let value = json!({
        "maxAttempts": max_attempts, "initialIntervalSeconds": initial,
        "backoffCoefficient": coefficient, "maxIntervalSeconds": max_interval,
    });
    let attempts = match max_attempts {
        Some(n) => format!("at most {n} attempts, then failed: retry.exhausted"),
        None => "unlimited attempts within the run deadline (then expired: run.deadline-reached)".to_owned(),
    };
    let intervals = format!("first interval {initial} s, coefficient {coefficient}, at most {max_interval} s");
    (value, [attempts, intervals])
}

fn wait_for_block(definition: &Definition, id: &str, wait: &WaitForStep, routes: Value) -> Block {
    let (step, name) = (&wait.completion.step, &wait.completion.name);
    let operations = &definition.operations;
    let completion = match definition.steps.get(step) {
        Some(Step::Call(call)) => operations.get(&call.operation).and_then(|p| p.descriptor.completions.get(name)),
        Some(Step::Choose(_) | Step::WaitUntil(_) | Step::WaitFor(_) | Step::Finish(_)) | None => None,
    };
    // The checker refuses a wait for a completion its call does not expose (`wait.unknown-completion`).
    let own = completion.map(|c| c.observe_every_seconds);
    let every = wait.observe_every_seconds.or(own).unwrap_or(0).max(OBSERVE_FLOOR_SECONDS);
    let from = if wait.observe_every_seconds.is_some() { "the step" } else { "the completion" };
    let timed_out = Then::Failed("wait.timed-out");
    let on_timeout = wait.on_timeout.as_deref().map_or(timed_out, Then::Step);
    let on_cancel = Then::cancel(wait.on_cancel.as_deref());
    let value = json!({
        "step": id, "type": "wait-for", "completion": {"step": step, "name": name},
        "timeoutSeconds": wait.timeout_seconds, "onTimeout": on_timeout.json(), "onCancel": on_cancel.json(),
        "observeEverySeconds": every, "observeFloorSeconds": OBSERVE_FLOOR_SECONDS, "routes": routes,
    });
    let floor = format!("at least {OBSERVE_FLOOR_SECONDS} s, or the deployment's higher floor");
    let observe = format!("every {every} s (as {from} says; {floor})");
    let timeout = format!("after {} s {}", wait.timeout_seconds, on_timeout.text());
    Block::new(format!("wait-for {id}"), value)
        .row("completion", [format!("{name} of {step}")])
        .row("observe", [observe])
        .row("timeout", [timeout])
        .row("cancel", [on_cancel.text()])
}

/// Where a run goes when something happens.
enum Then<'a> {
    Step(&'a str),
    Failed(&'static str),
    Cancelled,
}

impl<'a> Then<'a> {
    /// docs/reference/runs.md#cancellation: without `onCancel`, a cancel ends the run.
    fn cancel(on_cancel: Option<&'a str>) -> Self {
        on_cancel.map_or(Then::Cancelled, Then::Step)
    }

    fn json(&self) -> Value {
        match self {
            Then::Step(target) => json!({"target": target}),
            Then::Failed(failure) => json!({"state": "failed", "failure": failure}),
            Then::Cancelled => json!({"state": "cancelled"}),
        }
    }

    fn text(&self) -> String {
        match self {
            Then::Step(target) => format!("-> {target}"),
            Then::Failed(failure) => format!("-> failed: {failure}"),
            Then::Cancelled => {
                "-> cancelled (cancelled-after-effect if a mutation was accepted or is unknown)".to_owned()
            }
        }
    }
}

/// The explanation as JSON (shape in the module documentation); schedules'
/// next firings counted from `now_ms`.
pub fn json(checked: &Checked, now_ms: i64) -> Value {
    let [calls, waits, finishes] =
        blocks(checked).map(|blocks| blocks.into_iter().map(|b| b.value).collect::<Vec<_>>());
    let d = &checked.definition;
    json!({
        "workflow": d.workflow, "revision": checked.revision, "start": d.start, "deadlineSeconds": d.deadline_seconds,
        "calls": calls, "waits": waits, "finishes": finishes,
        "schedules": crate::explain_schedules::json(&d.schedules, now_ms),
    })
}

/// The explanation for people: a header, then one block per call, wait,
/// finish and schedule (its next firings counted from `now_ms`).
pub fn human(checked: &Checked, now_ms: i64) -> String {
    let d = &checked.definition;
    let mut out = format!("workflow {}", d.workflow);
    if let Some(title) = &checked.workflow.workflow.title {
        out.push_str(&format!(" ({title})"));
    }
    let (revision, start, deadline) = (&checked.revision, &d.start, d.deadline_seconds);
    out.push_str(&format!("\nrevision {revision}\nstart {start}, run deadline {deadline} s\n"));
    for block in blocks(checked).into_iter().flatten() {
        out.push_str(&format!("\n{}\n", block.heading));
        for (name, lines) in &block.rows {
            let none = ["none".to_owned()];
            let lines = if lines.is_empty() { &none[..] } else { lines };
            for (i, line) in lines.iter().enumerate() {
                out.push_str(&format!("  {:<16}{line}\n", if i == 0 { name } else { "" }));
            }
        }
    }
    out.push_str(&crate::explain_schedules::human(&d.schedules, now_ms));
    out
}

#[cfg(test)]
#[path = "explain_fixture.rs"]
mod fixture;

#[cfg(test)]
mod tests {
    use super::fixture::fixture;
    use super::*;

    #[test]
    fn json_explains_each_call_in_step_order() {
        let value = json(&fixture(), 0);
        assert_eq!((&value["workflow"], &value["start"]), (&json!("tiny-review"), &json!("read-subject")));
        assert_eq!(value["revision"], fixture().revision);
        let calls = &value["calls"];
        let steps = [&calls[0]["step"], &calls[1]["step"], &calls[2]["step"], &calls[3]];
        assert_eq!(steps, [&json!("read-subject"), &json!("request"), &json!("send"), &Value::Null]);
        let read = json!({"handling": "read-again", "operatorActions": []});
        assert_eq!(calls[0]["onUnknownEffect"], read);
        let expected = json!({
            "step": "request", "alias": "submit", "operation": "casework.submit-review-request/v1",
            "product": "casework", "connection": "casework", "effect": "mutation", "recovery": "same-command",
            "receipt": false, "completions": [{"name": "result", "observeEverySeconds": 900}],
            "declaredRefusals": ["subject-not-reviewable", "review-already-open"],
            "onDeclaredRefusal": {"review-already-open": "refused"},
            "onOtherRefusal": {"state": "failed", "failure": "product-refused"},
            "onUnknownEffect": {"handling": "attention", "operatorActions": ["retry-same", "cancel"]},
            "retry": {"maxAttempts": null, "initialIntervalSeconds": 1, "backoffCoefficient": 2.0,
                      "maxIntervalSeconds": 300},
            "routes": [{"route": "next", "target": "await"},
                       {"route": "refusal: review-already-open", "target": "refused"}],
        });
        assert_eq!(calls[1], expected);
        let send = &calls[2];
        let actions = json!(["reconcile", "retry-same", "cancel"]);
        assert_eq!(send["onUnknownEffect"]["operatorActions"], actions);
        let retry = json!({"maxAttempts": 5, "initialIntervalSeconds": 2, "backoffCoefficient": 2.0,
                           "maxIntervalSeconds": 300});
        assert_eq!(send["retry"], retry);
    }

    #[test]
    fn json_explains_waits_and_finishes() {
        let value = json(&fixture(), 0);
        let wait = &value["waits"][0];
        assert_eq!(wait["step"], "await");
        assert_eq!(wait["onTimeout"], json!({"target": "timed-out"}));
        assert_eq!(wait["onCancel"], json!({"target": "cancelled"}));
        assert_eq!(wait["observeEverySeconds"], 900);
        let finishes = value["finishes"].as_array().cloned().unwrap_or_default();
        let steps: Vec<&Value> = finishes.iter().map(|f| &f["step"]).collect();
        assert_eq!(steps, ["refused", "timed-out", "cancelled", "rejected", "approved"]);
        let from = json!([{"step": "request", "route": "refusal: review-already-open"}]);
        assert_eq!(finishes[0]["reachedFrom"], from);
        assert_eq!(finishes[0]["publishesOutput"], false);
    }

    #[test]
    fn a_wait_without_routes_fails_on_timeout_and_observes_no_faster_than_the_floor() {
        let checked = fixture();
        let Some(Step::WaitFor(mut wait)) = checked.definition.steps.get("await").cloned() else {
            panic!("the fixture's `await` is a wait-for");
        };
        (wait.on_timeout, wait.on_cancel, wait.observe_every_seconds) = (None, None, Some(10));
        let value = wait_for_block(&checked.definition, "await", &wait, Value::Null).value;
        let timed_out = json!({"state": "failed", "failure": "wait.timed-out"});
        assert_eq!(value["onTimeout"], timed_out);
        assert_eq!(value["onCancel"], json!({"state": "cancelled"}));
        assert_eq!(value["observeEverySeconds"], 30);
    }

    #[test]
    fn unknown_effects_follow_effect_recovery_and_receipt() {
        let checked = fixture();
        let pinned = checked.definition.operations.get("notify");
        let Some(mut d) = pinned.map(|p| p.descriptor.clone()) else {
            panic!("the fixture pins `notify`");
        };
        assert_eq!(unknown_effect(&d).1, ["reconcile", "retry-same", "cancel"]);
        (d.effect, d.recovery, d.receipt) = (Effect::Evaluation, Some(Recovery::SameCommand), false);
        let (handling, actions, text) = unknown_effect(&d);
        assert_eq!((handling, actions), ("attention", vec!["cancel"]));
        assert!(text.starts_with("never repeated: "), "{text}");
        (d.effect, d.recovery, d.receipt) = (Effect::Mutation, Some(Recovery::NeverRepeat), true);
        assert_eq!(unknown_effect(&d).1, ["reconcile", "cancel"]);
    }

    #[test]
    fn human_text_states_every_fact_and_is_deterministic() {
        let text = human(&fixture(), 0);
        for expected in [
            "workflow tiny-review (Tiny review)\nrevision sha256:",
            "\ncall request\n  operation       submit = casework.submit-review-request/v1 (product casework",
            "  effect          mutation, recovery same-command, receipt no\n",
            "  completions     result (observed every 900 s)\n",
            "  refusals        subject-not-reviewable (declared) -> failed: product-refused\n",
            "                  review-already-open (declared) -> refused\n",
            "                  any other refusal -> failed: product-refused\n",
            "  unknown effect  attention until an operator chooses retry-same | cancel\n",
            "  retry           unlimited attempts within the run deadline (then expired: run.deadline-reached)\n",
            "                  first interval 1 s, coefficient 2, at most 300 s\n",
            "  routes          next -> await\n                  refusal: review-already-open -> refused\n",
            "  refusals        any refusal -> failed: product-refused\n",
            "  unknown effect  read again automatically, under the retry policy\n",
            "  retry           at most 5 attempts, then failed: retry.exhausted\n",
            "\nwait-for await\n  completion      result of request\n  observe         every 900 s (",
            "  timeout         after 3600 s -> timed-out\n  cancel          -> cancelled\n",
            "\nfinish refused\n  outcome         refused (publishes no output)\n",
            "  reached from    request (refusal: review-already-open)\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert_eq!(text, human(&fixture(), 0));
    }
}
