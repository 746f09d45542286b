//! Events: every input to a run (an admission, a product's answer, a timer, an
//! operator's command) as the machine receives it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Something that happened to a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    /// The run was admitted (always its first event).
    Admitted,
    /// A product answered an attempt of a call.
    CallAnswered {
        /// The call step.
        step: String,
        /// The attempt the answer is for (stale attempts are ignored).
        attempt: u32,
        /// How the answer was classified.
        answer: CallAnswer,
    },
    /// A product answered a receipt lookup (a reconcile).
    ReceiptAnswered {
        /// The call step being reconciled.
        step: String,
        /// What the receipt says.
        answer: ReceiptAnswer,
    },
    /// An observation of a wait-for's completion came back.
    CompletionObserved {
        /// The wait-for step.
        step: String,
        /// The observation's sequence number (stale ones are ignored).
        seq: u32,
        /// What was observed.
        answer: Observation,
    },
    /// A timer is due.
    TimerDue {
        /// Which timer.
        timer: Timer,
    },
    /// A completion notification for this run's wait arrived (a nudge, no result).
    CompletionNotified {
        /// The wait-for step it concerns.
        step: String,
    },
    /// An operator or the owner asked to cancel the run.
    CancelRequested,
    /// An operator asked to resend a call's saved command with its original key.
    RetrySameRequested {
        /// The call step.
        step: String,
    },
    /// An operator asked to settle an unknown effect from the product's receipt.
    ReconcileRequested {
        /// The call step.
        step: String,
    },
    /// An operator placed a restore hold.
    RestoreHoldPlaced,
    /// An operator released the restore hold.
    RestoreHoldReleased,
}

/// A classified answer to a call attempt (docs/reference/runs.md#calls-and-prepared-commands).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum CallAnswer {
    /// Success; the effect is accepted.
    Accepted {
        /// The product's output.
        output: Value,
        /// Completion name -> reference.
        #[serde(default)]
        completions: BTreeMap<String, String>,
    },
    /// The product refused.
    Refused {
        /// The refusal code.
        code: String,
    },
    /// Definitely not done (429/503, connection refused before sending).
    Retryable {
        /// The product's `Retry-After`, if any.
        #[serde(default)]
        retry_after_seconds: Option<u64>,
    },
    /// May have reached the product; no answer.
    Uncertain,
}

/// What a receipt lookup found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum ReceiptAnswer {
    /// The original key's result.
    Found {
        /// The output of the original command.
        output: Value,
        /// Completion name -> reference.
        #[serde(default)]
        completions: BTreeMap<String, String>,
    },
    /// The product has no record of the key (which does not prove nothing happened).
    NotFound,
    /// The receipt is gone.
    Expired,
    /// The product could not be asked.
    Unavailable,
}

impl ReceiptAnswer {
    /// The spelling of docs/reference/products.md#receipts.
    pub fn as_str(&self) -> &'static str {
        match self {
            ReceiptAnswer::Found { .. } => "found",
            ReceiptAnswer::NotFound => "not-found",
            ReceiptAnswer::Expired => "expired",
            ReceiptAnswer::Unavailable => "unavailable",
        }
    }
}

/// What an observation of a completion found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Observation {
    /// Not complete yet.
    Pending,
    /// Complete with this value.
    Complete {
        /// The completion value.
        value: Value,
    },
    /// The source could not be observed this time (not counted as an observation).
    Unavailable,
}

/// The timers a run can have.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Timer {
    /// The run deadline.
    RunDeadline,
    /// A wait-until's instant.
    WaitUntil {
        /// The step.
        step: String,
    },
    /// The next observation of a wait-for.
    Observation {
        /// The step.
        step: String,
    },
    /// A wait-for's timeout.
    WaitTimeout {
        /// The step.
        step: String,
    },
}

impl Timer {
    /// Order among timers due at the same instant
    /// (docs/reference/runs.md#waits): run deadline, wait timeout, then
    /// observations and timers. (Cancel, an operator event, sits between the
    /// deadline and the timeout; the caller orders it.)
    pub fn precedence(&self) -> u8 {
        match self {
            Timer::RunDeadline => 0,
            Timer::WaitTimeout { .. } => 2,
            Timer::Observation { .. } | Timer::WaitUntil { .. } => 3,
        }
    }
}
