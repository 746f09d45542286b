//! The driver: runs one fixture through a decide function on a virtual clock,
//! answering for products, operators and the clock from a random [`World`], and
//! records every event with its transition and the snapshot after it.
//!
//! It follows the scenario runner (`coordinator_core::scenario`): the next event
//! is the earliest of the run's timers, the replies it waits for (an attempt's
//! answer, a receipt, an observation, each arriving after the world's latency),
//! and the world's cancel, operator requests, notifications and restore hold; at
//! the same instant the order is deadline, cancel, hold, wait timeout,
//! notification, then timers and replies, and an operator acts last. The operator
//! acts whenever the current call's effect is unknown (in attention, or while a
//! retry-same is under way), as one watching `inspect` could.
//!
//! Unlike the scenario runner it keeps going after the run ends, delivering what
//! the world still has scheduled (late answers, a hold release, a cancel, a
//! reconcile), because what happens to an ended run is part of what the
//! invariants check. Every scheduled thing is delivered at most once, so a decide
//! that ignores its own timers cannot spin the driver.

use std::collections::{BTreeMap, BTreeSet};

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event, Observation, ReceiptAnswer, Timer};
use coordinator_core::machine::run::{Attention, Pending, Run, StepRecord};
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, Transition};
use coordinator_core::model::run::EffectState;
use coordinator_core::model::workflow::Step;

use super::fixtures::Fixture;
use super::trace::{Entry, Trace};
use super::world::{AnswerPick, Moment, ObservationPick, OperatorPick, ReceiptPick, World};

/// A decide function: the real `coordinator_core::machine::decide`, or a deliberately broken wrapper of it.
pub type Decide<'a> = &'a dyn Fn(&Workflow, &Run, &Event, Instant, &Settings) -> Transition;

/// Upper bound on events per trace; reaching it is reported by the stall invariant.
pub const MAX_EVENTS: usize = 20_000;

/// What the driver will deliver next, and when.
struct Next {
    at: Instant,
    precedence: u8,
    what: What,
}

enum What {
    Timer(Timer),
    Reply(Reply),
    Operator { step: String },
    Request,
    Cancel,
    Notification,
    PlaceHold,
    ReleaseHold,
}

/// A product reply the run waits for: to an attempt, an observation (by sequence
/// number) or the nth receipt lookup of a step.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Reply {
    Answer { step: String, attempt: u32 },
    Observation { step: String, seq: u32 },
    Receipt { step: String, lookup: u32 },
}

/// The world being played out: cursors into its tapes and what is in flight or delivered.
struct Play<'a> {
    fixture: &'a Fixture,
    world: &'a World,
    answers: usize,
    latencies: usize,
    observations: usize,
    receipts: usize,
    operator: usize,
    operator_gone: bool,
    cancel_at: Option<Instant>,
    /// Operator requests not yet made, earliest first.
    requests: Vec<(Instant, OperatorPick, u8)>,
    notifications: Vec<(Instant, String)>,
    hold_at: Option<Instant>,
    release_at: Option<Instant>,
    timers_fired: BTreeSet<(Timer, Instant)>,
    /// When each reply in flight arrives.
    arrivals: BTreeMap<Reply, Instant>,
    delivered: BTreeSet<Reply>,
    /// Receipt lookups queued so far, per step.
    lookups: BTreeMap<String, u32>,
    ended_at: Option<Instant>,
}

impl<'a> Play<'a> {
    fn new(fixture: &'a Fixture, world: &'a World) -> Play<'a> {
        let admitted = fixture.admitted_at;
        let deadline = fixture.deadline_seconds();
        let at = |m: Moment| admitted.plus_seconds(m.seconds(deadline));
        let waits = fixture.wait_for_steps();
        let mut notifications: Vec<(Instant, String)> = if waits.is_empty() {
            Vec::new()
        } else {
            world.notifications.iter().map(|(m, i)| (at(*m), waits[usize::from(*i) % waits.len()].clone())).collect()
        };
        notifications.sort();
        let mut requests: Vec<(Instant, OperatorPick, u8)> =
            world.requests.iter().map(|(m, pick, target)| (at(*m), *pick, *target)).collect();
        requests.sort_by_key(|(t, _, _)| *t);
        let hold_at = world.hold.map(|h| at(h.place));
        let release_at = world.hold.and_then(|h| {
            let place = h.place.seconds(deadline);
            h.release_after.map(|r| admitted.plus_seconds(place.saturating_add(r.seconds(deadline))))
        });
        Play {
            fixture,
            world,
            answers: 0,
            latencies: 0,
            observations: 0,
            receipts: 0,
            operator: 0,
            operator_gone: false,
            cancel_at: world.cancel_at.map(at),
            requests,
            notifications,
            hold_at,
            release_at,
            timers_fired: BTreeSet::new(),
            arrivals: BTreeMap::new(),
            delivered: BTreeSet::new(),
            lookups: BTreeMap::new(),
            ended_at: None,
        }
    }

    /// Counts the receipt lookups a transition queued.
    fn note(&mut self, actions: &[Action]) {
        for action in actions {
            if let Action::RequestReceipt { step } = action {
                *self.lookups.entry(step.clone()).or_default() += 1;
            }
        }
    }

    /// The replies the run waits for now, each with when it was sent.
    fn awaited(&self, run: &Run, now: Instant) -> Vec<(Reply, Instant)> {
        let mut out = Vec::new();
        for (step, record) in &run.steps {
            match record {
                StepRecord::Call(call) => match call.pending {
                    // An attempt still in backoff when the run ended is never sent.
                    Pending::Attempt { not_before } if self.ended_at.is_none_or(|end| not_before <= end) => {
                        out.push((Reply::Answer { step: step.clone(), attempt: call.attempt }, not_before.max(now)));
                    }
                    Pending::Receipt => {
                        let lookup = self.lookups.get(step).copied().unwrap_or(0);
                        out.push((Reply::Receipt { step: step.clone(), lookup }, now));
                    }
                    Pending::Attempt { .. } | Pending::Nothing => {}
                },
                StepRecord::WaitFor(wait) if wait.observing => {
                    out.push((Reply::Observation { step: step.clone(), seq: wait.seq }, now));
                }
                StepRecord::WaitFor(_) | StepRecord::Entered | StepRecord::WaitUntil { .. } => {}
            }
        }
        out
    }

    /// Gives every newly awaited reply its arrival time (send time plus the next latency).
    fn send(&mut self, run: &Run, now: Instant) {
        let deadline = self.fixture.deadline_seconds();
        for (reply, sent) in self.awaited(run, now) {
            if self.arrivals.contains_key(&reply) || self.delivered.contains(&reply) {
                continue;
            }
            let latency = self.world.latencies.get(self.latencies).map_or(0, |m| m.seconds(deadline));
            self.latencies += 1;
            self.arrivals.insert(reply, sent.plus_seconds(latency));
        }
    }

    fn candidates(&self, run: &Run, now: Instant) -> Vec<Next> {
        let mut out = Vec::new();
        for (timer, at) in &run.timers {
            if self.timers_fired.contains(&(timer.clone(), *at)) {
                continue;
            }
            let precedence = match timer {
                Timer::RunDeadline => 0,
                Timer::WaitTimeout { .. } => 3,
                Timer::Observation { .. } | Timer::WaitUntil { .. } => 5,
            };
            out.push(Next { at: (*at).max(now), precedence, what: What::Timer(timer.clone()) });
        }
        if let Some(at) = self.cancel_at {
            out.push(Next { at: at.max(now), precedence: 1, what: What::Cancel });
        }
        if let Some(at) = self.hold_at {
            out.push(Next { at: at.max(now), precedence: 2, what: What::PlaceHold });
        } else if let Some(at) = self.release_at {
            out.push(Next { at: at.max(now), precedence: 2, what: What::ReleaseHold });
        }
        if let Some((at, _)) = self.notifications.first() {
            out.push(Next { at: (*at).max(now), precedence: 4, what: What::Notification });
        }
        for (reply, _) in self.awaited(run, now) {
            if let Some(at) = self.arrivals.get(&reply).filter(|_| !self.delivered.contains(&reply)) {
                out.push(Next { at: (*at).max(now), precedence: 5, what: What::Reply(reply) });
            }
        }
        if let Some((at, _, _)) = self.requests.first() {
            out.push(Next { at: (*at).max(now), precedence: 6, what: What::Request });
        }
        let busy_now = out.iter().any(|c| c.at == now);
        if !busy_now && !self.operator_gone && self.operator < self.world.operator.len() {
            let unknown = match &run.attention {
                Some(Attention::UnknownEffect { step }) => Some(step.clone()),
                Some(Attention::RestoreHold) => None,
                // An operator who sees an unknown effect may act on it while a retry-same is
                // under way, and after the run ended.
                None => run
                    .steps
                    .iter()
                    .find(|(s, r)| {
                        let watched = run.state.is_terminal() || run.current.as_ref() == Some(*s);
                        watched && matches!(r, StepRecord::Call(c) if c.effect == EffectState::Unknown)
                    })
                    .map(|(s, _)| s.clone()),
            };
            if let Some(step) = unknown {
                out.push(Next { at: now, precedence: 6, what: What::Operator { step } });
            }
        }
        out
    }

    /// Turns the chosen next thing into its event (and whether it is delivered twice), consuming the tapes.
    fn event(&mut self, what: What, at: Instant, run: &Run) -> Option<(Event, bool)> {
        let event = match what {
            What::Timer(timer) => {
                self.timers_fired.insert((timer.clone(), at));
                Event::TimerDue { timer }
            }
            What::Cancel => {
                self.cancel_at = None;
                Event::CancelRequested
            }
            What::PlaceHold => {
                self.hold_at = None;
                Event::RestoreHoldPlaced
            }
            What::ReleaseHold => {
                self.release_at = None;
                Event::RestoreHoldReleased
            }
            What::Notification => {
                let (_, step) = self.notifications.remove(0);
                Event::CompletionNotified { step }
            }
            What::Reply(reply) => return Some(self.reply(reply)),
            What::Request => {
                let (_, pick, target) = self.requests.remove(0);
                let calls: Vec<&String> = self
                    .fixture
                    .workflow
                    .definition
                    .steps
                    .iter()
                    .filter(|(_, s)| matches!(s, Step::Call(_)))
                    .map(|(id, _)| id)
                    .collect();
                let step = match (&run.current, target % 2) {
                    (Some(current), 0) => current.clone(),
                    _ => calls[usize::from(target / 2) % calls.len()].clone(),
                };
                match pick {
                    OperatorPick::Reconcile => Event::ReconcileRequested { step },
                    OperatorPick::RetrySame => Event::RetrySameRequested { step },
                    OperatorPick::Cancel | OperatorPick::Stop => Event::CancelRequested,
                }
            }
            What::Operator { step } => {
                let pick = self.world.operator[self.operator];
                self.operator += 1;
                match pick {
                    OperatorPick::Reconcile => Event::ReconcileRequested { step },
                    OperatorPick::RetrySame => Event::RetrySameRequested { step },
                    OperatorPick::Cancel => Event::CancelRequested,
                    OperatorPick::Stop => {
                        self.operator_gone = true;
                        return None;
                    }
                }
            }
        };
        Some((event, false))
    }

    fn reply(&mut self, reply: Reply) -> (Event, bool) {
        self.delivered.insert(reply.clone());
        match reply {
            Reply::Answer { step, attempt } => {
                let index = self.answers;
                self.answers += 1;
                let pick = self.world.answers.get(index).copied();
                let duplicate = self.world.duplicates.get(index).copied().unwrap_or(false);
                let answer =
                    self.call_answer(&step, pick.unwrap_or(AnswerPick::Accepted { variant: 0, invalid: false }));
                (Event::CallAnswered { step, attempt, answer }, duplicate)
            }
            Reply::Receipt { step, .. } => {
                let pick = self.world.receipts.get(self.receipts).copied().unwrap_or(ReceiptPick::Unavailable);
                self.receipts += 1;
                let answer = match pick {
                    ReceiptPick::Found { variant, invalid } => {
                        let a = self.fixture.answer(&step, variant, invalid);
                        ReceiptAnswer::Found { output: a.output, completions: a.completions }
                    }
                    ReceiptPick::NotFound => ReceiptAnswer::NotFound,
                    ReceiptPick::Expired => ReceiptAnswer::Expired,
                    ReceiptPick::Unavailable => ReceiptAnswer::Unavailable,
                };
                (Event::ReceiptAnswered { step, answer }, false)
            }
            Reply::Observation { step, seq } => {
                let pick =
                    self.world.observations.get(self.observations).copied().unwrap_or(self.world.observation_tail);
                self.observations += 1;
                let answer = match pick {
                    ObservationPick::Pending => Observation::Pending,
                    ObservationPick::Unavailable => Observation::Unavailable,
                    ObservationPick::Complete { variant, invalid } => {
                        Observation::Complete { value: self.fixture.completion(&step, variant, invalid) }
                    }
                };
                (Event::CompletionObserved { step, seq, answer }, false)
            }
        }
    }

    fn call_answer(&self, step: &str, pick: AnswerPick) -> CallAnswer {
        match pick {
            AnswerPick::Accepted { variant, invalid } => {
                let a = self.fixture.answer(step, variant, invalid);
                CallAnswer::Accepted { output: a.output, completions: a.completions }
            }
            AnswerPick::RefusedDeclared { index } => {
                let declared = self
                    .fixture
                    .workflow
                    .operation_of(step)
                    .map(|(_, op)| op.descriptor.declared_refusals.clone())
                    .unwrap_or_default();
                let code = if declared.is_empty() {
                    "not-declared".to_owned()
                } else {
                    declared[usize::from(index) % declared.len()].clone()
                };
                CallAnswer::Refused { code }
            }
            AnswerPick::RefusedUndeclared => CallAnswer::Refused { code: "not-declared".to_owned() },
            AnswerPick::Retryable { after } => CallAnswer::Retryable { retry_after_seconds: after },
            AnswerPick::Uncertain => CallAnswer::Uncertain,
        }
    }
}

/// Drives a fixture through `decide` in a world and records the trace.
pub fn drive(fixture: &'static Fixture, world: &World, decide: Decide<'_>) -> Trace {
    let settings = Settings::default();
    let input = fixture.inputs[usize::from(world.input) % fixture.inputs.len()].clone();
    let initial = Run::new("run-1", &fixture.workflow.revision, fixture.admitted_at, input);
    let mut run = initial.clone();
    let mut play = Play::new(fixture, world);
    let mut entries: Vec<Entry> = Vec::new();
    let mut now = fixture.admitted_at;
    let mut queued: Option<Event> = Some(Event::Admitted);
    let mut bounded = false;
    loop {
        let event = match queued.take() {
            Some(event) => event,
            None => {
                play.send(&run, now);
                let candidates = play.candidates(&run, now);
                let Some(best) = candidates.into_iter().min_by_key(|c| (c.at, c.precedence)) else { break };
                now = now.max(best.at);
                let Some((event, duplicate)) = play.event(best.what, best.at, &run) else { continue };
                if duplicate {
                    queued = Some(event.clone());
                }
                event
            }
        };
        if entries.len() >= MAX_EVENTS {
            bounded = true;
            break;
        }
        let transition = decide(&fixture.workflow, &run, &event, now, &settings);
        let before = run.clone();
        let applied: &[Action] = match transition.outcome {
            Outcome::Applied => &transition.actions,
            Outcome::Ignored { .. } | Outcome::Refused { .. } => &[],
        };
        for action in applied {
            run.apply(action);
        }
        play.note(applied);
        if run.state.is_terminal() && play.ended_at.is_none() {
            play.ended_at = Some(now);
        }
        entries.push(Entry { event, now, before, transition, after: run.clone() });
    }
    Trace { fixture: fixture.name, initial, entries, bounded }
}

/// Applies a fixed list of events (at seconds after admission) to a fixture's run and records the trace:
/// the regression tests spell out a minimal sequence this way.
pub fn replay(fixture: &'static Fixture, input: usize, events: &[(u64, Event)], decide: Decide<'_>) -> Trace {
    let settings = Settings::default();
    let initial = Run::new("run-1", &fixture.workflow.revision, fixture.admitted_at, fixture.inputs[input].clone());
    let mut run = initial.clone();
    let mut entries = Vec::new();
    for (seconds, event) in events {
        let now = fixture.admitted_at.plus_seconds(*seconds);
        let transition = decide(&fixture.workflow, &run, event, now, &settings);
        let before = run.clone();
        if let Outcome::Applied = transition.outcome {
            for action in &transition.actions {
                run.apply(action);
            }
        }
        entries.push(Entry { event: event.clone(), now, before, transition, after: run.clone() });
    }
    Trace { fixture: fixture.name, initial, entries, bounded: false }
}
