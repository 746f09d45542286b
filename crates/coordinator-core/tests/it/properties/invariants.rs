//! The invariants, each a function over a recorded trace that says what broke and where.
//!
//! Several replay a transition's actions one at a time on the snapshot it
//! started from, so they see the run as it was when each action was decided
//! (a step entered after an effect was settled in the same transition is fine;
//! one entered while it is still unknown is not).

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event, Timer};
use coordinator_core::machine::run::{Pending, Run, StepRecord};
use coordinator_core::machine::{Outcome, Settings};
use coordinator_core::model::catalog::Effect;
use coordinator_core::model::run::{EffectState, RunState};
use coordinator_core::model::workflow::{Source, Step};

use super::driver::Decide;
use super::trace::{Entry, Trace, short};

/// What an invariant reports.
pub type Verdict = Result<(), String>;

fn at(trace: &Trace, index: usize, problem: String) -> String {
    format!("{problem}\n{}", trace.excerpt(index))
}

/// The effect kind of a call step's operation (`None` for other steps).
fn effect_of(workflow: &Workflow, step: &str) -> Option<Effect> {
    workflow.operation_of(step).map(|(_, op)| op.descriptor.effect)
}

/// Visits every persisted action with the snapshot as it was just before that action.
fn walk(trace: &Trace, mut visit: impl FnMut(usize, &Entry, &Run, &Action) -> Verdict) -> Verdict {
    for (i, entry) in trace.entries.iter().enumerate() {
        let mut run = entry.before.clone();
        for action in entry.applied() {
            visit(i, entry, &run, action)?;
            run.apply(action);
        }
    }
    Ok(())
}

/// Invariant 1. Determinism: replaying the recorded events at their recorded instants from
/// the same initial run gives the same transitions and snapshots.
pub fn determinism(workflow: &Workflow, trace: &Trace, decide: Decide<'_>) -> Verdict {
    let settings = Settings::default();
    let mut run = trace.initial.clone();
    for (i, entry) in trace.entries.iter().enumerate() {
        let transition = decide(workflow, &run, &entry.event, entry.now, &settings);
        if transition != entry.transition {
            return Err(at(
                trace,
                i,
                format!(
                    "determinism: replaying event #{i} ({:?}) gave a different transition\n  \
                     first: {:?}\n  again: {:?}",
                    entry.event, entry.transition, transition
                ),
            ));
        }
        if let Outcome::Applied = transition.outcome {
            for action in &transition.actions {
                run.apply(action);
            }
        }
        if run != entry.after {
            return Err(at(trace, i, format!("determinism: replaying event #{i} gave a different snapshot")));
        }
    }
    Ok(())
}

/// Whether the run has work of its own under way: a timer of its current step, a
/// queued attempt or receipt lookup, or an observation in flight. The run deadline
/// does not count: a run that only waits for its deadline has stalled.
fn scheduled(run: &Run) -> bool {
    let Some(current) = run.current.as_deref() else { return false };
    let timer = run.timers.keys().any(|t| match t {
        Timer::RunDeadline => false,
        Timer::WaitUntil { step } | Timer::Observation { step } | Timer::WaitTimeout { step } => step == current,
    });
    let work = match run.steps.get(current) {
        Some(StepRecord::Call(call)) => call.pending != Pending::Nothing,
        Some(StepRecord::WaitFor(wait)) => wait.observing,
        Some(StepRecord::Entered | StepRecord::WaitUntil { .. }) | None => false,
    };
    timer || work
}

/// Invariant 2. No silent stall: after every event the run is terminal, needs an operator
/// (attention), or has its own work scheduled; when the driver has delivered
/// everything it had, the run is terminal or needs an operator.
pub fn no_silent_stall(trace: &Trace) -> Verdict {
    if trace.bounded {
        let last = trace.entries.len().saturating_sub(1);
        return Err(at(trace, last, format!("stall: the run was still busy after {} events", trace.entries.len())));
    }
    for (i, entry) in trace.entries.iter().enumerate() {
        let run = &entry.after;
        if run.state.is_terminal() || run.attention.is_some() || scheduled(run) {
            continue;
        }
        return Err(at(
            trace,
            i,
            format!(
                "stall: after event #{i} the run is {} at {:?} with nothing scheduled but its deadline \
                 (timers {:?}, no queued attempt, lookup or observation)",
                run.state,
                run.current,
                run.timers.keys().collect::<Vec<_>>()
            ),
        ));
    }
    let last = trace.last();
    if !last.state.is_terminal() && last.attention.is_none() {
        let i = trace.entries.len().saturating_sub(1);
        return Err(at(
            trace,
            i,
            format!(
                "stall: the driver delivered everything scheduled and the run is still {} at {:?}",
                last.state, last.current
            ),
        ));
    }
    Ok(())
}

/// Invariant 3. A command that may have reached its product is sent again only at an
/// operator's retry-same, or after an answer that says the last attempt was
/// definitely not done. (Reads are read again freely.)
pub fn no_resend_without_retry_same(workflow: &Workflow, trace: &Trace) -> Verdict {
    walk(trace, |i, entry, _, action| {
        let Action::Dispatch { step, attempt, .. } = action else { return Ok(()) };
        if *attempt <= 1 || effect_of(workflow, step) == Some(Effect::Read) {
            return Ok(());
        }
        let allowed = match &entry.event {
            Event::RetrySameRequested { step: s } => s == step,
            Event::CallAnswered { step: s, attempt: a, answer: CallAnswer::Retryable { .. } } => {
                s == step && a + 1 == *attempt
            }
            _ => false,
        };
        if allowed {
            return Ok(());
        }
        Err(at(
            trace,
            i,
            format!(
                "resend: attempt {attempt} of {:?} step `{step}` was dispatched on {:?}, \
                 which is neither a retry-same for it nor a retryable answer to attempt {}",
                effect_of(workflow, step),
                entry.event,
                attempt - 1
            ),
        ))
    })
}

/// The first non-read call step whose effect is unknown in `run`.
fn unknown_effect(workflow: &Workflow, run: &Run) -> Option<String> {
    run.steps.iter().find_map(|(step, record)| match record {
        StepRecord::Call(c) if c.effect == EffectState::Unknown && effect_of(workflow, step) != Some(Effect::Read) => {
            Some(step.clone())
        }
        _ => None,
    })
}

/// Invariant 4. An unknown effect is never passed silently: while a mutation's (or an
/// evaluation's) effect is unknown the run enters no step and does not finish.
pub fn unknown_effect_is_never_passed(workflow: &Workflow, trace: &Trace) -> Verdict {
    walk(trace, |i, entry, run, action| {
        let passes = match action {
            Action::EnterStep { .. } => true,
            Action::EndRun { state, .. } => *state == RunState::Finished,
            _ => false,
        };
        if !passes {
            return Ok(());
        }
        match unknown_effect(workflow, run) {
            None => Ok(()),
            Some(step) => Err(at(
                trace,
                i,
                format!(
                    "unknown passed: on {:?} the run did `{}` while the effect of `{step}` was unknown \
                     (never settled by a found receipt or an accepted retry-same)",
                    entry.event,
                    short(action)
                ),
            )),
        }
    })
}

/// Invariant 5. A run finishes at most once: one `EndRun` in the whole trace; after it only
/// late effects, receipts and audit entries, and the state never changes again.
pub fn finishes_at_most_once(trace: &Trace) -> Verdict {
    let mut ended: Option<(usize, RunState)> = None;
    walk(trace, |i, entry, _, action| {
        if let Some((first, state)) = ended {
            let late = matches!(
                action,
                Action::RecordEffect { .. }
                    | Action::RecordReceipt { .. }
                    | Action::RequestReceipt { .. }
                    | Action::Audit { .. }
            );
            if !late {
                return Err(at(
                    trace,
                    i,
                    format!(
                        "ended twice: the run ended {state} at event #{first}, then {:?} led to `{}`",
                        entry.event,
                        short(action)
                    ),
                ));
            }
        }
        if let Action::EndRun { state, .. } = action {
            ended = Some((i, *state));
        }
        Ok(())
    })?;
    if let Some((first, state)) = ended
        && let Some((i, entry)) = trace.entries.iter().enumerate().skip(first).find(|(_, e)| e.after.state != state)
    {
        return Err(at(
            trace,
            i,
            format!(
                "ended twice: the run ended {state} at event #{first}, and after {:?} it is {}",
                entry.event, entry.after.state
            ),
        ));
    }
    Ok(())
}

/// The steps a step reads: `{type: step}` sources of its mappings, and a wait-for's call.
fn reads(step: &Step) -> Vec<String> {
    let mut out: Vec<String> = step
        .mappings()
        .into_iter()
        .flat_map(|(_, m)| m.arguments.iter())
        .filter_map(|s| match s {
            Source::Step { step } => Some(step.clone()),
            Source::Input | Source::Literal { .. } | Source::Run | Source::Event => None,
        })
        .collect();
    if let Step::WaitFor(w) = step {
        out.push(w.completion.step.clone());
    }
    out
}

/// Invariant 6. `{type: step}` reads only saved outputs: whenever a step is entered, every
/// step it reads has an accepted output (a call) or a completion value (a wait-for).
pub fn reads_only_saved_outputs(workflow: &Workflow, trace: &Trace) -> Verdict {
    walk(trace, |i, entry, run, action| {
        let Action::EnterStep { step } = action else { return Ok(()) };
        let Some(definition) = workflow.step(step) else {
            return Err(at(trace, i, format!("reads: the run entered `{step}`, which the workflow does not have")));
        };
        for read in reads(definition) {
            let saved = match run.steps.get(&read) {
                Some(StepRecord::Call(c)) => c.effect == EffectState::Accepted && c.output.is_some(),
                Some(StepRecord::WaitFor(_)) => run.output_of(&read).is_some(),
                Some(StepRecord::Entered | StepRecord::WaitUntil { .. }) | None => false,
            };
            if !saved {
                return Err(at(
                    trace,
                    i,
                    format!(
                        "reads: on {:?} the run entered `{step}`, which reads `{read}`, \
                         but `{read}` has no saved output ({:?})",
                        entry.event,
                        run.steps.get(&read).map(describe_record)
                    ),
                ));
            }
        }
        Ok(())
    })
}

fn describe_record(record: &StepRecord) -> String {
    match record {
        StepRecord::Entered => "entered".to_owned(),
        StepRecord::Call(c) => format!("call effect {} pending {:?}", c.effect, c.pending),
        StepRecord::WaitFor(w) => format!("wait-for resolution {:?}", w.resolution),
        StepRecord::WaitUntil { resolution, .. } => format!("wait-until resolution {resolution:?}"),
    }
}

/// Invariant 7. Nothing is dispatched, observed or scheduled after the run ended or under a
/// restore hold: no `Dispatch`/`Observe` in a transition that starts from an ended
/// run or (unless it releases the hold) a held one, none at a point where the run
/// is ended or held, and no timer but the deadline set while held.
pub fn nothing_dispatched_when_ended_or_held(trace: &Trace) -> Verdict {
    walk(trace, |i, entry, run, action| {
        let sends = matches!(action, Action::Dispatch { .. } | Action::Observe { .. });
        let sets_timer = matches!(action, Action::ScheduleTimer { timer, .. } if *timer != Timer::RunDeadline);
        if !sends && !sets_timer {
            return Ok(());
        }
        let releasing = matches!(entry.event, Event::RestoreHoldReleased);
        let problem = if entry.before.state.is_terminal() {
            Some(format!("the run had ended ({})", entry.before.state))
        } else if entry.before.held && !releasing {
            Some("a restore hold was placed".to_owned())
        } else if run.state.is_terminal() {
            Some(format!("the run had just ended ({})", run.state))
        } else if run.held {
            Some("the run had just been held".to_owned())
        } else {
            None
        };
        match problem {
            None => Ok(()),
            Some(why) => {
                Err(at(trace, i, format!("dispatch: on {:?} `{}` although {why}", entry.event, short(action))))
            }
        }
    })
}

/// Every invariant; all failures, one paragraph each.
pub fn all(workflow: &Workflow, trace: &Trace, decide: Decide<'_>) -> Verdict {
    let verdicts = [
        determinism(workflow, trace, decide),
        no_silent_stall(trace),
        no_resend_without_retry_same(workflow, trace),
        unknown_effect_is_never_passed(workflow, trace),
        finishes_at_most_once(trace),
        reads_only_saved_outputs(workflow, trace),
        nothing_dispatched_when_ended_or_held(trace),
    ];
    let failures: Vec<String> = verdicts.into_iter().filter_map(Result::err).collect();
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n")) }
}
