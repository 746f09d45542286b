//! The state machine, event by event, on the flagship workflow: every run state
//! is reached, and the rules of docs/reference/runs.md hold at each step.

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event, Observation, ReceiptAnswer, Timer};
use coordinator_core::machine::run::{Attention, Run};
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, Transition, decide};
use coordinator_core::model::run::{EffectState, RunState};
use serde_json::{Value, json};

use crate::support::{compiled, repo};

fn workflow() -> Workflow {
    compiled(&repo().join("examples/reviewed-notice"))
}

const T0: &str = "2026-10-09T09:00:00Z";

/// A run under test with its virtual clock.
struct Harness {
    wf: Workflow,
    run: Run,
    now: Instant,
}

impl Harness {
    fn admitted() -> Harness {
        let wf = workflow();
        let now = Instant::parse_rfc3339(T0).unwrap_or(Instant(0));
        let input = json!({"applicationId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "recipient": {"kind": "person", "id": "p-1"}});
        let run = Run::new("run-1", &wf.revision, now, input);
        let mut h = Harness { wf, run, now };
        h.applied(Event::Admitted);
        h
    }

    fn send(&mut self, event: Event) -> Transition {
        let t = decide(&self.wf, &self.run, &event, self.now, &Settings::default());
        for a in &t.actions {
            self.run.apply(a);
        }
        t
    }

    fn applied(&mut self, event: Event) -> Transition {
        let t = self.send(event.clone());
        assert_eq!(t.outcome, Outcome::Applied, "{event:?} was not applied");
        t
    }

    fn at(&mut self, seconds: u64) {
        let admitted = self.run.admitted_at;
        self.now = admitted.plus_seconds(seconds);
    }

    fn answer(&mut self, step: &str, answer: CallAnswer) -> Transition {
        let attempt = self.run.call(step).map_or(0, |c| c.attempt);
        self.applied(Event::CallAnswered { step: step.into(), attempt, answer })
    }

    fn accept(&mut self, step: &str, output: Value) -> Transition {
        let completions = if step == "request-review" {
            [("result".to_owned(), "r-1".to_owned())].into()
        } else {
            Default::default()
        };
        self.answer(step, CallAnswer::Accepted { output, completions })
    }

    fn reach_the_wait(&mut self) {
        self.accept("read-application", json!({"recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "recordType": "application", "revision": 1, "data": {}}));
        self.accept("request-review", json!({"reviewRequestId": "r-1"}));
        assert_eq!(self.run.current.as_deref(), Some("await-review"));
    }

    fn reach_the_notice(&mut self) {
        self.reach_the_wait();
        self.at(900);
        self.applied(Event::TimerDue { timer: Timer::Observation { step: "await-review".into() } });
        let seq = self.run.wait("await-review").map_or(0, |w| w.seq);
        self.applied(Event::CompletionObserved {
            step: "await-review".into(),
            seq,
            answer: Observation::Complete { value: json!({"decision": "approved"}) },
        });
        assert_eq!(self.run.current.as_deref(), Some("send-notice"));
    }
}

fn dispatches(t: &Transition) -> Vec<u32> {
    t.actions
        .iter()
        .filter_map(|a| if let Action::Dispatch { attempt, .. } = a { Some(*attempt) } else { None })
        .collect()
}

#[test]
fn a_run_is_running_until_it_finishes() {
    let mut h = Harness::admitted();
    assert_eq!(h.run.state, RunState::Running);
    assert_eq!(h.run.timers.get(&Timer::RunDeadline), Some(&h.run.admitted_at.plus_seconds(2_592_000)));
    h.reach_the_notice();
    h.accept("send-notice", json!({"messageId": "m-1", "status": "queued"}));
    assert_eq!(h.run.state, RunState::Finished);
    assert_eq!(h.run.outcome.as_deref(), Some("notice-sent"));
    assert!(h.run.timers.is_empty(), "a finished run keeps no timer");
}

#[test]
fn an_uncertain_mutation_needs_an_operator_and_a_lost_read_is_read_again() {
    let mut h = Harness::admitted();
    let t = h.answer("read-application", CallAnswer::Uncertain);
    assert_eq!(dispatches(&t), vec![2], "a read is read again");
    assert_eq!(h.run.state, RunState::Running);
    h.reach_the_wait();
    let mut h = Harness::admitted();
    h.reach_the_notice();
    let t = h.answer("send-notice", CallAnswer::Uncertain);
    assert!(dispatches(&t).is_empty(), "an uncertain mutation is never resent by itself");
    assert_eq!(h.run.state, RunState::Attention);
    assert_eq!(h.run.attention, Some(Attention::UnknownEffect { step: "send-notice".into() }));
    assert_eq!(h.run.call("send-notice").map(|c| c.effect), Some(EffectState::Unknown));
}

#[test]
fn reconcile_settles_only_from_a_found_receipt() {
    let mut h = Harness::admitted();
    h.reach_the_notice();
    h.answer("send-notice", CallAnswer::Uncertain);
    h.applied(Event::ReconcileRequested { step: "send-notice".into() });
    for missing in [ReceiptAnswer::NotFound, ReceiptAnswer::Expired, ReceiptAnswer::Unavailable] {
        h.applied(Event::ReceiptAnswered { step: "send-notice".into(), answer: missing });
        assert_eq!(h.run.call("send-notice").map(|c| c.effect), Some(EffectState::Unknown), "never proof of nothing");
        assert_eq!(h.run.state, RunState::Attention);
        h.applied(Event::ReconcileRequested { step: "send-notice".into() });
    }
    let found =
        ReceiptAnswer::Found { output: json!({"messageId": "m-1", "status": "sent"}), completions: Default::default() };
    h.applied(Event::ReceiptAnswered { step: "send-notice".into(), answer: found });
    assert_eq!(h.run.state, RunState::Finished);
}

#[test]
fn a_later_refusal_never_clears_an_earlier_unknown_effect() {
    let mut h = Harness::admitted();
    h.reach_the_notice();
    h.answer("send-notice", CallAnswer::Uncertain);
    let t = h.applied(Event::RetrySameRequested { step: "send-notice".into() });
    assert_eq!(dispatches(&t), vec![2]);
    let key = h.run.call("send-notice").map(|c| c.command.idempotency_key.clone());
    assert_eq!(key.as_deref(), Some("run-1:send-notice"), "retry-same sends the original key");
    h.answer("send-notice", CallAnswer::Refused { code: "recipient-opted-out".into() });
    assert_eq!(h.run.call("send-notice").map(|c| c.effect), Some(EffectState::Unknown));
    assert_eq!(h.run.state, RunState::Attention);
}

#[test]
fn operator_actions_the_rules_do_not_allow_are_refused_and_change_nothing() {
    let mut h = Harness::admitted();
    h.reach_the_notice();
    let t = h.send(Event::ReconcileRequested { step: "send-notice".into() });
    assert!(matches!(t.outcome, Outcome::Refused { ref code, .. } if code == "step.effect-not-unknown"));
    assert!(t.actions.is_empty());

    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.at(1_209_600);
    h.applied(Event::TimerDue { timer: Timer::WaitTimeout { step: "await-review".into() } });
    h.answer("withdraw-review", CallAnswer::Uncertain);
    let before = h.run.clone();
    // Casework mutations have no receipt.
    let t = h.send(Event::ReconcileRequested { step: "withdraw-review".into() });
    assert!(matches!(t.outcome, Outcome::Refused { ref code, .. } if code == "operation.no-receipt"));
    assert!(t.actions.is_empty());
    assert_eq!(h.run, before);
}

#[test]
fn stale_answers_are_ignored_not_errors() {
    let mut h = Harness::admitted();
    let t = h.send(Event::CallAnswered { step: "read-application".into(), attempt: 7, answer: CallAnswer::Uncertain });
    assert!(matches!(t.outcome, Outcome::Ignored { .. }));
    assert!(t.actions.is_empty());
    let t = h.send(Event::CallAnswered { step: "send-notice".into(), attempt: 1, answer: CallAnswer::Uncertain });
    assert!(matches!(t.outcome, Outcome::Ignored { .. }));
}

#[test]
fn cancel_settles_a_call_in_flight_first() {
    let mut h = Harness::admitted();
    h.reach_the_notice();
    h.applied(Event::CancelRequested);
    assert_eq!(h.run.state, RunState::CancelRequested);
    h.accept("send-notice", json!({"messageId": "m-1", "status": "queued"}));
    assert_eq!(h.run.state, RunState::CancelledAfterEffect);
    assert_eq!(h.run.outcome, None);
}

#[test]
fn cancel_before_any_mutation_is_plain_cancelled() {
    let mut h = Harness::admitted();
    let t = h.applied(Event::CancelRequested);
    assert_eq!(h.run.state, RunState::CancelRequested, "the read in flight is settled first");
    assert!(dispatches(&t).is_empty());
    h.answer("read-application", CallAnswer::Retryable { retry_after_seconds: None });
    assert_eq!(h.run.state, RunState::Cancelled);
}

#[test]
fn cancel_during_the_wait_follows_on_cancel() {
    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.at(100);
    h.applied(Event::CancelRequested);
    assert_eq!(h.run.current.as_deref(), Some("withdraw-on-cancel"));
    assert_eq!(h.run.state, RunState::CancelRequested);
    assert!(!h.run.timers.contains_key(&Timer::Observation { step: "await-review".into() }));
    h.accept("withdraw-on-cancel", json!({"reviewRequestId": "r-1", "state": "withdrawn"}));
    assert_eq!(h.run.state, RunState::CancelledAfterEffect);
    assert_eq!(h.run.outcome.as_deref(), Some("withdrawn-on-cancel"));
}

#[test]
fn an_uncertain_mutation_on_the_cancel_route_needs_an_operator() {
    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.applied(Event::CancelRequested);
    h.answer("withdraw-on-cancel", CallAnswer::Uncertain);
    assert_eq!(h.run.state, RunState::Attention, "an unknown effect is never passed, on a cancel route either");
    h.applied(Event::RetrySameRequested { step: "withdraw-on-cancel".into() });
    assert_eq!(h.run.state, RunState::CancelRequested);
    h.accept("withdraw-on-cancel", json!({"reviewRequestId": "r-1", "state": "withdrawn"}));
    assert_eq!(h.run.state, RunState::CancelledAfterEffect);
    assert_eq!(h.run.outcome.as_deref(), Some("withdrawn-on-cancel"));
}

#[test]
fn cancel_settles_a_run_waiting_for_an_operator() {
    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.applied(Event::CancelRequested);
    h.answer("withdraw-on-cancel", CallAnswer::Uncertain);
    h.applied(Event::CancelRequested);
    assert_eq!(h.run.state, RunState::CancelledAfterEffect);
    assert_eq!(h.run.call("withdraw-on-cancel").map(|c| c.effect), Some(EffectState::Unknown));
}

#[test]
fn a_wait_without_a_completion_times_out_to_its_route() {
    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.at(1_209_600);
    let t = h.send(Event::TimerDue { timer: Timer::WaitTimeout { step: "await-review".into() } });
    assert_eq!(t.outcome, Outcome::Applied);
    assert_eq!(h.run.current.as_deref(), Some("withdraw-review"));
}

#[test]
fn an_undeclared_refusal_fails_the_run() {
    let mut h = Harness::admitted();
    h.reach_the_notice();
    h.answer("send-notice", CallAnswer::Refused { code: "template-unknown".into() });
    assert_eq!(h.run.state, RunState::Failed);
    assert_eq!(h.run.failure.as_ref().map(|f| f.code.as_str()), Some("product-refused"));
}

#[test]
fn the_deadline_expires_the_run_and_keeps_an_unknown_effect_visible() {
    let mut h = Harness::admitted();
    h.reach_the_notice();
    h.at(2_592_000);
    h.applied(Event::TimerDue { timer: Timer::RunDeadline });
    assert_eq!(h.run.state, RunState::Expired);
    assert_eq!(h.run.failure.as_ref().map(|f| f.code.as_str()), Some("run.deadline-reached"));
    assert_eq!(
        h.run.call("send-notice").map(|c| c.effect),
        Some(EffectState::Unknown),
        "the attempt in flight may have acted"
    );
    let t = h.send(Event::RetrySameRequested { step: "send-notice".into() });
    assert!(matches!(t.outcome, Outcome::Refused { ref code, .. } if code == "run.deadline-reached"));
    let t = h.send(Event::ReconcileRequested { step: "send-notice".into() });
    assert_eq!(t.outcome, Outcome::Applied, "reconcile only reads: still allowed");
    let t = h.send(Event::CancelRequested);
    assert!(matches!(t.outcome, Outcome::Ignored { .. }));
}

#[test]
fn a_restore_hold_dispatches_nothing_until_release() {
    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.applied(Event::RestoreHoldPlaced);
    assert_eq!(h.run.state, RunState::Attention);
    assert_eq!(h.run.attention, Some(Attention::RestoreHold));
    assert_eq!(h.run.timers.keys().collect::<Vec<_>>(), vec![&Timer::RunDeadline]);
    h.at(5000);
    let t = h.send(Event::CancelRequested);
    assert!(
        t.actions.iter().all(|a| !matches!(a, Action::Dispatch { .. } | Action::EnterStep { .. })),
        "the cancel route waits for release"
    );
    let t = h.applied(Event::RestoreHoldReleased);
    assert_eq!(h.run.current.as_deref(), Some("withdraw-on-cancel"));
    assert_eq!(dispatches(&t), vec![1]);
}

#[test]
fn a_released_wait_observes_as_soon_as_the_floor_allows() {
    // The review's completion is observed every 900 s; the hold lasts 100 s. A
    // completion notified meanwhile went to another timeline (a backup's), so the
    // release must not wait out the interval: it observes at once (floor: 30 s).
    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.at(10);
    h.applied(Event::RestoreHoldPlaced);
    h.at(110);
    h.applied(Event::RestoreHoldReleased);
    let observation = Timer::Observation { step: "await-review".into() };
    assert_eq!(h.run.timers.get(&observation), Some(&h.run.admitted_at.plus_seconds(110)));
    // Released before the floor has passed since the wait began: the floor is kept.
    let mut h = Harness::admitted();
    h.reach_the_wait();
    h.applied(Event::RestoreHoldPlaced);
    h.at(5);
    h.applied(Event::RestoreHoldReleased);
    assert_eq!(h.run.timers.get(&observation), Some(&h.run.admitted_at.plus_seconds(30)));
}

#[test]
fn all_eight_states_are_reached() {
    use std::collections::BTreeSet;
    let mut seen = BTreeSet::new();
    let mut record = |h: &Harness| {
        seen.insert(h.run.state);
    };
    // Running -> finished.
    let mut h = Harness::admitted();
    record(&h);
    h.reach_the_notice();
    h.accept("send-notice", json!({"messageId": "m-1", "status": "queued"}));
    record(&h);
    // Attention -> cancelled-after-effect.
    let mut h = Harness::admitted();
    h.reach_the_notice();
    h.answer("send-notice", CallAnswer::Uncertain);
    record(&h);
    h.applied(Event::CancelRequested);
    record(&h);
    // Cancel-requested -> cancelled.
    let mut h = Harness::admitted();
    h.applied(Event::CancelRequested);
    record(&h);
    h.answer("read-application", CallAnswer::Retryable { retry_after_seconds: None });
    record(&h);
    // Failed.
    let mut h = Harness::admitted();
    h.answer("read-application", CallAnswer::Refused { code: "not-allowed".into() });
    record(&h);
    // Expired.
    let mut h = Harness::admitted();
    h.at(2_592_000);
    h.applied(Event::TimerDue { timer: Timer::RunDeadline });
    record(&h);
    let all: BTreeSet<RunState> = RunState::ALL.into_iter().collect();
    assert_eq!(seen, all, "every run state is reached");
}
