//! A recorded drive: every event with its instant, the snapshot before, the
//! transition and the snapshot after, and a readable excerpt for failure messages.

use coordinator_core::machine::action::Action;
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Transition};

/// One event as the machine decided it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub event: Event,
    pub now: Instant,
    pub before: Run,
    pub transition: Transition,
    pub after: Run,
}

impl Entry {
    /// The actions that were persisted (none unless the outcome was `Applied`).
    pub fn applied(&self) -> &[Action] {
        match self.transition.outcome {
            Outcome::Applied => &self.transition.actions,
            Outcome::Ignored { .. } | Outcome::Refused { .. } => &[],
        }
    }
}

/// A whole drive.
#[derive(Debug, Clone)]
pub struct Trace {
    pub fixture: &'static str,
    pub initial: Run,
    pub entries: Vec<Entry>,
    /// Whether the driver stopped at [`MAX_EVENTS`] rather than because nothing was left.
    pub bounded: bool,
}

impl Trace {
    /// The snapshot after the last event.
    pub fn last(&self) -> &Run {
        self.entries.last().map_or(&self.initial, |e| &e.after)
    }

    /// A readable excerpt of the trace up to entry `index`: when, what, and what came of it.
    pub fn excerpt(&self, index: usize) -> String {
        let start = index.saturating_sub(10);
        let admitted = self.initial.admitted_at;
        let mut out = format!("{} trace, entries {start}..={index} of {}:\n", self.fixture, self.entries.len());
        for (i, entry) in self.entries.iter().enumerate().take(index + 1).skip(start) {
            let at = entry.now.0.saturating_sub(admitted.0);
            let outcome = match &entry.transition.outcome {
                Outcome::Applied => {
                    let kinds: Vec<String> = entry
                        .transition
                        .actions
                        .iter()
                        .filter(|a| !matches!(a, Action::Audit { .. }))
                        .map(short)
                        .collect();
                    format!("applied [{}]", kinds.join(", "))
                }
                Outcome::Ignored { reason } => format!("ignored ({reason})"),
                Outcome::Refused { code, .. } => format!("refused ({code})"),
            };
            out.push_str(&format!(
                "  #{i} t+{}.{:03}s {:?} -> {outcome}; now {} at {:?}\n",
                at / 1000,
                at % 1000,
                entry.event,
                entry.after.state,
                entry.after.current
            ));
        }
        out
    }
}

/// A one-line description of an action (no payloads).
pub fn short(action: &Action) -> String {
    match action {
        Action::EnterStep { step } => format!("enter {step}"),
        Action::PrepareCommand { step, .. } => format!("prepare {step}"),
        Action::Dispatch { step, attempt, .. } => format!("dispatch {step}#{attempt}"),
        Action::RecordEffect { step, attempt, effect, .. } => format!("effect {step}#{attempt}={effect}"),
        Action::RequestReceipt { step } => format!("receipt? {step}"),
        Action::RecordReceipt { step, result } => format!("receipt {step}={result}"),
        Action::StartWait { step, .. } => format!("start-wait {step}"),
        Action::StartTimer { step, .. } => format!("start-timer {step}"),
        Action::ScheduleTimer { timer, .. } => format!("schedule {timer:?}"),
        Action::CancelTimer { timer } => format!("unschedule {timer:?}"),
        Action::Observe { step, seq, .. } => format!("observe {step}#{seq}"),
        Action::RecordObservation { step, counted } => format!("observed {step} counted={counted}"),
        Action::ResolveWait { step, resolution, .. } => format!("resolve {step} {resolution:?}"),
        Action::EnterAttention { reason } => format!("attention {reason:?}"),
        Action::LeaveAttention => "leave-attention".to_owned(),
        Action::RequestCancel { mode } => format!("cancel {mode:?}"),
        Action::EndRun { state, outcome, failure, .. } => {
            format!("end {state} outcome={outcome:?} failure={:?}", failure.as_ref().map(|f| &f.code))
        }
        Action::PlaceHold => "hold".to_owned(),
        Action::ReleaseHold => "release".to_owned(),
        Action::Audit { .. } => "audit".to_owned(),
    }
}
