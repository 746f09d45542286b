//! Minimal event sequences for the machine bugs the properties found, named after
//! what they protect. Each fails with the invariant's message until the rule is fixed.

use coordinator_core::machine::Outcome;
use coordinator_core::machine::decide;
use coordinator_core::machine::event::{CallAnswer, Event, ReceiptAnswer, Timer};
use coordinator_core::model::run::EffectState;

use super::driver::replay;
use super::fixtures;
use super::invariants;

fn accepted(fixture: &fixtures::Fixture, step: &str) -> CallAnswer {
    let answer = fixture.answer(step, 0, false);
    CallAnswer::Accepted { output: answer.output, completions: answer.completions }
}

/// A run that ended under a restore hold (cancelled, or expired at its deadline) stays
/// ended when the hold is released: nothing is dispatched for it and its state stays final.
#[test]
fn releasing_a_hold_never_revives_an_ended_run() {
    let fixture = fixtures::reviewed_notice();
    let deadline = fixture.deadline_seconds();
    let cancelled = [
        (0, Event::Admitted),
        (0, Event::RestoreHoldPlaced),
        (60, Event::CancelRequested),
        (120, Event::RestoreHoldReleased),
    ];
    let expired = [
        (0, Event::Admitted),
        (0, Event::RestoreHoldPlaced),
        (deadline, Event::TimerDue { timer: Timer::RunDeadline }),
        (deadline + 60, Event::RestoreHoldReleased),
    ];
    let mut failures = Vec::new();
    for events in [&cancelled[..], &expired[..]] {
        let trace = replay(fixture, 0, events, &decide);
        failures.extend(invariants::finishes_at_most_once(&trace).err());
        failures.extend(invariants::nothing_dispatched_when_ended_or_held(&trace).err());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A reconcile asked for while a retry-same attempt is still under way must not
/// replace that attempt: otherwise an unhelpful receipt leaves the run `running` with
/// nothing queued, and the attempt's (accepted) answer is dropped as stale.
#[test]
fn reconcile_during_a_retry_same_attempt_never_stalls_the_run() {
    let fixture = fixtures::appointment_reminder();
    let step = "book-appointment".to_owned();
    let events = [
        (0, Event::Admitted),
        (
            0,
            Event::CallAnswered {
                step: "read-availability".into(),
                attempt: 1,
                answer: accepted(fixture, "read-availability"),
            },
        ),
        (0, Event::CallAnswered { step: step.clone(), attempt: 1, answer: CallAnswer::Uncertain }),
        (0, Event::RetrySameRequested { step: step.clone() }),
        (60, Event::ReconcileRequested { step: step.clone() }),
        (60, Event::ReceiptAnswered { step: step.clone(), answer: ReceiptAnswer::NotFound }),
        (90, Event::CallAnswered { step: step.clone(), attempt: 2, answer: accepted(fixture, &step) }),
    ];
    let trace = replay(fixture, 0, &events, &decide);
    let reconcile = &trace.entries[4].transition.outcome;
    assert!(
        matches!(reconcile, Outcome::Refused { code, .. } if code == "step.attempt-pending"),
        "a reconcile while the attempt is under way is refused: {reconcile:?}"
    );
    let last = trace.last();
    assert_eq!(last.call(&step).map(|c| c.effect), Some(EffectState::Accepted), "the attempt's answer counts");
    assert_ne!(last.current.as_deref(), Some(step.as_str()), "the run went on");
    assert!(last.timers.len() > 1, "the run waits for its own timer, not only the deadline: {:?}", last.timers);
}
