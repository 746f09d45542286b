//! Each invariant catching a deliberately broken rule.
//!
//! A broken machine is the real `decide` wrapped so that its transitions are
//! corrupted in one targeted way. Each test drives it through a fixed world in
//! which the real machine keeps the invariant, and checks that the invariant
//! reports the corruption (and says so in words a reader can act on).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event, Timer};
use coordinator_core::machine::run::{Attention, Run};
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, Transition, decide};
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::run::{EffectState, RunState};

use super::driver::{Decide, drive};
use super::fixtures::{self, Fixture};
use super::invariants::{self, Verdict};
use super::trace::Trace;
use super::world::{AnswerPick, HoldPlan, Moment, ObservationPick, World};

fn accepted() -> AnswerPick {
    AnswerPick::Accepted { variant: 0, invalid: false }
}

/// The real machine keeps the invariant in this world; the broken one does not, and says `expected`.
fn caught(
    fixture: &'static Fixture,
    world: &World,
    broken: Decide<'_>,
    invariant: impl Fn(&Trace, Decide<'_>) -> Verdict,
    expected: &str,
) {
    let real = drive(fixture, world, &decide);
    if let Err(e) = invariant(&real, &decide) {
        panic!("the real machine should keep the invariant in this world:\n{e}");
    }
    let trace = drive(fixture, world, broken);
    match invariant(&trace, broken) {
        Ok(()) => panic!("the invariant missed the broken rule:\n{}", trace.excerpt(trace.entries.len() - 1)),
        Err(message) => assert!(message.contains(expected), "expected `{expected}` in:\n{message}"),
    }
}

fn is_non_read_call(workflow: &Workflow, step: &str) -> bool {
    workflow.operation_of(step).is_some_and(|(_, op)| op.descriptor.effect != Effect::Read)
}

/// Determinism: a machine whose retry times drift with a hidden global counter.
#[test]
fn determinism_catches_a_machine_with_hidden_state() {
    static CALLS: AtomicI64 = AtomicI64::new(0);
    let broken = |wf: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings| {
        let mut t = decide(wf, run, event, now, settings);
        let calls = CALLS.fetch_add(1, Ordering::Relaxed);
        for action in &mut t.actions {
            if let Action::Dispatch { not_before, .. } = action {
                *not_before = Instant(not_before.0 + calls);
            }
        }
        t
    };
    let fixture = fixtures::reviewed_notice();
    let world = World { answers: vec![AnswerPick::Retryable { after: None }], ..World::calm() };
    caught(fixture, &world, &broken, |t, d| invariants::determinism(&fixture.workflow, t, d), "determinism: replaying");
}

/// No silent stall: a machine that forgets to set any timer but the deadline.
#[test]
fn stall_catches_a_machine_that_drops_its_timers() {
    let broken = |wf: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings| {
        let mut t = decide(wf, run, event, now, settings);
        t.actions.retain(|a| !matches!(a, Action::ScheduleTimer { timer, .. } if *timer != Timer::RunDeadline));
        t
    };
    let fixture = fixtures::reviewed_notice();
    caught(fixture, &World::calm(), &broken, |t, _| invariants::no_silent_stall(t), "stall: after event");
}

/// Resend: a machine that resends a mutation after an uncertain answer, as it may for a read.
#[test]
fn resend_catches_a_machine_that_repeats_an_uncertain_mutation() {
    let broken = |wf: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings| {
        let mut t = decide(wf, run, event, now, settings);
        if let Event::CallAnswered { step, attempt, answer: CallAnswer::Uncertain } = event
            && is_non_read_call(wf, step)
        {
            for action in &mut t.actions {
                if let Action::EnterAttention { reason: Attention::UnknownEffect { .. } } = action {
                    *action = Action::Dispatch { step: step.clone(), attempt: attempt + 1, not_before: now };
                }
            }
        }
        t
    };
    let fixture = fixtures::reviewed_notice();
    // read-application accepted; request-review uncertain, then (resent) accepted.
    let world = World { answers: vec![accepted(), AnswerPick::Uncertain], ..World::calm() };
    caught(
        fixture,
        &world,
        &broken,
        |t, _| invariants::no_resend_without_retry_same(&fixture.workflow, t),
        "resend: attempt 2 of Some(Mutation) step `request-review`",
    );
}

/// Unknown passed: a machine that treats an uncertain mutation as if it had been accepted,
/// recording the effect as unknown but continuing at `next`.
#[test]
fn unknown_passed_catches_a_machine_that_continues_past_an_unknown_effect() {
    let fixture = fixtures::reviewed_notice();
    let broken = |wf: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings| {
        let Event::CallAnswered { step, attempt, answer: CallAnswer::Uncertain } = event else {
            return decide(wf, run, event, now, settings);
        };
        if !is_non_read_call(wf, step) {
            return decide(wf, run, event, now, settings);
        }
        let answer = fixture.answer(step, 0, false);
        let as_if = CallAnswer::Accepted { output: answer.output, completions: answer.completions };
        let mut t = decide(
            wf,
            run,
            &Event::CallAnswered { step: step.clone(), attempt: *attempt, answer: as_if },
            now,
            settings,
        );
        for action in &mut t.actions {
            if let Action::RecordEffect { step: s, effect, output, completions, .. } = action
                && s == step
            {
                *effect = EffectState::Unknown;
                *output = None;
                *completions = BTreeMap::new();
            }
        }
        t
    };
    // request-review and read-application go through; send-notice is uncertain.
    let world = World { answers: vec![accepted(), accepted(), AnswerPick::Uncertain], ..World::calm() };
    caught(
        fixture,
        &world,
        &broken,
        |t, _| invariants::unknown_effect_is_never_passed(&fixture.workflow, t),
        "while the effect of `send-notice` was unknown",
    );
}

/// Ended twice: a machine that lets a late cancel end an already finished run again.
#[test]
fn ended_twice_catches_a_machine_that_reends_a_finished_run() {
    let broken = |wf: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings| {
        if matches!(event, Event::CancelRequested) && run.state.is_terminal() {
            let end = Action::EndRun { state: RunState::Cancelled, outcome: None, output: None, failure: None };
            return Transition { actions: vec![end], outcome: Outcome::Applied };
        }
        decide(wf, run, event, now, settings)
    };
    let fixture = fixtures::reviewed_notice();
    // The run finishes at 900 s; the cancel comes after the deadline.
    let world = World { cancel_at: Some(Moment::Permille(1_100)), ..World::calm() };
    caught(
        fixture,
        &world,
        &broken,
        |t, _| invariants::finishes_at_most_once(t),
        "ended twice: the run ended finished",
    );
}

/// Reads: a machine that continues at `next` without saving the accepted output.
#[test]
fn reads_catches_a_machine_that_forgets_an_output() {
    let broken = |wf: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings| {
        let mut t = decide(wf, run, event, now, settings);
        if t.actions.iter().any(|a| matches!(a, Action::EnterStep { .. })) {
            t.actions.retain(|a| !matches!(a, Action::RecordEffect { effect: EffectState::Accepted, .. }));
        }
        t
    };
    let fixture = fixtures::reviewed_notice();
    caught(
        fixture,
        &World::calm(),
        &broken,
        |t, _| invariants::reads_only_saved_outputs(&fixture.workflow, t),
        "entered `request-review`, which reads `read-application`",
    );
}

/// Dispatch under a hold: a machine whose hold leaves the wait's timers set, so the
/// observation timer still fires (and observes) while the run is held.
#[test]
fn dispatch_catches_a_hold_that_keeps_the_timers() {
    let broken = |wf: &Workflow, run: &Run, event: &Event, now: Instant, settings: &Settings| {
        let mut t = decide(wf, run, event, now, settings);
        if matches!(event, Event::RestoreHoldPlaced) {
            t.actions.retain(|a| !matches!(a, Action::CancelTimer { .. }));
        }
        t
    };
    let fixture = fixtures::reviewed_notice();
    // The wait starts at 0 s; the hold comes at 100 s and is never released; the observation is due at 900 s.
    let world = World {
        hold: Some(HoldPlan { place: Moment::Seconds(100), release_after: None }),
        observation_tail: ObservationPick::Pending,
        ..World::calm()
    };
    caught(
        fixture,
        &world,
        &broken,
        |t, _| invariants::nothing_dispatched_when_ended_or_held(t),
        "`observe await-review#1` although a restore hold was placed",
    );
}
