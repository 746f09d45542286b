//! The engine's after-commit hooks
//! (docs/internals/engine.md#one-event-one-transaction): once a decision's
//! transaction committed — or the machine ignored or refused the event and
//! nothing was written — its metrics are recorded, its log lines told
//! ([`telemetry::transitions`](crate::telemetry::transitions)), its span ended and, when the run ended, the
//! run's root span exported; the worker is woken when the commit queued work,
//! and the work is announced to other processes ([`crate::dispatch::hints`]). A
//! decision that rolled back or never got decided records, tells and wakes
//! nothing: its span ends marked as an error.
//!
//! It decides nothing and writes nothing to the store.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coordinator_core::machine::action::Action;
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{Event, Timer};
use coordinator_core::machine::time::Instant;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

use crate::engine::Engine;
use crate::engine::error::EngineError;
use crate::telemetry::metrics::{Committed, Decided, event_kind};
use crate::telemetry::traces::{Live, RunTrace};
use crate::telemetry::transitions::{self, RunContext, Transcript};

/// What a report brings besides its event: the run's stored trace parent and
/// the classifier's reason for a product's answer (for logs and spans).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Note {
    /// The caller's `traceparent` the run continues (`runs.trace_parent`).
    pub(crate) trace_parent: Option<String>,
    /// Why the answer was classified as it was (never a value).
    pub(crate) reason: Option<String>,
    /// An operator's stated reason for a command: journaled, never logged.
    pub(crate) remark: Option<String>,
    /// The durable batch the command is part of: its run is marked acted on
    /// in the decision's own transaction ([`crate::engine::batches`]).
    pub(crate) batch: Option<String>,
}

/// What a decision leaves for the after-commit hooks, gathered from its
/// actions inside its transaction.
#[derive(Debug, Clone)]
pub(crate) struct Told {
    /// For the metrics and the worker's wake-up.
    pub(crate) committed: Committed,
    /// What it made claimable, for the dispatch hints.
    pub(crate) due: crate::dispatch::hints::Due,
    /// The lines to tell.
    pub(crate) transcript: Transcript,
    /// When the run was admitted (the start of its root span).
    pub(crate) admitted_at: Instant,
}

impl Told {
    /// The summary of `event`'s transition made of `actions`, decided at `now`, of a run admitted at `admitted_at`.
    pub(crate) fn of(event: &Event, actions: &[Action], now: i64, admitted_at: Instant) -> Told {
        Told {
            committed: Committed::of(actions),
            due: crate::dispatch::hints::Due::of(actions, now),
            transcript: Transcript::of(event, actions, now),
            admitted_at,
        }
    }
}

/// One decision's outcome, handed to [`Engine::record`].
pub(crate) struct After<'a> {
    /// The run's workflow.
    pub(crate) wf: &'a Workflow,
    /// The run.
    pub(crate) run_id: &'a str,
    /// The event decided.
    pub(crate) event: &'a Event,
    /// How applying it went.
    pub(crate) result: &'a Result<(), EngineError>,
    /// What its transition did (`None` when nothing was decided).
    pub(crate) told: Option<Told>,
    /// From the start of the decision to its commit.
    pub(crate) elapsed: Duration,
    /// The classifier's reason for a product's answer, when the worker gave one.
    pub(crate) reason: Option<&'a str>,
    /// The run's trace.
    pub(crate) trace: RunTrace,
    /// The decision's span, started before the transaction.
    pub(crate) span: Live,
}

impl Engine {
    /// The span of one decision of a run (lock → commit), started now.
    pub(crate) fn decision_span(&self, trace: &RunTrace, event: &Event) -> Live {
        self.traces.start(format!("decide {}", event_kind(event)), SpanKind::Internal, Some(trace))
    }

    /// The after-commit hooks of one event's decision (see the module docs).
    pub(crate) fn record(&self, after: After<'_>) {
        let After { wf, run_id, event, result, told, elapsed, reason, trace, mut span } = after;
        let trace_id = self.traces.is_on().then(|| trace.trace_id());
        let run = RunContext {
            run_id,
            workflow: &wf.definition.workflow,
            revision: &wf.revision,
            trace_id: trace_id.as_deref(),
        };
        let decided = match result {
            Ok(()) => Some(Decided::Applied),
            Err(EngineError::Ignored(why)) => {
                transitions::tell_unapplied(run, event, Decided::Ignored, why);
                Some(Decided::Ignored)
            }
            Err(EngineError::Refused { code }) => {
                transitions::tell_unapplied(run, event, Decided::Refused, code);
                Some(Decided::Refused)
            }
            Err(_) => None,
        };
        span.set(|| {
            let mut attributes = run_attributes(run, event);
            attributes.push(KeyValue::new("coordinator.outcome", decided.map_or("error", Decided::as_str)));
            attributes
        });
        if decided.is_none() {
            span.error("the decision was not committed");
        }
        span.end();
        let Some(decided) = decided else { return };
        let told = if decided == Decided::Applied { told } else { None };
        self.metrics().decision(event, decided, told.as_ref().map(|t| t.committed), elapsed);
        let Some(told) = told else { return };
        told.transcript.tell(run, reason);
        self.changed();
        if let Some(state) = told.committed.ended {
            let mut attributes = run_attributes(run, event);
            attributes.push(KeyValue::new("coordinator.state", state.as_str()));
            self.traces.run_ended(&trace, system_time(told.admitted_at), attributes);
        }
        // Work leased to this worker as it committed is not in `due` (`committer`).
        if !told.due.is_empty() {
            self.wake.notify_one();
            let lanes = if self.remote.is_empty() { Vec::new() } else { told.due.lanes(wf, &self.remote) };
            if lanes.iter().any(|lane| matches!(lane, crate::dispatch::hints::Lane::Remote(_))) {
                self.lane_work_queued();
            }
            self.hints.announce(&told.due, wf, &self.remote);
        }
    }
}

/// The attributes every span of a run carries, and the event's.
fn run_attributes(run: RunContext<'_>, event: &Event) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("coordinator.run_id", run.run_id.to_owned()),
        KeyValue::new("coordinator.workflow", run.workflow.to_owned()),
        KeyValue::new("coordinator.revision", run.revision.to_owned()),
        KeyValue::new("coordinator.event", event_kind(event)),
    ];
    if let Some(step) = event_step(event) {
        attributes.push(KeyValue::new("coordinator.step", step.to_owned()));
    }
    attributes
}

/// The step an event concerns, if one.
pub(crate) fn event_step(event: &Event) -> Option<&str> {
    match event {
        Event::CallAnswered { step, .. }
        | Event::ReceiptAnswered { step, .. }
        | Event::CompletionObserved { step, .. }
        | Event::CompletionNotified { step, .. }
        | Event::RetrySameRequested { step }
        | Event::ReconcileRequested { step } => Some(step),
        Event::TimerDue { timer } => match timer {
            Timer::RunDeadline => None,
            Timer::WaitUntil { step } | Timer::Observation { step } | Timer::WaitTimeout { step } => Some(step),
        },
        Event::Admitted | Event::CancelRequested | Event::RestoreHoldPlaced | Event::RestoreHoldReleased => None,
    }
}

fn system_time(at: Instant) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(at.0).unwrap_or(0))
}
