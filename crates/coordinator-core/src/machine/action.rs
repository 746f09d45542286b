//! Actions: what the machine decided, for the caller to persist (the service
//! turns each into SQL in the event's transaction; the scenario runner folds
//! them into its in-memory run). [`Run::apply`](super::run::Run::apply) is the reference meaning of each.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::Timer;
use super::run::{Attention, CancelMode, Command, Failure};
use super::time::Instant;
use crate::model::run::{EffectState, RunState};

/// One decided change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Action {
    /// The run enters a step.
    EnterStep {
        /// The step.
        step: String,
    },
    /// A call's command is prepared and saved (sealed by the service).
    PrepareCommand {
        /// The call step.
        step: String,
        /// The command.
        command: Command,
    },
    /// An attempt of a call is queued for dispatch, not before `not_before`.
    Dispatch {
        /// The call step.
        step: String,
        /// The attempt number (the fencing token of the outbox row).
        attempt: u32,
        /// Earliest send time (a retry's backoff).
        not_before: Instant,
    },
    /// An answer (or a conclusion about an attempt) is recorded on a call.
    RecordEffect {
        /// The call step.
        step: String,
        /// The attempt it concerns.
        attempt: u32,
        /// The call's effect from now on.
        effect: EffectState,
        /// The accepted output (sealed by the service).
        output: Option<Value>,
        /// Completion references of an accepted answer.
        completions: BTreeMap<String, String>,
        /// The refusal code of a refusal.
        refusal: Option<String>,
    },
    /// A receipt lookup for a call's original key is queued.
    RequestReceipt {
        /// The call step.
        step: String,
    },
    /// A receipt lookup came back without settling anything.
    RecordReceipt {
        /// The call step.
        step: String,
        /// `not-found`, `expired` or `unavailable`.
        result: String,
    },
    /// A wait-for starts.
    StartWait {
        /// The wait-for step.
        step: String,
        /// The completion reference observed.
        reference: String,
        /// When the wait starts.
        started_at: Instant,
        /// The effective observation interval.
        interval_seconds: u64,
        /// When the wait times out.
        timeout_at: Instant,
    },
    /// A wait-until starts.
    StartTimer {
        /// The wait-until step.
        step: String,
        /// The instant waited for.
        until: Instant,
    },
    /// A timer is set (or moved).
    ScheduleTimer {
        /// Which.
        timer: Timer,
        /// When it is due.
        at: Instant,
    },
    /// A timer is removed (it fired, or is no longer wanted).
    CancelTimer {
        /// Which.
        timer: Timer,
    },
    /// An observation of a wait-for's completion is queued.
    Observe {
        /// The wait-for step.
        step: String,
        /// Its sequence number.
        seq: u32,
        /// When it is queued.
        at: Instant,
    },
    /// An observation came back.
    RecordObservation {
        /// The wait-for step.
        step: String,
        /// Whether it counts as an observation (pending or complete; an unavailable source does not).
        counted: bool,
    },
    /// A wait ends.
    ResolveWait {
        /// The wait step.
        step: String,
        /// How.
        resolution: WaitResolution,
        /// The completion value (a completed wait-for).
        value: Option<Value>,
    },
    /// The run needs an operator.
    EnterAttention {
        /// Why.
        reason: Attention,
    },
    /// The run no longer needs an operator.
    LeaveAttention,
    /// Cancellation was requested.
    RequestCancel {
        /// How the run proceeds to its end.
        mode: CancelMode,
    },
    /// The run ends.
    EndRun {
        /// Its final state.
        state: RunState,
        /// The outcome of the finish step reached, if any.
        outcome: Option<String>,
        /// The output it publishes, if any.
        output: Option<Value>,
        /// Why it failed or expired.
        failure: Option<Failure>,
    },
    /// A restore hold is placed on the run.
    PlaceHold,
    /// The restore hold is released.
    ReleaseHold,
    /// An entry for the audit journal.
    Audit {
        /// What kind of entry.
        kind: AuditKind,
        /// The step it concerns.
        step: Option<String>,
        /// A description without protected payload.
        detail: String,
    },
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitResolution {
    /// The instant was reached or the completion arrived.
    Completed,
    /// The wait-for timed out.
    TimedOut,
    /// The run was cancelled during the wait.
    Cancelled,
}

/// Kinds of audit entries the machine writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditKind {
    /// The run was admitted.
    Admission,
    /// A decision: a step entered, a route taken, the run ended.
    Decision,
    /// A command or lookup was queued for a product.
    Dispatch,
    /// A product's answer was classified.
    Classification,
    /// An operator acted (the service adds the operator's identity).
    Operator,
    /// A restore hold changed.
    Hold,
}
